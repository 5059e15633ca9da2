"""The launcher's command line (launch/cli.py) in real processes: --dry_run prints
exactly what each cluster backend would submit; without it the Steps run (a stand-in
kubectl / sbatch on PATH records what it was given); bad input ends with one line on
stderr and exit status 2."""

import os
import shutil
import stat
import subprocess
import sys
import tempfile
from unittest import mock

from absl.testing import absltest

from launch import kubernetes
from launch import cli as launch
from launch import slurm
from launch import submit
from launch import tpu_vm
from launch import vertex
from launch.job import Job
from launch.job import LaunchError

ROOT = launch.ROOT
IMAGE = "us-docker.pkg.dev/p/zoo/zoo-cpu:1"
BINDING = "--gin_bindings=EPOCHS = 3"


def run_cli(*args, path=None):
  env = {k: v for k, v in os.environ.items() if k != "BUILD_WORKING_DIRECTORY"}
  env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
  if path is not None:
    env["PATH"] = path
  return subprocess.run([sys.executable, "-m", "launch.cli", *args], cwd=ROOT, env=env,
                        capture_output=True, text=True, timeout=120, check=False)


SUBMISSION = "abc123"


def flagship(**fields):
  return Job(**dict(dict(name="nfnet-long-tail", recipe="nfnet_long_tail",
                         recipe_args=(BINDING,), submission=SUBMISSION), **fields))


# (launcher flags, the Steps they must print).
DRY_RUNS = {
    "kubernetes": (
        ["--backend=kubernetes", "--workers=2", f"--image={IMAGE}",
         "--model_dir=gs://b/tiny", "--namespace=ml"],
        kubernetes.steps(flagship(workers=2, image=IMAGE, model_dir="gs://b/tiny"),
                         kubernetes.Options(namespace="ml"))),
    "kubernetes_indexed_job": (
        ["--backend=kubernetes", "--k8s_kind=indexed_job", "--workers=3",
         f"--image={IMAGE}", "--volume_claim=runs"],
        kubernetes.steps(flagship(workers=3, image=IMAGE),
                         kubernetes.Options(kind="indexed_job", volume_claim="runs"))),
    "vertex": (
        ["--backend=vertex", "--workers=2", f"--image={IMAGE}", "--model_dir=gs://b/tiny",
         "--region=us-central1", "--accelerator=NVIDIA_TESLA_T4",
         "--accelerators_per_worker=1"],
        vertex.steps(flagship(workers=2, image=IMAGE, model_dir="gs://b/tiny",
                          accelerator="NVIDIA_TESLA_T4", accelerators_per_worker=1),
                     vertex.Options(region="us-central1"))),
    "tpu_vm": (
        ["--backend=tpu_vm", f"--image={IMAGE}", "--model_dir=gs://b/tiny",
         "--zone=us-central2-b", "--tpu_name=my-tpu", "--accelerator=v4-8"],
        tpu_vm.steps(flagship(image=IMAGE, model_dir="gs://b/tiny", accelerator="v4-8"),
                     tpu_vm.Options(tpu_name="my-tpu", zone="us-central2-b"))),
    "slurm": (
        ["--backend=slurm", "--workers=2", "--model_dir=/shared/tiny",
         "--slurm_workdir=/shared/zoo", "--slurm_partition=cpu"],
        slurm.steps(flagship(workers=2, model_dir="/shared/tiny"),
                    slurm.Options(workdir="/shared/zoo", partition="cpu"))),
}
for _flags, _ in DRY_RUNS.values():
  _flags.append(f"--submission_id={SUBMISSION}")


def fake_tool(directory, name, status=0):
  """`name` on PATH: records its arguments and the files they name, exits `status`."""
  path = os.path.join(directory, name)
  with open(path, "w") as f:
    f.write("#!/bin/sh\n"
            f'printf "%s\\n" "$@" > "{directory}/{name}.args"\n'
            f'for a in "$@"; do [ -f "$a" ] && cp "$a" "{directory}/{name}.file"; done\n'
            f"exit {status}\n")
  os.chmod(path, os.stat(path).st_mode | stat.S_IEXEC)
  # The PATH to run with: the stand-in first, then where cp is.
  return directory + os.pathsep + os.path.dirname(shutil.which("cp"))


