"""A real Slurm cluster on this machine (slurm_cluster.py: munged, slurmctld and
slurmd on localhost) runs the launcher's own sbatch script, submitted by the launcher
(`python -m launch.launch --backend=slurm`): two tasks on the one node train the tiny
flagship through --cluster=slurm to the weights of the local two-worker run; only the
chief writes; `scancel --signal=TERM` and the time limit make both tasks save at one
step, the job requeues itself and resumes to the uninterrupted run's weights; the
launcher's --status and --cancel see and end a job. Skipped, with one line saying
why, where Slurm is absent and cannot be installed (not root, not Debian)."""

import glob
import io
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from unittest import mock

import tensorflow as tf

from launch import job as job_lib
from launch import local
from tests.launch import slurm_cluster
from tests.recipes import cli
from tests import real_parts

# Three epochs: a stop after the first epoch's checkpoint lands well before the end.
RECIPE_ARGS = (cli.TINY, *cli.DETERMINISTIC_MODEL, "--gin_bindings=EPOCHS = 3")
# A run that outlasts a three-minute time limit's signal (60-120 s in).
LONG = 60  # about 2 s an epoch on an idle 2-core machine: 135 s
STEPS_PER_EPOCH = 8  # the tiny flagship's
ENDED = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY",
         "BOOT_FAIL", "DEADLINE", "PREEMPTED")
STOPPED = re.compile(r"preempted \(SIGTERM\) at epoch (\d+), step (\d+) of \d+: saved")


