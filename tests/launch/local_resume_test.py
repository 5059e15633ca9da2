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
ARGS = cli.DETERMINISTIC_MODEL + ("--gin_bindings=EPOCHS = 3",)


def job(model_dir):
  return job_lib.Job("tiny", "nfnet_long_tail_tiny", workers=2, model_dir=model_dir,
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

  def test_kill_one_worker_then_relaunch(self):
    root = self.create_tempdir().full_path
    straight, killed = os.path.join(root, "straight"), os.path.join(root, "killed")
    out = io.StringIO()
    with mock.patch.dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"):
      self.assertEqual(local.launch(job(straight), out=out), 0, out.getvalue()[-3000:])

    workers = start_workers(killed)
    try:
      self.assertTrue(wait_for_checkpoint_after_epoch_one(killed, workers),
                      "no checkpoint after epoch 1: " + workers[0].stderr.read()[-2000:]
                      if workers[0].poll() is not None else "timed out")
      workers[1].send_signal(signal.SIGKILL)
      killed_at = time.monotonic()
      try:
        workers[0].wait(timeout=60)
      except subprocess.TimeoutExpired:
        self.fail("the chief still runs 60 s after its peer was killed")
      self.assertNotEqual(workers[0].returncode, 0)
      self.assertLess(time.monotonic() - killed_at, 60)
    finally:
      for p in workers:
        if p.poll() is None:
          p.kill()
        p.communicate()
    self.assertFalse(os.path.exists(os.path.join(killed, "metrics.json")))

    out = io.StringIO()
    with mock.patch.dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"):
      self.assertEqual(local.launch(job(killed), out=out), 0, out.getvalue()[-3000:])
    self.assertIn("Resumed from", out.getvalue())
    (want, _), (got, _) = cli.final_weights(straight), cli.final_weights(killed)
    self.assertEqual(sorted(got), sorted(want))
    for name, value in want.items():
      self.assertAllClose(got[name], value, rtol=1e-6, atol=1e-7, msg=name)
    self.assertEqual(cli.metrics(killed)["balanced_accuracy"],
                     cli.metrics(straight)["balanced_accuracy"])


if __name__ == "__main__":
  tf.test.main()
