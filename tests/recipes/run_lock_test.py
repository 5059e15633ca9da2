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
ENV = dict(os.environ, PYTHONPATH=ROOT)
# Takes the lock and sleeps holding it (until killed).
HOLD = ("import sys, time; from recipes import run_lock; lock = run_lock.acquire(sys.argv[1]);"
        " print('held', flush=True); time.sleep(600)")
# Tries to take the lock once: prints "held" (and releases it) or the ConfigError.
TRY = ("import sys; from recipes import run_lock; from recipes.errors import ConfigError\n"
       "try:\n  lock = run_lock.acquire(sys.argv[1])\n"
       "except ConfigError as e:\n  print('refused', e)\n"
       "else:\n  print('held'); lock.release()\n")


def holder(model_dir):
  """A process that takes the lock and sleeps holding it."""
  process = subprocess.Popen([sys.executable, "-c", HOLD, model_dir], env=ENV,
                             stdout=subprocess.PIPE, text=True)
  assert process.stdout.readline().strip() == "held"
  return process


def stop(process):
  process.kill()
  process.wait()
  process.stdout.close()


def try_in_another_process(model_dir):
  """What another process gets from acquire: its one line of output."""
  result = subprocess.run([sys.executable, "-c", TRY, model_dir], env=ENV, timeout=60,
                          capture_output=True, text=True, check=True)
  return result.stdout