class SlurmRealTest(tf.test.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    reason = slurm_cluster.install()
    if reason:
      real_parts.missing("a real Slurm", reason)
    cls.root = os.path.join(os.environ.get("TEST_TMPDIR") or "/tmp",
                            f"slurm-real-{os.getpid()}")
    os.makedirs(cls.root)
    # slurmd's sockets live in its spool directory, whose path must be short (a Unix
    # socket's path has at most 108 bytes; Bazel's TEST_TMPDIR is longer).
    cluster_dir = tempfile.mkdtemp(prefix="zoo-slurm-", dir="/tmp")
    cls.addClassCleanup(shutil.rmtree, cluster_dir, ignore_errors=True)
    cls.cluster = slurm_cluster.Cluster(cluster_dir)
    cls.cluster.__enter__()
    cls.addClassCleanup(cls.cluster.__exit__, None, None, None)
    # `python3` on the job's PATH: this interpreter (the workers' environment).
    cls.bin = os.path.join(cls.root, "bin")
    os.makedirs(cls.bin)
    with open(os.path.join(cls.bin, "python3"), "w") as f:
      f.write(f"#!/bin/sh\nexec {sys.executable} \"$@\"\n")
    os.chmod(os.path.join(cls.bin, "python3"), 0o755)
    cls.local_run = os.path.join(cls.root, "local")
    out = io.StringIO()
    with mock.patch.dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"):
      status = local.launch(job_lib.Job("tiny", "nfnet_long_tail_digits", workers=2,
                                        model_dir=cls.local_run,
                                        recipe_args=RECIPE_ARGS), out=out)
    assert status == 0, out.getvalue()[-3000:]

  def launcher(self, *flags, cwd=None):
    """`python -m launch.launch --backend=slurm FLAGS` against the test cluster."""
    env = cli.environment(dict(self.cluster.env, PYTHONPATH=local.ROOT,
                               TMPDIR=self.scratch))
    return subprocess.run([sys.executable, "-m", "launch.launch", "--backend=slurm",
                           *flags], cwd=cwd or self.dir, env=env, capture_output=True,
                          text=True, check=False, timeout=60)

  def submit(self, *flags, recipe_args=RECIPE_ARGS):
    """Submits the tiny two-worker job with the launcher; its job id."""
    self.dir = self.create_tempdir().full_path
    self.scratch = os.path.join(self.dir, "tmp")
    os.makedirs(self.scratch)
    self.model_dir = os.path.join(self.dir, "run")
    result = self.launcher(
        "--recipe=nfnet_long_tail_digits", "--name=tiny", "--workers=2",
        f"--model_dir={self.model_dir}", f"--slurm_workdir={local.ROOT}",
        "--slurm_tasks_per_node=2", "--slurm_cpus_per_task=1",
        f"--slurm_setup=export PATH={self.bin}:$PATH", *flags, "--", *recipe_args)
    self.assertEqual(result.returncode, 0, result.stderr)
    return re.search(r"Submitted batch job (\d+)", result.stdout).group(1)

  def output(self, job_id):
    path = os.path.join(self.dir, f"tiny-{job_id}.out")
    if not os.path.exists(path):
      return ""
    with open(path) as f:
      return f.read()

  def wait(self, job_id, until, timeout=400):
    """Waits until until(state) (squeue's state of the job); the state."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
      state = self.cluster.jobs().get(job_id)
      if until(state):
        return state
      time.sleep(1)
    shown = self.cluster.run("scontrol", "show", "job", job_id, check=False).stdout
    self.fail(f"job {job_id} still {state} after {timeout} s:\n{shown}\n"
              f"{self.output(job_id)[-3000:]}")

  def checkpoint_after_epoch_one(self):
    found = glob.glob(os.path.join(self.model_dir, "checkpoints", "ckpt-*.index"))
    return any(int(re.search(r"ckpt-(\d+)", p).group(1)) > 0 for p in found)

  def assert_weights_of_the_local_run(self, job_id):
    self.assertEqual(self.cluster.jobs().get(job_id), "COMPLETED",
                     self.output(job_id)[-3000:])
    (want, _), (got, _) = cli.final_weights(self.local_run), cli.final_weights(
        self.model_dir)
    self.assertEqual(sorted(got), sorted(want))
    for name, value in want.items():
      self.assertAllClose(got[name], value, rtol=1e-6, atol=1e-7, msg=name)

  def assert_both_saved_at_one_step_and_resumed(self, job_id):
    said = self.output(job_id)
    stops = STOPPED.findall(said)
    self.assertLen(stops, 2, said[-3000:])
    self.assertEqual(stops[0], stops[1])
    self.assertIn(f"requeueing job {job_id} to resume", said)
    self.assertIn("Resumed from", said)

  def test_two_tasks_train_like_the_local_workers(self):
    started = time.monotonic()
    job_id = self.submit()
    self.wait(job_id, lambda s: s == "RUNNING", timeout=60)
    status = self.launcher(f"--status={job_id}")
    self.assertEqual(status.returncode, 0, status.stderr)
    self.assertRegex(status.stdout, rf"{job_id} +tiny +(RUNNING|COMPLETING|COMPLETED)")
    self.wait(job_id, lambda s: s in ENDED)
    print(f"the Slurm job ran {time.monotonic() - started:.0f} s")
    said = self.output(job_id)
    self.assertIn("on 2 replica(s)", said)
    self.assertEqual(said.count("This worker is done; the chief writes the report in"), 1)
    # Only the chief wrote model_dir; the other task's scratch directory is gone.
    self.assertEqual([n for n in os.listdir(self.scratch) if n.startswith("model_zoo-")],
                     [])
    self.assertContainsSubset(["checkpoints", "config.gin", "metrics.json", "train",
                               "eval"], os.listdir(self.model_dir))
    self.assert_weights_of_the_local_run(job_id)

  def test_scancel_term_saves_and_the_requeued_job_resumes(self):
    job_id = self.submit()
    self.wait(job_id, lambda s: s in ENDED or self.checkpoint_after_epoch_one())
    self.cluster.run("scancel", "--signal=TERM", job_id)
    self.wait(job_id, lambda s: "requeueing" in self.output(job_id), timeout=120)
    self.wait(job_id, lambda s: s in ENDED)
    self.assert_both_saved_at_one_step_and_resumed(job_id)
    self.assert_weights_of_the_local_run(job_id)

  def test_the_time_limit_requeues(self):
    """--time=3 with the SIGTERM 60 s ahead (Slurm checks once a minute: it comes 60
    to 120 s in), on a run longer than that; once requeued, the job gets the time to
    finish (its weights: the scancel test's comparison)."""
    job_id = self.submit("--slurm_time=3", "--slurm_signal_seconds=60",
                         recipe_args=(*RECIPE_ARGS, f"--gin_bindings=EPOCHS = {LONG}"))
    started = time.monotonic()
    self.wait(job_id, lambda s: "requeueing" in self.output(job_id) or s in ENDED,
              timeout=240)
    print(f"requeued at the time limit after {time.monotonic() - started:.0f} s")
    # Once the job runs again, its time limit is raised (scontrol refuses a job between
    # runs: "Job has already finished"), well before its own signal (60 s in at the
    # earliest); a resumed run may also finish first.
    seen = []

    def raise_limit_when_running_again(state):
      seen.append(state)
      if state == "RUNNING" and any(s != "RUNNING" for s in seen):
        return self.cluster.run("scontrol", "update", f"JobId={job_id}", "TimeLimit=15",
                                check=False).returncode == 0
      return state in ENDED

    self.wait(job_id, raise_limit_when_running_again, timeout=120)
    self.wait(job_id, lambda s: s in ENDED, timeout=900)
    self.assert_both_saved_at_one_step_and_resumed(job_id)
    self.assertEqual(self.cluster.jobs().get(job_id), "COMPLETED")
    self.assertEqual(cli.metrics(self.model_dir)["num_replicas"], 2)
    _, path = cli.final_weights(self.model_dir)
    self.assertEndsWith(path, f"ckpt-{LONG * STEPS_PER_EPOCH}")

  def test_cancel_ends_the_job_for_good(self):
    job_id = self.submit(recipe_args=(*RECIPE_ARGS, f"--gin_bindings=EPOCHS = {LONG}"))
    self.wait(job_id, lambda s: s == "RUNNING", timeout=60)
    result = self.launcher(f"--cancel={job_id}")
    self.assertEqual(result.returncode, 0, result.stderr)
    self.assertEqual(self.wait(job_id, lambda s: s in ENDED, timeout=120), "CANCELLED")
    time.sleep(20)  # past cred_expire: a requeued job would be pending again by now
    self.assertEqual(self.cluster.jobs().get(job_id), "CANCELLED")
    status = self.launcher(f"--status={job_id}")
    self.assertIn("CANCELLED", status.stdout)
    self.assertNotIn("requeueing", self.output(job_id))
    bad = self.launcher("--status=12; rm -rf /")
    self.assertEqual(bad.returncode, 2)
    self.assertIn("is not a Slurm job id", bad.stderr)


if __name__ == "__main__":
  tf.test.main()
