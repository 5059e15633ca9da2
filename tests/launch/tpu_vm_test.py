"""launch/tpu_vm.py: the gcloud sequence (create, scp, build, run on every host), the
TPU image's Dockerfile, bad options, and the golden file."""

import dataclasses
import shlex
import shutil
import subprocess

from absl.testing import absltest

from launch import submit
from launch import tpu_vm
from launch.job import Job
from launch.job import LaunchError
import os
from tests.launch import golden

JOB = Job(name="nfnet-long-tail-full", recipe="nfnet_long_tail_full",
          model_dir="gs://bucket/runs/full", image="us-docker.pkg.dev/p/zoo/zoo-cpu:1",
          accelerator="v4-8", recipe_args=("--gin_bindings=DATA_DIR = 'gs://b/tfds'",))
OPTIONS = tpu_vm.Options(tpu_name="my-tpu", zone="us-central2-b", project="p",
                         create=True)
GCLOUD_TPU = ("gcloud", "compute", "tpus", "tpu-vm")
WHERE = ("--zone=us-central2-b", "--project=p")


class TpuVmTest(absltest.TestCase):

  def test_create_copy_build_mount_run(self):
    create, scp, build, mount, run = tpu_vm.steps(JOB, OPTIONS)
    self.assertEqual(create.argv, GCLOUD_TPU + ("create", "my-tpu") + WHERE + (
        "--accelerator-type=v4-8", "--version=tpu-ubuntu2204-base"))
    self.assertEqual(create.unless, GCLOUD_TPU + ("describe", "my-tpu") + WHERE)
    self.assertEqual(scp.argv, GCLOUD_TPU + (
        "scp", "{dir}/Dockerfile.tpu", "my-tpu:Dockerfile.tpu") + WHERE + ("--worker=all",))
    for step in (build, mount, run):
      self.assertEqual(step.argv[:len(GCLOUD_TPU) + 5],
                       GCLOUD_TPU + ("ssh", "my-tpu") + WHERE + ("--worker=all",))
    self.assertEqual(build.argv[-1], "--command=sudo gcloud auth configure-docker "
                     "us-docker.pkg.dev --quiet && sudo docker build "
                     "--tag=nfnet-long-tail-full:tpu - < Dockerfile.tpu")
    self.assertEqual(mount.argv[-1], "--command=" + tpu_vm.mount_command("bucket"))
    earlier, docker = run.argv[-1][len("--command="):].split(" && ")
    self.assertEqual(earlier, "sudo docker ps --all --quiet --filter "
                     "label=zoo-run=nfnet-long-tail-full | xargs --no-run-if-empty sudo "
                     "docker rm --force")
    docker = shlex.split(docker)
    self.assertEqual(docker[:9], ["sudo", "docker", "run", "--detach",
                                  "--name=nfnet-long-tail-full",
                                  "--label=zoo-run=nfnet-long-tail-full", "--privileged",
                                  "--net=host", "--volume=/gcs/bucket:/gcs/bucket"])
    self.assertEqual(docker[9], "nfnet-long-tail-full:tpu")
    # The trainer writes to the hosts' Cloud Storage FUSE mount of the bucket.
    self.assertEqual(docker[10:], dataclasses.replace(
        JOB, model_dir="/gcs/bucket/runs/full").command(strategy="tpu",
                                                        extra=["--tpu=local"]))

  def test_every_host_mounts_the_bucket(self):
    command = tpu_vm.mount_command("my-bucket")
    # gcsfuse where missing, from Google's apt repository; then the mount, unless there.
    install, mount = command.split(" && sudo mkdir -p ")
    self.assertTrue(install.startswith("{ command -v gcsfuse > /dev/null || { "))
    self.assertIn('echo "deb [signed-by=/usr/share/keyrings/cloud.google.asc] '
                  'https://packages.cloud.google.com/apt gcsfuse-$(lsb_release -c -s) '
                  'main" | sudo tee /etc/apt/sources.list.d/gcsfuse.list', install)
    self.assertIn("curl -fsSL https://packages.cloud.google.com/apt/doc/apt-key.gpg | "
                  "sudo tee /usr/share/keyrings/cloud.google.asc", install)
    self.assertTrue(install.endswith("sudo apt-get update && sudo apt-get install --yes "
                                     "gcsfuse; }; }"))
    self.assertEqual(mount, "/gcs/my-bucket && { mountpoint -q /gcs/my-bucket || "
                     "sudo gcsfuse --implicit-dirs my-bucket /gcs/my-bucket; }")
    bash = shutil.which("bash")
    if bash:
      result = subprocess.run([bash, "-n"], input=command, text=True, capture_output=True,
                              check=False)
      self.assertEqual(result.returncode, 0, result.stderr)
  def test_an_existing_tpu_is_not_created(self):
    options = tpu_vm.Options(tpu_name="my-tpu", zone="us-central2-b")
    steps = tpu_vm.steps(Job(name="t", recipe="nfnet_long_tail", image="r/zoo-cpu:1",
                             model_dir="gs://b/t", accelerator="v5litepod-8"), options)
    self.assertEqual([s.argv[4] for s in steps], ["scp", "ssh", "ssh", "ssh"])
    self.assertTrue(steps[1].argv[-1].startswith("--command=sudo docker build"))
    self.assertFalse(any(s.unless for s in steps))

  def test_the_dockerfile_swaps_in_tensorflow_tpu(self):
    text = tpu_vm.dockerfile(JOB, OPTIONS)
    self.assertTrue(text.startswith(f"FROM {JOB.image}\n"))
    self.assertIn("pip uninstall --yes tensorflow &&", text)
    self.assertIn("pip install --no-cache-dir tensorflow-tpu==2.20.0", text)
    self.assertIn(f"--find-links={tpu_vm.LIBTPU_INDEX}", text)
    pinned = tpu_vm.Options(tpu_name="t", zone="z",
                            packages="tensorflow-tpu==2.20.0 libtpu==0.0.14")
    self.assertIn("install --no-cache-dir tensorflow-tpu==2.20.0 libtpu==0.0.14",
                  tpu_vm.dockerfile(JOB, pinned))

  def test_bad_options_are_refused(self):
    base = dict(name="t", recipe="nfnet_long_tail", image="r/z:1", model_dir="gs://b/t",
                accelerator="v4-8")
    cases = [
        (Job(**base), tpu_vm.Options(tpu_name="my-tpu"), "--zone and --tpu_name"),
        (Job(**base), tpu_vm.Options(zone="z"), "--zone and --tpu_name"),
        (Job(**base, workers=2), tpu_vm.Options(tpu_name="t", zone="z"), "drop --workers"),
        (Job(**base, accelerators_per_worker=1), tpu_vm.Options(tpu_name="t", zone="z"),
         "accelerators_per_worker is for GPUs"),
        (Job(**dict(base, accelerator="")), tpu_vm.Options(tpu_name="t", zone="z"),
         "needs the TPU VM's type"),
        (Job(**dict(base, model_dir="/runs/t")), tpu_vm.Options(tpu_name="t", zone="z"),
         "gs:// path"),
        # The mount path is not a way round: multi-host slices share only the bucket.
        (Job(**dict(base, model_dir="/gcs/b/t")), tpu_vm.Options(tpu_name="t", zone="z"),
         "gs:// path"),
        (Job(**dict(base, model_dir="gs://B/t")), tpu_vm.Options(tpu_name="t", zone="z"),
         "'B' is not a Cloud Storage bucket name"),
    ]
    for job, options, message in cases:
      with self.assertRaisesRegex(LaunchError, message):
        tpu_vm.steps(job, options)

  def test_golden(self):
    job = dataclasses.replace(JOB, submission="x7k2p9")
    golden.check(self, "tpu_vm.txt", submit.render(tpu_vm.steps(job, OPTIONS)))


