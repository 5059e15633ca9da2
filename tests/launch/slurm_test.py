"""launch/slurm.py: the sbatch script's directives and srun line (on the host, and in
a pyxis container), its shell syntax, bad options, and the golden file."""

import dataclasses
import os
import shlex
import shutil
import subprocess

from absl.testing import absltest

from launch import slurm
from launch.job import IMAGE_WORKDIR
from launch.job import Job
from launch.job import LaunchError
from tests.launch import golden

JOB = Job(name="nfnet-long-tail", recipe="nfnet_long_tail", workers=4,
          model_dir="/shared/runs/nfnet", accelerator="a100", accelerators_per_worker=2,
          recipe_args=("--gin_bindings=EPOCHS = 3",))
OPTIONS = slurm.Options(partition="gpu", time="1-00:00:00", account="ml",
                        workdir="/shared/zoo",
                        setup=("source /shared/zoo-venv/bin/activate",))


def directives(text):
  return [line[len("#SBATCH "):] for line in text.splitlines()
          if line.startswith("#SBATCH ")]


class SlurmTest(absltest.TestCase):

  def test_one_task_a_node_with_its_gpus(self):
    self.assertEqual(directives(slurm.script(JOB, OPTIONS)), [
        "--job-name=nfnet-long-tail", "--nodes=4", "--ntasks=4", "--ntasks-per-node=1",
        "--cpus-per-task=8", "--gpus-per-task=a100:2", "--partition=gpu", "--time=1-00:00:00", "--account=ml",
        "--output=nfnet-long-tail-%j.out", "--open-mode=append", "--requeue",
        "--signal=TERM@120"])
    cpu = Job(name="t", recipe="nfnet_long_tail", workers=2, model_dir="/s/t")
    found = directives(slurm.script(cpu, slurm.Options(workdir="/s/zoo")))
    self.assertFalse([d for d in found if d.startswith("--gpus")])
    self.assertFalse([d for d in found if d.startswith("--partition")])

  def test_srun_starts_the_trainer_in_the_workspace(self):
    lines = slurm.script(JOB, OPTIONS).splitlines()
    body = lines[lines.index("set -euo pipefail") + 1:]
    self.assertEqual(body[:3], ["cd /shared/zoo", "source /shared/zoo-venv/bin/activate",
                                "mkdir -p /shared/runs/nfnet"])
    self.assertEqual(body[3], 'unreached=/shared/runs/nfnet/.launch/'
                     '"slurm-$SLURM_JOB_ID-unreached"')
    srun_line = shlex.split(body[4])
    self.assertEqual(srun_line[:srun_line.index("&&")],
                     ["srun", "--kill-on-bad-exit=1", "--distribution=block"] +
                     JOB.command(extra=["--cluster=slurm"]))

  def test_tasks_per_node_and_resources(self):
    """Several workers a node (a laptop, one big node), what each holds, and whole
    nodes on request."""
    found = directives(slurm.script(JOB, slurm.Options(
        workdir="/z", tasks_per_node=2, cpus_per_task=3, mem="64G", exclusive=True,
        time="90", signal_seconds=300)))
    for d in ("--nodes=2", "--ntasks=4", "--ntasks-per-node=2", "--cpus-per-task=3",
              "--mem=64G", "--exclusive", "--time=90", "--signal=TERM@300"):
      self.assertIn(d, found)
    three = Job(name="t", recipe="nfnet_long_tail", workers=3, model_dir="/s/t")
    found = directives(slurm.script(three, slurm.Options(workdir="/z", tasks_per_node=8)))
    self.assertContainsSubset(["--nodes=1", "--ntasks=3", "--ntasks-per-node=3"], found)
    self.assertNotIn("--exclusive", found)
    self.assertFalse([d for d in found if d.startswith("--mem")])

  def test_srun_in_a_container(self):
    job = Job(name="t", recipe="nfnet_long_tail", workers=2, model_dir="/s/runs/t",
              image="registry/zoo-cpu:1")
    line = next(l for l in slurm.script(job, slurm.Options(
        container_mounts="/data:/data")).splitlines() if l.startswith("srun "))
    self.assertEqual(shlex.split(line)[:6], [
        "srun", "--kill-on-bad-exit=1", "--distribution=block",
        "--container-image=registry/zoo-cpu:1",
        f"--container-workdir={IMAGE_WORKDIR}",
        "--container-mounts=/s/runs/t:/s/runs/t,/data:/data"])

  def test_registry_named_for_enroot(self):
    # enroot before 4.0 pulls REGISTRY/IMAGE from Docker Hub; REGISTRY#IMAGE names it.
    for given, expected in [
        ("us-docker.pkg.dev/p/zoo/zoo-cpu:1", "us-docker.pkg.dev#p/zoo/zoo-cpu:1"),
        ("localhost:5000/zoo@sha256:" + "a" * 64, "localhost:5000#zoo@sha256:" + "a" * 64),
        ("localhost/zoo", "localhost#zoo"),
        ("nvcr.io/nvidia/tensorflow:24.01-tf2-py3", "nvcr.io#nvidia/tensorflow:24.01-tf2-py3"),
        ("registry/zoo-cpu:1", "registry/zoo-cpu:1"),  # Docker Hub's registry/zoo-cpu
        ("zoo-cpu", "zoo-cpu")]:
      with self.subTest(given):
        job = Job(name="t", recipe="nfnet_long_tail", model_dir="/s/t", image=given)
        srun = next(l for l in slurm.script(job, slurm.Options()).splitlines()
                    if l.startswith("srun "))
        self.assertIn(f"--container-image={expected}", shlex.split(srun))

  def test_the_script_is_valid_bash(self):
    bash = shutil.which("bash")
    if bash is None:
      self.skipTest("no bash here")
    result = subprocess.run([bash, "-n"], input=slurm.script(JOB, OPTIONS), text=True,
                            capture_output=True, check=False)
    self.assertEqual(result.returncode, 0, result.stderr)

  def test_bad_options_are_refused(self):
    cases = [
        (Job(name="t", recipe="nfnet_long_tail", model_dir="runs/t"), OPTIONS,
         "absolute path on a filesystem every node shares"),
        # The trainer writes to a path: a bucket is the user's to mount on every node.
        (Job(name="t", recipe="nfnet_long_tail", model_dir="gs://b/t"), OPTIONS,
         "--model_dir='gs://b/t' is a URL; Slurm workers write to a shared file system: "
         "give its path \\(e.g. --model_dir=/shared/runs/t\\), or mount the bucket with "
         "gcsfuse on every node"),
        (Job(name="t", recipe="nfnet_long_tail", model_dir="/s/t"), slurm.Options(),
         "--image \\(pyxis\\) or in --slurm_workdir"),
        (Job(name="t", recipe="nfnet_long_tail", model_dir="/s/t", accelerator="a100"),
         OPTIONS, "--accelerators_per_worker >= 1"),
        (Job(name="t", recipe="nfnet_long_tail", model_dir="/s/t"),
         slurm.Options(workdir="/s/zoo", container_mounts="/d:/d"), "needs --image"),
        (Job(name="t", recipe="nfnet_long_tail", model_dir="/s/t",
             accelerator="a100\n#SBATCH --uid=0", accelerators_per_worker=1), OPTIONS,
         "is not a Slurm GPU type"),
        # pyxis splits --container-mounts at ',' and each mount at ':'.
        (Job(name="t", recipe="nfnet_long_tail", model_dir="/shared/runs/a,b",
             image="r/zoo:1"), slurm.Options(),
         "--model_dir='/shared/runs/a,b' holds ',' or ':', which pyxis's "
         "--container-mounts reads as separators; give a path without them"),
        (Job(name="t", recipe="nfnet_long_tail", model_dir="/s/t:ro", image="r/zoo:1"),
         slurm.Options(), "--model_dir='/s/t:ro' holds ',' or ':'"),
    ]
    job = Job(name="t", recipe="nfnet_long_tail", model_dir="/s/t")
    for field, value, message in (
        ("tasks_per_node", 0, "--slurm_tasks_per_node=0 must be a whole number >= 1"),
        ("cpus_per_task", True, "--slurm_cpus_per_task=True must be a whole number >= 1"),
        ("signal_seconds", -5, "--slurm_signal_seconds=-5 must be a whole number >= 1"),
        ("time", "1:00; rm -rf ~", "--slurm_time='1:00; rm -rf ~' is not an sbatch "
         "--time; give e.g. 24:00:00"),
        ("mem", "64G\n#SBATCH --uid=0", "is not an sbatch --mem; give e.g. 64G"),
        ("partition", "gpu $(id)", "--slurm_partition='gpu \\$\\(id\\)' is not an sbatch "
         "--partition"),
        ("account", "ml`id`", "is not an sbatch --account")):
      cases.append((job, dataclasses.replace(OPTIONS, **{field: value}), message))
    for job, options, message in cases:
      with self.assertRaisesRegex(LaunchError, message):
        slurm.steps(job, options)
    # Without an image nothing is mounted: such a path is the trainer's alone.
    slurm.steps(Job(name="t", recipe="nfnet_long_tail", model_dir="/s/a,b:c"), OPTIONS)

  def test_bash_runs_srun_with_the_values_unchanged(self):
    """The script itself under `bash -x`, srun a shell function that records the words
    it is given: a workdir, model_dir and recipe flag with spaces, quotes, $(...),
    backquotes, ';' and newlines arrive as one word each, and nothing in them runs."""
    bash = shutil.which("bash")
    if bash is None:
      self.skipTest("no bash here")
    here = self.create_tempdir().full_path
    hostile = " $(touch pwned) x;'y\"`touch pwned`\nz"
    workdir = os.path.join(here, "zoo" + hostile)
    model_dir = os.path.join(here, "runs" + hostile)
    os.makedirs(workdir)
    binding = "--gin_bindings=NAME = '$HOME; `touch pwned`'\n$(touch pwned)"
    job = Job(name="t", recipe="nfnet_long_tail", workers=2, model_dir=model_dir,
              recipe_args=(binding,))
    path = os.path.join(here, slurm.SCRIPT)
    with open(path, "w") as f:
      f.write(slurm.script(job, slurm.Options(workdir=workdir)))
    # srun, a function the script inherits: each word it gets, NUL-terminated.
    recorder = ('srun() { printf "%s\\0" "$@" > "$SRUN_ARGV"; }; export -f srun; '
                'exec "$0" -x "$1"')
    result = subprocess.run([bash, "-c", recorder, bash, path], cwd=here, text=True,
                            env={"PATH": os.environ["PATH"], "HOME": here,
                                 "SRUN_ARGV": os.path.join(here, "srun.argv"),
                                 "SLURM_JOB_ID": "7"},  # sbatch sets it
                            capture_output=True, timeout=30, check=False)
    self.assertEqual(result.returncode, 0, result.stderr)
    with open(os.path.join(here, "srun.argv")) as f:
      argv = f.read().split("\0")[:-1]
    self.assertEqual(argv, ["--kill-on-bad-exit=1", "--distribution=block", "python3", "-m",
                            "recipes.train", "--gin_file=recipes/nfnet_long_tail.gin",
                            "--strategy=multi_worker_mirrored", f"--model_dir={model_dir}",
                            "--cluster=slurm", binding])
    self.assertIn("\n+ srun --kill-on-bad-exit=1 ", result.stderr)  # bash -x's trace
    self.assertTrue(os.path.isdir(model_dir))  # mkdir -p made the one folder
    self.assertEqual(sorted(os.listdir(here)), sorted(
        [os.path.basename(workdir), os.path.basename(model_dir), slurm.SCRIPT, "srun.argv"]))
    self.assertEqual(os.listdir(workdir), [])  # where srun ran: no `touch pwned`
    self.assertNotIn("+ touch", result.stderr)

  def test_the_batch_shell_requeues_a_preempted_or_unlaunched_step(self):
    """The script under bash with stand-in srun (exiting with a given status) and
    scontrol (recording its words, or failing): 143 requeues; 233 (a node's slurmd
    could not be reached) requeues three times in a row, counted in
    model_dir/.launch/slurm-<id>-unreached, then ends the job; a step that launched
    resets the count; a ledger that cannot be written or a refused requeue is said in
    one line and the status kept; other statuses end the job. model_dir is hostile:
    the ledger's path stays one word and nothing in it runs."""
    bash = shutil.which("bash")
    if bash is None:
      self.skipTest("no bash here")
    here = self.create_tempdir().full_path
    model_dir = os.path.join(here, "runs $(touch pwned) x;'y\"`touch pwned`\nz")
    job = Job(name="t", recipe="nfnet_long_tail", workers=2, model_dir=model_dir)
    path = os.path.join(here, slurm.SCRIPT)
    with open(path, "w") as f:
      f.write(slurm.script(job, slurm.Options(workdir=here)))
    stand_ins = ('srun() { return "$SRUN_STATUS"; }; '
                 'scontrol() { printf "%s\\n" "$*" >> "$SCONTROL_LOG"; '
                 'return "$SCONTROL_STATUS"; }; export -f srun scontrol; exec "$0" "$1"')
    log = os.path.join(here, "scontrol.log")
    ledger = os.path.join(model_dir, ".launch")

    def run(status, job_id="7", scontrol_status=0):
      result = subprocess.run(
          [bash, "-c", stand_ins, bash, path], cwd=here, text=True, capture_output=True,
          env={"PATH": os.environ["PATH"], "SRUN_STATUS": str(status),
               "SCONTROL_STATUS": str(scontrol_status), "SLURM_JOB_ID": job_id,
               "SCONTROL_LOG": log}, timeout=30, check=False)
      calls = []
      if os.path.exists(log):
        with open(log) as f:
          calls = f.read().splitlines()
        os.remove(log)
      return result, calls

    def requeued(tries, job_id="7"):
      return (f"could not start on every node (233: a slurmd could not be reached): "
              f"requeueing job {job_id} to resume ({tries} in a row, of at most 3)")

    for status in (0, 1, 2, 200):
      result, calls = run(status)
      self.assertEqual((result.returncode, calls), (status, []), result.stderr)
    result, calls = run(143)
    self.assertEqual((result.returncode, calls), (143, ["requeue 7"]))
    self.assertIn("requeueing job 7 to resume", result.stdout)
    for tries in (1, 2):
      result, calls = run(slurm.EXIT_LAUNCH_UNREACHED)
      self.assertEqual((result.returncode, calls), (233, ["requeue 7"]), result.stderr)
      self.assertIn(requeued(tries), result.stdout)
    run(143)  # a step that started: the count starts again
    self.assertEqual(os.listdir(ledger), [])
    for tries in (1, 2, 3):
      result, calls = run(slurm.EXIT_LAUNCH_UNREACHED)
      self.assertEqual((result.returncode, calls), (233, ["requeue 7"]), result.stderr)
      self.assertIn(requeued(tries), result.stdout)
    result, calls = run(slurm.EXIT_LAUNCH_UNREACHED)
    self.assertEqual((result.returncode, calls), (233, []))
    self.assertIn("could not start on every node (233), 4 times in a row: not requeued "
                  "again", result.stderr)
    result, calls = run(slurm.EXIT_LAUNCH_UNREACHED, job_id="8")  # another job: afresh
    self.assertEqual(calls, ["requeue 8"])
    self.assertEqual(sorted(os.listdir(ledger)), ["slurm-7-unreached", "slurm-8-unreached"])
    # scontrol refuses: one line, the step's status kept.
    result, calls = run(143, job_id="9", scontrol_status=1)
    self.assertEqual((result.returncode, calls), (143, ["requeue 9"]))
    self.assertIn("scontrol could not requeue job 9; it ends with status 143", result.stderr)
    result, calls = run(slurm.EXIT_LAUNCH_UNREACHED, job_id="9", scontrol_status=1)
    self.assertEqual((result.returncode, calls), (233, ["requeue 9"]))
    self.assertIn("scontrol could not requeue job 9; it ends with status 233", result.stderr)
    # The ledger cannot be written (.launch a file): not requeued, said, status kept.
    shutil.rmtree(ledger)
    with open(ledger, "w") as f:
      f.write("not a folder")
    result, calls = run(slurm.EXIT_LAUNCH_UNREACHED)
    self.assertEqual((result.returncode, calls), (233, []), result.stderr)
    self.assertIn("could not be written: not requeued", result.stderr)
    self.assertEqual(sorted(os.listdir(here)), sorted(
        [os.path.basename(model_dir), slurm.SCRIPT]))  # no `touch pwned`

  def test_status_and_cancel_commands(self):
    self.assertEqual(slurm.cancel_command("42"), ["scancel", "42"])
    self.assertEqual([c[:3] for c in slurm.status_commands("42")],
                     [["squeue", "--jobs=42", "--states=all"],
                      ["sacct", "--jobs=42", "--format=JobID,JobName,State,ExitCode,Elapsed"]])
    for bad in ("", "42; scancel -u root", "$(id)", "-1"):
      with self.assertRaisesRegex(LaunchError, "is not a Slurm job id"):
        slurm.cancel_command(bad)

  def test_submitted_with_sbatch(self):
    (step,) = slurm.steps(JOB, OPTIONS)
    self.assertEqual(step.argv, ("sbatch", "{dir}/job.sbatch"))
    golden.check(self, "slurm.sbatch", step.files[0][1])


if __name__ == "__main__":
  absltest.main()