class RunLockTest(absltest.TestCase):

  def model_dir(self):
    return os.path.join(self.create_tempdir().full_path, "run")

  def lock_file(self, model_dir):
    return os.path.join(model_dir, ".lock")

  def write_holder(self, model_dir, **holder):
    os.makedirs(model_dir, exist_ok=True)
    with open(self.lock_file(model_dir), "w") as f:
      f.write(json.dumps(dict({"started": "2024-01-01T00:00:00+00:00", "argv": []},
                              **holder)))

  def test_another_process_is_refused_naming_this_one(self):
    model_dir = self.model_dir()
    with run_lock.acquire(model_dir):
      said = try_in_another_process(model_dir)
    self.assertEqual(said.count("\n"), 1, msg=said)  # one line
    self.assertStartsWith(said, f"refused model_dir {model_dir!r} is in use by pid "
                          f"{os.getpid()} on host {socket.gethostname()} (started 20")
    self.assertEndsWith(said, "; wait for that run to finish, stop it, or choose another "
                        "--model_dir\n")

  def test_this_process_is_refused_naming_the_other(self):
    model_dir = self.model_dir()
    other = holder(model_dir)
    try:
      with self.assertRaises(ConfigError) as refused:
        run_lock.acquire(model_dir)
    finally:
      stop(other)
    message = str(refused.exception)
    self.assertNotIn("\n", message)
    self.assertIn(f"is in use by pid {other.pid} on host {socket.gethostname()}", message)
    self.assertIn("choose another --model_dir", message)

  def test_after_release_another_process_takes_it(self):
    model_dir = self.model_dir()
    lock = run_lock.acquire(model_dir)
    lock.release()
    self.assertEqual(try_in_another_process(model_dir), "held\n")
    other = holder(model_dir)  # and holds it, named in the file
    try:
      with open(self.lock_file(model_dir)) as f:
        self.assertEqual(json.load(f)["pid"], other.pid)
    finally:
      stop(other)

  def test_the_file_names_the_holder_while_held_and_is_empty_after(self):
    model_dir = self.model_dir()
    self.assertFalse(os.path.exists(model_dir))
    lock = run_lock.acquire(model_dir)  # creates model_dir
    self.assertTrue(lock.held)
    with open(self.lock_file(model_dir)) as f:
      held = json.load(f)
    self.assertEqual((held["pid"], held["host"], held["argv"]),
                     (os.getpid(), socket.gethostname(), sys.argv))
    self.assertIn("T", held["started"])  # ISO time
    lock.release()
    lock.release()  # idempotent
    self.assertFalse(lock.held)
    self.assertTrue(os.path.exists(self.lock_file(model_dir)))  # emptied, not removed
    self.assertEqual(os.path.getsize(self.lock_file(model_dir)), 0)
    with self.assertNoLogs(level="WARNING"):  # empty: free, nothing stale to report
      run_lock.acquire(model_dir).release()

  def test_a_killed_holders_lock_is_taken_over_with_a_warning(self):
    model_dir = self.model_dir()
    other = holder(model_dir)
    other.send_signal(signal.SIGKILL)
    other.wait()
    other.stdout.close()
    with self.assertLogs(level="WARNING") as logs:
      with run_lock.acquire(model_dir):
        with open(self.lock_file(model_dir)) as f:
          self.assertEqual(json.load(f)["pid"], os.getpid())
    self.assertLen(logs.records, 1)
    self.assertIn(f"model_dir {model_dir} was locked by pid {other.pid} on host "
                  f"{socket.gethostname()} since ", logs.output[0])
    self.assertIn("is no longer running; taking the lock over", logs.output[0])

  def test_a_live_pid_without_the_flock_is_stale(self):
    model_dir = self.model_dir()
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:  # alive, named in the file, but holding no flock (as after pid reuse)
      self.write_holder(model_dir, host=socket.gethostname(), pid=sleeper.pid)
      with self.assertLogs(level="WARNING") as logs:
        run_lock.acquire(model_dir).release()
    finally:
      sleeper.kill()
      sleeper.wait()
    self.assertLen(logs.records, 1)
    self.assertIn(f"was locked by pid {sleeper.pid} on host", logs.output[0])
    self.assertIn("the pid was reused); taking the lock over", logs.output[0])

  def test_this_pid_without_the_flock_is_stale(self):
    model_dir = self.model_dir()
    self.write_holder(model_dir, host=socket.gethostname(), pid=os.getpid())
    with self.assertLogs(level="WARNING") as logs:
      run_lock.acquire(model_dir).release()
    self.assertLen(logs.records, 1)
    self.assertIn(f"was locked by pid {os.getpid()} on host", logs.output[0])
    self.assertIn("which is this process, which dropped it without releasing it",
                  logs.output[0])

  def test_a_holder_on_another_host_is_taken_over_saying_so(self):
    model_dir = self.model_dir()
    self.write_holder(model_dir, host="elsewhere.invalid", pid=1)
    with self.assertLogs(level="WARNING") as logs:
      run_lock.acquire(model_dir).release()
    self.assertLen(logs.records, 1)
    self.assertIn("locked by pid 1 on host elsewhere.invalid", logs.output[0])
    self.assertIn("does not share locks between hosts", logs.output[0])

  def test_an_unreadable_stale_file_is_taken_over(self):
    model_dir = self.model_dir()
    os.makedirs(model_dir)
    with open(self.lock_file(model_dir), "w") as f:
      f.write("{\"host\": ")
    with self.assertLogs(level="WARNING") as logs:
      with run_lock.acquire(model_dir):
        pass
    self.assertLen(logs.records, 1)
    self.assertIn("no readable holder", logs.output[0])

  def test_the_same_process_cannot_take_it_twice(self):
    # flock belongs to the open file description: a second open() of the file in the
    # same process conflicts with the first, as another process would.
    model_dir = self.model_dir()
    with run_lock.acquire(model_dir):
      with self.assertRaises(ConfigError) as refused:
        run_lock.acquire(model_dir)
      with open(self.lock_file(model_dir)) as f:  # the refusal changed nothing
        self.assertEqual(json.load(f)["pid"], os.getpid())
    message = str(refused.exception)
    self.assertNotIn("\n", message)
    self.assertIn(f"in use by pid {os.getpid()} on host {socket.gethostname()}", message)
    self.assertIn("this same process: release its earlier lock on it first", message)
    run_lock.acquire(model_dir).release()  # and free once released

  def test_a_half_written_holder_is_still_refused_in_one_line(self):
    model_dir = self.model_dir()
    other = holder(model_dir)
    try:
      with open(self.lock_file(model_dir), "w") as f:
        f.write("{\"host\": ")  # as if mid-write
      with self.assertRaises(ConfigError) as refused:
        run_lock.acquire(model_dir)
    finally:
      stop(other)
    self.assertEqual(str(refused.exception),
                     f"model_dir {model_dir!r} is in use by another process; wait for that "
                     "run to finish, stop it, or choose another --model_dir")

  def test_a_remote_model_dir_is_not_locked(self):
    with self.assertLogs(level="WARNING") as logs:
      with run_lock.acquire("gs://bucket/run") as lock:
        self.assertFalse(lock.held)
    self.assertLen(logs.records, 1)
    self.assertIn("gs://bucket/run is not a local path: a second run on it cannot be "
                  "detected", logs.output[0])

  def test_the_lock_file_is_its_owners_alone(self):
    """It holds the whole command line (issue 57): mode 0600, also where an older run
    left it readable by all."""
    model_dir = self.model_dir()
    with run_lock.acquire(model_dir):
      self.assertEqual(os.stat(self.lock_file(model_dir)).st_mode & 0o777, 0o600)
    other = self.model_dir()
    self.write_holder(other, host="h", pid=1)
    os.chmod(self.lock_file(other), 0o644)
    with self.assertLogs(level="WARNING"):
      with run_lock.acquire(other):
        self.assertEqual(os.stat(self.lock_file(other)).st_mode & 0o777, 0o600)

  def test_a_planted_symlink_is_refused_and_its_target_left_alone(self):
    """A .lock that is a symbolic link is never followed (issue 56): its target would be
    truncated, written and emptied."""
    model_dir = self.model_dir()
    os.makedirs(model_dir)
    target = self.create_tempfile(content="precious\n").full_path
    os.symlink(target, self.lock_file(model_dir))
    with self.assertRaisesRegex(ConfigError, r"^model_dir .*'s \.lock is a symbolic link "
                                r"\(to .*\); remove it: a run never writes through a link$"):
      run_lock.acquire(model_dir)
    with open(target) as f:
      self.assertEqual(f.read(), "precious\n")


if __name__ == "__main__":
  absltest.main()