def stub_tools(directory, names, script='exit 0'):
  """Executables `names` in `directory` that run `script` (a sh body)."""
  for name in names:
    path = os.path.join(directory, name)
    with open(path, "w") as f:
      f.write(f"#!/bin/sh\n{script}\n")
    os.chmod(path, 0o755)


# A stand-in `docker` keeping its containers as files: `run --name=N` fails where N
# exists (as docker does), `rm --force` removes them, `ps` lists them by label.
FAKE_DOCKER = r'''
state="$STATE"; cmd="$1"; shift
case "$cmd" in
  run) for a in "$@"; do case "$a" in --name=*) n="${a#--name=}";; --label=*) l="${a#--label=}";; esac; done
       [ -e "$state/$n" ] && { echo "Conflict. The container name $n is already in use" >&2; exit 125; }
       echo "$l" > "$state/$n";;
  ps) want="${4#label=}"; for f in "$state"/*; do [ -e "$f" ] && [ "$(cat "$f")" = "$want" ] && basename "$f"; done; exit 0;;
  rm) shift; for n in "$@"; do rm -f "$state/$n"; done;;
esac
'''


class RerunTest(absltest.TestCase):
  """Issue 21's TPU VM defects, each as the property a rerun or a host relies on."""

  def run_on_host(self, command, state):
    """`command` (an ssh --command) in bash, as the host would, with stand-in tools."""
    tools = self.create_tempdir().full_path
    stub_tools(tools, ["sudo"], 'exec "$@"')
    stub_tools(tools, ["docker"], FAKE_DOCKER)
    real = os.path.dirname(shutil.which("xargs"))
    return subprocess.run(["bash", "-c", command], env={"PATH": f"{tools}:{real}",
                                                        "STATE": state},
                          capture_output=True, text=True, timeout=30, check=False)

  def test_a_rerun_starts_a_new_container_where_the_last_one_was(self):
    state = self.create_tempdir().full_path
    for submission in ("aaaaa1", "bbbbb2", "bbbbb2"):
      job = dataclasses.replace(JOB, submission=submission)
      run = tpu_vm.steps(job, OPTIONS)[-1].argv[-1][len("--command="):]
      result = self.run_on_host(run, state)
      self.assertEqual(result.returncode, 0, result.stderr)
      self.assertEqual(os.listdir(state), [f"nfnet-long-tail-full-{submission}"])

  def test_create_runs_only_where_describe_fails(self):
    create = tpu_vm.steps(JOB, dataclasses.replace(OPTIONS, spot=True))[0]
    self.assertEqual(create.argv[-1], "--spot")
    self.assertEqual(create.unless[:5], GCLOUD_TPU + ("describe",))
    self.assertIn("describe my-tpu --zone=us-central2-b --project=p > /dev/null 2>&1 || "
                  "gcloud compute tpus tpu-vm create my-tpu", submit.render([create]))

  def test_a_multi_host_slice_is_refused(self):
    for accelerator in ("v4-16", "v5litepod-32", "v3-2048"):
      with self.assertRaisesRegex(LaunchError, "multi-host slice; the tpu_vm backend runs "
                                  "single-host TPU VMs only"):
        tpu_vm.steps(dataclasses.replace(JOB, accelerator=accelerator), OPTIONS)
    tpu_vm.steps(dataclasses.replace(JOB, accelerator="v5litepod-8"), OPTIONS)

  def test_packages_reach_pip_as_words(self):
    options = dataclasses.replace(OPTIONS, packages="tensorflow-tpu>=2.20 libtpu~=0.0.14")
    line = tpu_vm.dockerfile(JOB, options).split("RUN ", 1)[1].split("\nWORKDIR")[0]
    here = self.create_tempdir().full_path
    result = subprocess.run(
        ["bash", "-c", "python3() { printf '[%s]\\n' \"$@\"; }; " +
         line.replace("\\\n", " ")], cwd=here, capture_output=True, text=True,
        timeout=30, check=False)
    self.assertEqual(result.returncode, 0, result.stderr)
    self.assertIn("[tensorflow-tpu>=2.20]\n[libtpu~=0.0.14]\n", result.stdout)
    self.assertEqual(os.listdir(here), [])  # no redirect wrote a file "=2.20"
    for bad in ("tensorflow-tpu>=2.20;touch x", "$(id)", "a b'c"):
      with self.assertRaisesRegex(LaunchError, "is not a pip requirement"):
        tpu_vm.steps(JOB, dataclasses.replace(OPTIONS, packages=bad))

  def test_the_image_is_an_oci_reference(self):
    for good in ("r/z:1", "localhost:5000/zoo/cpu:v1.2",
                 "us-docker.pkg.dev/p/zoo/zoo-cpu@sha256:" + "a" * 64):
      tpu_vm.steps(dataclasses.replace(JOB, image=good), OPTIONS)
    for bad in ("r/z:1; reboot", "$(id)", "r/z:1 --privileged", "r/Z:1", "-v/:/host"):
      with self.assertRaisesRegex(LaunchError, "is not an image reference"):
        tpu_vm.steps(dataclasses.replace(JOB, image=bad), OPTIONS)


if __name__ == "__main__":
  absltest.main()