class DryRunTest(absltest.TestCase):

  def test_every_cluster_backend_prints_its_steps(self):
    for backend, (flags, steps) in DRY_RUNS.items():
      result = run_cli("--recipe=nfnet_long_tail", *flags, "--dry_run", "--", BINDING)
      self.assertEqual((result.returncode, result.stderr), (0, ""), backend)
      self.assertEqual(result.stdout, submit.render(steps), backend)
      self.assertIn("==> {dir}/" if backend != "tpu_vm" else "$ gcloud", result.stdout)

  def test_the_trainer_gets_the_mounted_bucket_not_the_url(self):
    # recipes.train refuses a URL model_dir: gs://b/tiny is mounted at /gcs/b/tiny.
    for backend in ("kubernetes", "vertex", "tpu_vm"):
      flags, _ = DRY_RUNS[backend]
      self.assertIn("--model_dir=gs://b/tiny", flags)
      result = run_cli("--recipe=nfnet_long_tail", *flags, "--dry_run")
      self.assertEqual(result.returncode, 0, result.stderr)
      self.assertIn("--model_dir=/gcs/b/tiny", result.stdout, backend)
      self.assertNotIn("--model_dir=gs://", result.stdout, backend)

  def test_the_name_defaults_to_the_recipes(self):
    result = run_cli("--backend=slurm", "--recipe=nfnet_long_tail",
                     "--model_dir=/s/t", "--slurm_workdir=/s/zoo", "--dry_run")
    self.assertIn("#SBATCH --job-name=nfnet-long-tail\n", result.stdout)

  def test_local_prints_its_workers(self):
    result = run_cli("--backend=local", "--recipe=nfnet_long_tail", "--workers=2",
                     "--dry_run")
    self.assertEqual(result.returncode, 0, result.stderr)
    lines = result.stdout.splitlines()
    self.assertLen(lines, 2)
    self.assertTrue(all(line.startswith("TF_CONFIG=") for line in lines))


class SubmitTest(absltest.TestCase):

  def test_runs_the_command_on_the_written_file(self):
    with tempfile.TemporaryDirectory() as tools:
      path = fake_tool(tools, "sbatch")
      flags, steps = DRY_RUNS["slurm"]
      result = run_cli("--recipe=nfnet_long_tail", *flags, "--", BINDING, path=path)
      self.assertEqual(result.returncode, 0, result.stderr)
      with open(os.path.join(tools, "sbatch.args")) as f:
        (script_path,) = f.read().splitlines()
      self.assertTrue(script_path.endswith("/job.sbatch"))
      self.assertNotIn("{dir}", script_path)
      self.assertFalse(os.path.exists(script_path))  # the directory is cleaned up
      with open(os.path.join(tools, "sbatch.file")) as f:
        self.assertEqual(f.read(), steps[0].files[0][1])
      self.assertIn(f"$ sbatch {script_path}", result.stderr)

  def test_a_failing_command_gives_its_status_and_no_next_steps(self):
    with tempfile.TemporaryDirectory() as tools:
      path = fake_tool(tools, "kubectl", status=5)
      flags, _ = DRY_RUNS["kubernetes"]
      result = run_cli("--recipe=nfnet_long_tail", *flags, path=path)
      self.assertEqual(result.returncode, 5)
      self.assertIn("error: kubectl exited with status 5", result.stderr)
      self.assertNotIn("Submitted", result.stdout)  # no next steps after a failure

  def test_a_missing_tool_suggests_the_dry_run(self):
    with tempfile.TemporaryDirectory() as empty:
      flags, _ = DRY_RUNS["vertex"]
      result = run_cli("--recipe=nfnet_long_tail", *flags, path=empty)
      self.assertEqual(result.returncode, 2)
      self.assertEqual(result.stderr.splitlines(), [
          "error: gcloud is not on PATH; install it, or add --dry_run to print what "
          "would be submitted"])


