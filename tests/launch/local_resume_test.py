"""A two-worker job survives a killed worker: the other exits non-zero within 60 s,
and relaunching the same job resumes from the chief's checkpoint and finishes with the
weights of an uninterrupted run."""

import glob
import io
import os
import signal
import subprocess
import sys
import time
from unittest import mock

import tensorflow as tf

from launch import job as job_lib
from launch import local
from tests.recipes import cli

# Three epochs: the kill lands after the first epoch's checkpoint, well before the end.
ARGS = (cli.TINY, *cli.DETERMINISTIC_MODEL, "--gin_bindings=EPOCHS = 3")


def job(model_dir):
  return job_lib.Job("tiny", "nfnet_long_tail_digits", workers=2, model_dir=model_dir,
                     recipe_args=ARGS)


def start_workers(model_dir):
  env = cli.environment({"PYTHONPATH": local.ROOT})
  return [subprocess.Popen(argv, cwd=local.ROOT, env=dict(env, TF_CONFIG=config),
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
          for config, argv in local.worker_commands(job(model_dir), sys.executable)]


def wait_for_checkpoint_after_epoch_one(model_dir, processes, timeout=300):
  deadline = time.monotonic() + timeout
  while time.monotonic() < deadline:
    if any(p.poll() is not None for p in processes):
      return False
    numbered = [int(path.rsplit("-", 1)[1].split(".")[0])
                for path in glob.glob(os.path.join(model_dir, "checkpoints", "ckpt-*.index"))]
    if any(n > 0 for n in numbered):
      return True
    time.sleep(0.1)
  return False


class LocalResumeTest(tf.test.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.root = os.environ.get("TEST_TMPDIR") or "/tmp"
    cls.straight = os.path.join(cls.root, "straight")
    out = io.StringIO()
    with mock.patch.dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"):
      status = local.launch(job(cls.straight), out=out)
    assert status == 0, out.getvalue()[-3000:]

  def interrupt_then_relaunch(self, signum):
    """Signals worker 1 after the first epoch's checkpoint; the chief's exit status;
    then relaunches and checks the run ends as the uninterrupted one."""
    model_dir = os.path.join(self.create_tempdir().full_path, "run")
    workers = start_workers(model_dir)
    try:
      started = wait_for_checkpoint_after_epoch_one(model_dir, workers)
      self.assertTrue(started, workers[0].stderr.read()[-2000:]
                      if workers[0].poll() is not None else "timed out")
      workers[1].send_signal(signum)
      signalled_at = time.monotonic()
      try:
        workers[0].wait(timeout=60)
      except subprocess.TimeoutExpired:
        self.fail("the chief still runs 60 s after its peer was signalled")
      self.assertLess(time.monotonic() - signalled_at, 60)
      workers[1].wait(timeout=60)
      statuses = [p.returncode for p in workers]
    finally:
      for p in workers:
        if p.poll() is None:
          p.kill()
        p.communicate()
    self.assertFalse(os.path.exists(os.path.join(model_dir, "metrics.json")))

    out = io.StringIO()
    with mock.patch.dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"):
      self.assertEqual(local.launch(job(model_dir), out=out), 0, out.getvalue()[-3000:])
    self.assertIn("Resumed from", out.getvalue())
    (want, _), (got, _) = cli.final_weights(self.straight), cli.final_weights(model_dir)
    self.assertEqual(sorted(got), sorted(want))
    for name, value in want.items():
      self.assertAllClose(got[name], value, rtol=1e-6, atol=1e-7, msg=name)
    self.assertEqual(cli.metrics(model_dir)["balanced_accuracy"],
                     cli.metrics(self.straight)["balanced_accuracy"])
    return statuses

  def test_a_killed_worker_stops_the_job_and_relaunch_resumes(self):
    chief, _ = self.interrupt_then_relaunch(signal.SIGKILL)
    self.assertNotEqual(chief, 0)

  def test_sigterm_on_one_worker_saves_and_stops_both(self):
    """The preemption notice is agreed across workers: both save at the same step and
    exit 143 (a scheduler's retry status), and the relaunch resumes mid-epoch."""
    statuses = self.interrupt_then_relaunch(signal.SIGTERM)
    self.assertEqual(statuses, [143, 143])


if __name__ == "__main__":
  tf.test.main()
