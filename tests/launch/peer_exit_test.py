"""When one worker of a two-worker job is SIGKILLed (out of memory, a lost node), the
other exits with a status >= 128 (errors.EXIT_PEER_LOST), the range Kubeflow's
ExitCode policy re-creates, not 1, which it reads as a crash that fails the job.
Real processes: two `python -m recipes.train` workers on localhost."""

import glob
import os
import signal
import subprocess
import sys
import time

import tensorflow as tf

from launch import job as job_lib
from launch import local
from recipes import errors
from tests.recipes import cli

# Three epochs: the kill lands after the first epoch's checkpoint, well before the end.
ARGS = (cli.TINY, *cli.DETERMINISTIC_MODEL, "--gin_bindings=EPOCHS = 3")


def start_workers(model_dir):
  """The two workers of the tiny flagship, as `--backend=local` starts them."""
  job = job_lib.Job("tiny", "nfnet_long_tail_digits", workers=2, model_dir=model_dir,
                    recipe_args=ARGS)
  env = cli.environment({"PYTHONPATH": local.ROOT})
  return [subprocess.Popen(argv, cwd=local.ROOT, env=dict(env, TF_CONFIG=config),
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
          for config, argv in local.worker_commands(job, sys.executable)]


def wait_for_a_checkpoint_after_epoch_one(model_dir, processes, timeout=300):
  deadline = time.monotonic() + timeout
  pattern = os.path.join(model_dir, "checkpoints", "ckpt-*.index")
  while time.monotonic() < deadline and all(p.poll() is None for p in processes):
    if any(int(p.rsplit("-", 1)[1].split(".")[0]) > 0 for p in glob.glob(pattern)):
      return True
    time.sleep(0.1)
  return False


class PeerExitTest(tf.test.TestCase):

  def test_the_survivor_of_a_killed_peer_exits_retryably(self):
    model_dir = self.create_tempdir().full_path + "/run"
    workers = start_workers(model_dir)
    try:
      started = wait_for_a_checkpoint_after_epoch_one(model_dir, workers)
      self.assertTrue(started, "no checkpoint after the first epoch")
      workers[1].send_signal(signal.SIGKILL)
      killed_at = time.monotonic()
      try:
        workers[0].wait(timeout=90)
      except subprocess.TimeoutExpired:
        self.fail("the chief still runs 90 s after its peer was killed")
      waited = time.monotonic() - killed_at
    finally:
      for p in workers:
        if p.poll() is None:
          p.kill()
      stderr = workers[0].communicate()[1]
      workers[1].communicate()
    self.assertEqual(workers[0].returncode, errors.EXIT_PEER_LOST, stderr[-2000:])
    self.assertGreaterEqual(workers[0].returncode, 128)
    self.assertIn("a peer worker stopped", stderr)
    print(f"survivor exited {workers[0].returncode} {waited:.1f} s after the kill")


if __name__ == "__main__":
  tf.test.main()