# What each engine's next-steps text must hold: (status, logs, cancel) commands' starts,
# and TensorBoard's --logdir.
NEXT_STEPS = {
    "kubernetes": (f"TFJob nfnet-long-tail-{SUBMISSION}",
                   ["kubectl get tfjob/nfnet-long-tail-abc123 --namespace=ml",
                    "kubectl logs --follow nfnet-long-tail-abc123-chief-0 --namespace=ml",
                    "kubectl delete tfjob/nfnet-long-tail-abc123 --namespace=ml"],
                   "gs://b/tiny"),
    "kubernetes_indexed_job": (
        f"Kubernetes Job nfnet-long-tail-{SUBMISSION} (and Service "
        f"nfnet-long-tail-{SUBMISSION})",
        ["kubectl get job/nfnet-long-tail-abc123",
         "kubectl logs --follow --selector=job-name=nfnet-long-tail-abc123,"
         "batch.kubernetes.io/job-completion-index=0",
         "kubectl delete job/nfnet-long-tail-abc123 service/nfnet-long-tail-abc123"],
        "/runs/nfnet-long-tail"),
    "vertex": (f"Vertex AI CustomJob nfnet-long-tail-{SUBMISSION} (display name)",
               ["gcloud ai custom-jobs list --region=us-central1 "
                "--filter=displayName=nfnet-long-tail-abc123 '--format=value(name)'",
                "gcloud ai custom-jobs describe JOB_ID --region=us-central1",
                "gcloud ai custom-jobs stream-logs JOB_ID --region=us-central1",
                "gcloud ai custom-jobs cancel JOB_ID --region=us-central1"], "gs://b/tiny"),
    "tpu_vm": (f"container nfnet-long-tail-{SUBMISSION} on TPU VM my-tpu",
               ["gcloud compute tpus tpu-vm ssh my-tpu --zone=us-central2-b --worker=0 "
                "'--command=sudo docker logs --follow nfnet-long-tail-abc123'",
                "gcloud compute tpus tpu-vm ssh my-tpu --zone=us-central2-b --worker=0 "
                "'--command=sudo docker stop --time=120 nfnet-long-tail-abc123'",
                "gcloud compute tpus tpu-vm delete my-tpu --zone=us-central2-b"],
               "gs://b/tiny"),
    "slurm": ("Slurm job nfnet-long-tail",
              ["squeue --name=nfnet-long-tail", "sacct --name=nfnet-long-tail",
               "scancel --name=nfnet-long-tail"], "/shared/tiny"),
}


class NextStepsTest(absltest.TestCase):

  def test_after_a_submission_the_engines_commands_are_printed(self):
    for backend, (name, commands, logdir) in NEXT_STEPS.items():
      flags, _ = DRY_RUNS[backend]
      with tempfile.TemporaryDirectory() as tools:
        for tool in ("kubectl", "gcloud", "sbatch"):
          path = fake_tool(tools, tool)
        result = run_cli("--recipe=nfnet_long_tail", *flags, path=path)
      self.assertEqual(result.returncode, 0, result.stderr)
      said = result.stdout.splitlines()
      self.assertEqual(said[0], f"Submitted {name}.", backend)
      for heading in ("Status:", "Logs:", "Cancel:", "TensorBoard:"):
        self.assertIn(heading, said, backend)
      for command in commands:
        self.assertIn(f"  $ {command}", said, backend)
      self.assertIn(f"  $ tensorboard --logdir={logdir}", said, backend)

  def test_a_fresh_name_on_every_launch(self):
    flags = [f for f in DRY_RUNS["kubernetes"][0] if not f.startswith("--submission_id")]
    names = set()
    for _ in range(2):
      result = run_cli("--recipe=nfnet_long_tail", *flags, "--dry_run")
      self.assertEqual(result.returncode, 0, result.stderr)
      lines = {l for l in result.stdout.splitlines() if l.startswith("  name: ")}
      self.assertLen(lines, 1)  # the TFJob and its NetworkPolicy share the name
      names |= lines
      self.assertIn("--model_dir=/gcs/b/tiny", result.stdout)
    self.assertLen(names, 2)
    self.assertTrue(all(n.startswith("  name: nfnet-long-tail-") for n in names))


