"""When one worker of a two-worker job is SIGKILLed (out of memory, a lost node) or its
machine goes silent, the other exits with a status >= 128 (errors.EXIT_PEER_LOST), the
range Kubeflow's ExitCode policy re-creates, not 1, which it reads as a crash that
fails the job. Real processes: two `python -m recipes.train` workers on localhost."""

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

  def lose(self, lost, signum):
    """Starts the two workers, sends worker `lost` `signum` after the first epoch's
    checkpoint; (the survivor's exit status, its stderr, seconds it took)."""
    model_dir = self.create_tempdir().full_path + "/run"
    workers = start_workers(model_dir)
    survivor = workers[1 - lost]
    try:
      started = wait_for_a_checkpoint_after_epoch_one(model_dir, workers)
      self.assertTrue(started, "no checkpoint after the first epoch")
      workers[lost].send_signal(signum)
      lost_at = time.monotonic()
      try:
        survivor.wait(timeout=90)
      except subprocess.TimeoutExpired:
        self.fail(f"worker {1 - lost} still runs 90 s after worker {lost} was lost")
      waited = time.monotonic() - lost_at
    finally:
      for p in workers:
        if p.poll() is None:
          p.kill()
      stderr = survivor.communicate()[1]
      workers[lost].communicate()
    return survivor.returncode, stderr, waited

  def test_the_survivor_of_a_killed_peer_exits_retryably(self):
    status, stderr, waited = self.lose(1, signal.SIGKILL)
    self.assertEqual(status, errors.EXIT_PEER_LOST, stderr[-2000:])
    self.assertGreaterEqual(status, 128)
    self.assertIn("a peer worker stopped", stderr)
    print(f"survivor exited {status} {waited:.1f} s after the kill")

  def test_the_survivor_of_a_silent_chief_exits_retryably(self):
    """The chief (the coordination service's leader) stops answering, as a machine
    that dies does (SIGSTOP: its connections stay open, nothing comes back; on two
    real nodes, tests/launch/slurm_multinode_real_test.py, the link cut): the other
    worker's heartbeats time out, a DeadlineExceededError, which exited 1 (a crash,
    not retried) before it exited EXIT_PEER_LOST as an UnavailableError does."""
    status, stderr, waited = self.lose(0, signal.SIGSTOP)
    self.assertEqual(status, errors.EXIT_PEER_LOST, stderr[-2000:])
    self.assertIn("a peer worker stopped", stderr)
    print(f"the chief's peer exited {status} {waited:.1f} s after the chief went silent")


if __name__ == "__main__":
  tf.test.main()
