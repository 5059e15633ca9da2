"""One run per model_dir, with real processes holding, dying with and taking the lock."""

import json
import os
import signal
import socket
import subprocess
import sys

from absl.testing import absltest

from recipes import run_lock
from recipes.errors import ConfigError

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HOLD = ("import sys, time; from recipes import run_lock; lock = run_lock.acquire(sys.argv[1]);"
        " print('held', flush=True); time.sleep(600)")


def holder(model_dir):
  """A process that takes the lock and sleeps holding it."""
  env = dict(os.environ, PYTHONPATH=ROOT)
  process = subprocess.Popen([sys.executable, "-c", HOLD, model_dir], env=env,
                             stdout=subprocess.PIPE, text=True)
  assert process.stdout.readline().strip() == "held"
  return process


class RunLockTest(absltest.TestCase):

  def model_dir(self):
    return os.path.join(self.create_tempdir().full_path, "run")

  def test_a_second_process_is_refused_with_the_holders_name(self):
    model_dir = self.model_dir()
    other = holder(model_dir)
    try:
      with self.assertRaises(ConfigError) as refused:
        run_lock.acquire(model_dir)
    finally:
      other.kill()
      other.wait()
    message = str(refused.exception)
    self.assertNotIn("\n", message)
    self.assertIn(f"is in use by pid {other.pid} on host {socket.gethostname()}", message)
    self.assertIn("choose another --model_dir", message)

  def test_released_lock_is_free_and_empty(self):
    model_dir = self.model_dir()
    lock = run_lock.acquire(model_dir)
    path = os.path.join(model_dir, ".lock")
    with open(path) as f:
      held = json.load(f)
    self.assertEqual((held["pid"], held["host"]), (os.getpid(), socket.gethostname()))
    lock.release()
    lock.release()  # idempotent
    self.assertEqual(os.path.getsize(path), 0)
    other = holder(model_dir)  # another process takes it
    other.kill()
    other.wait()

  def test_a_killed_holders_lock_is_taken_over_with_a_warning(self):
    model_dir = self.model_dir()
    other = holder(model_dir)
    other.send_signal(signal.SIGKILL)
    other.wait()
    with self.assertLogs(level="WARNING") as logs:
      with run_lock.acquire(model_dir):
        pass
    self.assertLen(logs.records, 1)
    self.assertIn(f"locked by pid {other.pid}", logs.output[0])
    self.assertIn("is no longer running; taking the lock over", logs.output[0])

  def test_the_same_process_cannot_take_it_twice(self):
    model_dir = self.model_dir()
    with run_lock.acquire(model_dir):
      with self.assertRaisesRegex(ConfigError, f"in use by pid {os.getpid()}"):
        run_lock.acquire(model_dir)

  def test_a_half_written_holder_is_still_refused_in_one_line(self):
    model_dir = self.model_dir()
    other = holder(model_dir)
    try:
      with open(os.path.join(model_dir, ".lock"), "w") as f:
        f.write("{\"host\": ")  # as if mid-write
      with self.assertRaisesRegex(ConfigError, "in use by another process"):
        run_lock.acquire(model_dir)
    finally:
      other.kill()
      other.wait()

  def test_a_remote_model_dir_is_not_locked(self):
    with self.assertLogs(level="WARNING") as logs:
      with run_lock.acquire("gs://bucket/run"):
        pass
    self.assertIn("cannot be detected", logs.output[0])


if __name__ == "__main__":
  absltest.main()