BAD_INPUTS = [
    ("unknown_backend", ["--backend=aws", "--recipe=nfnet_long_tail"],
     "backend.*one of.*--helpshort"),
    ("no_backend", ["--recipe=nfnet_long_tail"], "no --backend; choose one of local"),
    ("no_recipe", ["--backend=local"], "no --recipe"),
    ("unknown_recipe", ["--backend=local", "--recipe=nfnet_long_tale"],
     "recipes/nfnet_long_tale.gin not found; choose one of .*nfnet_long_tail"),
    ("zero_workers", ["--backend=local", "--recipe=nfnet_long_tail", "--workers=0"],
     "--workers=0 must be a whole number >= 1"),
    ("bad_name", ["--backend=local", "--recipe=nfnet_long_tail", "--name=My_Job"],
     "--name='My_Job' is not a valid job name"),
    ("unknown_flag", ["--backend=local", "--recipe=nfnet_long_tail", "--wrokers=2"],
     "Unknown command line flag 'wrokers'"),
    ("stray_argument", ["--backend=local", "--recipe=nfnet_long_tail", "EPOCHS=3"],
     "unexpected arguments 'EPOCHS=3'; recipe flags go after a literal --"),
    ("recipe_flag_without_dashes", ["--backend=local", "--recipe=nfnet_long_tail", "--",
                                    "EPOCHS=3"], "recipe flag 'EPOCHS=3' does not start"),
    ("launchers_recipe_flag", ["--backend=local", "--recipe=nfnet_long_tail", "--",
                               "--strategy=mirrored"], "'--strategy=mirrored' is the launcher"),
    # Issue 57: a flag file would carry the launcher's own flags past the check above;
    # `{dir}` is the launcher's placeholder for its files, replaced inside quoted
    # remote commands; a mount or model_dir over the image's code hides or shadows it.
    ("recipe_flagfile", ["--backend=local", "--recipe=nfnet_long_tail", "--",
                         "--flagfile=/tmp/flags"], "'--flagfile=/tmp/flags' is refused"),
    ("recipe_flag_with_the_dir_placeholder", [
        "--backend=local", "--recipe=nfnet_long_tail", "--",
        "--gin_bindings=DATA_DIR = '{dir}/x'"], "holds \\{dir\\}, the launcher's"),
    ("kubernetes_volume_over_the_code", [
        "--backend=kubernetes", "--recipe=nfnet_long_tail", f"--image={IMAGE}",
        "--volume_claim=runs", "--volume_mount=/opt"],
     "--volume_mount='/opt' is over the image's code"),
    ("kubernetes_volume_at_the_root", [
        "--backend=kubernetes", "--recipe=nfnet_long_tail", f"--image={IMAGE}",
        "--volume_claim=runs", "--volume_mount=/"], "--volume_mount='/' is over the image"),
    ("slurm_container_model_dir_over_the_code", [
        "--backend=slurm", "--recipe=nfnet_long_tail", f"--image={IMAGE}",
        "--model_dir=/opt/zoo/runs", "--slurm_workdir=/s/zoo"],
     "--model_dir='/opt/zoo/runs' is over the image's code"),
    ("slurm_container_mount_over_the_code", [
        "--backend=slurm", "--recipe=nfnet_long_tail", f"--image={IMAGE}",
        "--model_dir=/shared/runs/x", "--slurm_container_mounts=/data:/data,/src:/opt"],
     "--slurm_container_mounts='/opt' is over the image's code"),
    ("vertex_without_region", ["--backend=vertex", "--recipe=nfnet_long_tail",
                               f"--image={IMAGE}", "--model_dir=gs://b/x"],
     "vertex backend needs --region"),
    ("tpu_without_zone", ["--backend=tpu_vm", "--recipe=nfnet_long_tail",
                          f"--image={IMAGE}", "--model_dir=gs://b/x", "--tpu_name=t"],
     "--zone and --tpu_name"),
    ("kubernetes_without_image", ["--backend=kubernetes", "--recipe=nfnet_long_tail",
                                  "--model_dir=gs://b/x"], "no image: give --"),
    ("kubernetes_local_model_dir", ["--backend=kubernetes", "--recipe=nfnet_long_tail",
                                    f"--image={IMAGE}", "--model_dir=runs/x"],
     "not reachable from every pod"),
    ("bad_k8s_kind", ["--backend=kubernetes", "--k8s_kind=mpijob",
                      "--recipe=nfnet_long_tail"], "k8s_kind.*one of"),
    ("slurm_without_workdir", ["--backend=slurm", "--recipe=nfnet_long_tail",
                               "--model_dir=/s/x"], "--slurm_workdir"),
    ("slurm_gs_model_dir", ["--backend=slurm", "--recipe=nfnet_long_tail",
                            "--model_dir=gs://b/x", "--slurm_workdir=/s/zoo"],
     "--model_dir='gs://b/x' is a URL; .*mount the bucket with gcsfuse on every node"),
    ("slurm_container_model_dir_with_comma", [
        "--backend=slurm", "--recipe=nfnet_long_tail", f"--image={IMAGE}",
        "--model_dir=/shared/runs/a,b"], "--model_dir='/shared/runs/a,b' holds ',' or ':'"),
    ("tpu_mount_path_model_dir", ["--backend=tpu_vm", "--recipe=nfnet_long_tail",
                                  f"--image={IMAGE}", "--model_dir=/gcs/b/x",
                                  "--zone=z", "--tpu_name=t", "--accelerator=v4-8"],
     "give a gs:// path"),
    ("bad_bucket", ["--backend=vertex", "--recipe=nfnet_long_tail", f"--image={IMAGE}",
                    "--model_dir=gs://My_Bucket/x", "--region=us-central1"],
     "'My_Bucket' is not a Cloud Storage bucket name"),
]


