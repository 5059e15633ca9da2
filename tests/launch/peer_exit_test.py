"""When one worker of a two-worker job is SIGKILLed (out of memory, a lost node), the
other exits with a status >= 128 (errors.EXIT_PEER_LOST), the range Kubeflow's
ExitCode policy re-creates, not 1, which it reads as a crash that fails the job.
Real processes: two `python -m recipes.train` workers on localhost."""

import signal
import subprocess
import time

import tensorflow as tf

from recipes import errors
from tests.launch import local_resume_test as workers_lib


class PeerExitTest(tf.test.TestCase):

  def test_the_survivor_of_a_killed_peer_exits_retryably(self):
    model_dir = self.create_tempdir().full_path + "/run"
    workers = workers_lib.start_workers(model_dir)
    try:
      started = workers_lib.wait_for_checkpoint_after_epoch_one(model_dir, workers)
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