class BadInputTest(absltest.TestCase):

  def test_one_line_and_status_2(self):
    for name, args, pattern in BAD_INPUTS:
      result = run_cli(*args, "--dry_run")
      self.assertEqual(result.returncode, 2, (name, result.stderr))
      self.assertEqual(result.stdout, "", name)
      lines = result.stderr.splitlines()
      self.assertLen(lines, 1, (name, result.stderr))
      self.assertRegex(lines[0], "^error: .*" + pattern, name)


class LookupTest(absltest.TestCase):

  def test_bazel_run_also_looks_in_the_workspace(self):
    with mock.patch.dict(os.environ, {"BUILD_WORKSPACE_DIRECTORY": "/ws"}):
      self.assertEqual(launch.roots(), [ROOT, "/ws", "/ws/bazel-bin"])
    with mock.patch.dict(os.environ):
      os.environ.pop("BUILD_WORKSPACE_DIRECTORY", None)
      self.assertEqual(launch.roots(), [ROOT])

  def test_recipes_in_any_root(self):
    with tempfile.TemporaryDirectory() as empty, tempfile.TemporaryDirectory() as ws:
      os.makedirs(os.path.join(ws, "recipes"))
      open(os.path.join(ws, "recipes", "mine.gin"), "w").close()
      launch.check_recipe("mine", [empty, ws])
      with self.assertRaisesRegex(LaunchError, "recipes/yours.gin not found; choose one "
                                  "of mine$"):
        launch.check_recipe("yours", [empty, ws])

  def test_registry_and_the_built_tag(self):
    with tempfile.TemporaryDirectory() as root:
      os.makedirs(os.path.join(root, "launch", "image"))
      for kind in ("cpu", "gpu"):
        with open(os.path.join(root, "launch", "image", f"{kind}_image.txt"), "w") as f:
          f.write(f"zoo-{kind}:abc123\n")
      self.assertEqual(launch.default_image("us-docker.pkg.dev/p/zoo/", False, [root]),
                       "us-docker.pkg.dev/p/zoo/zoo-cpu:abc123")
      self.assertEqual(launch.default_image("r", True, [root]), "r/zoo-gpu:abc123")
      with self.assertRaisesRegex(LaunchError, "give --registry"):
        launch.default_image(None, False, [root])

  def test_no_built_tag_asks_for_an_image(self):
    with tempfile.TemporaryDirectory() as root:
      with self.assertRaisesRegex(LaunchError, "give --image.*gpu_image.txt"):
        launch.default_image("r", True, [root])

  def test_recipe_flags_follow_the_first_double_dash(self):
    self.assertEqual(launch.split_argv(["l", "--backend=local", "--", "--a", "--", "--b"]),
                     (["l", "--backend=local"], ["--a", "--", "--b"]))
    self.assertEqual(launch.split_argv(["l", "--backend=local"]),
                     (["l", "--backend=local"], []))


if __name__ == "__main__":
  absltest.main()
