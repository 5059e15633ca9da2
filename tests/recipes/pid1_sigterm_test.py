"""SIGTERM to the trainer as PID 1 (as in a container without an init), at start-up, in
training and in the final evaluation: each ends within seconds with status 143, with a
checkpoint where there was progress.

Real processes: `unshare --pid --fork python -m recipes.train` makes the run PID 1 of a
new PID namespace, where the kernel drops a signal the process has no handler for, as
in a container. Needs root (a PID namespace); elsewhere the test says so and skips.
"""

import os
import shutil
import signal
import subprocess
import sys
import time

from absl.testing import absltest
from absl.testing import parameterized

from tests.recipes import cli
from tests.recipes import stopping
from tests import real_parts

# "Within seconds": the handler runs at the next Python bytecode, then the interpreter
# unwinds and TensorFlow shuts down (about 1-3 s here on a busy two-core machine).
EXIT_WITHIN = 30


def can_unshare():
  if os.geteuid() != 0 or not shutil.which("unshare"):
    return False
  done = subprocess.run(["unshare", "--pid", "--fork", "true"], capture_output=True,
                        check=False)
  return done.returncode == 0


def child_of(pid):
  """The one child of `pid` (unshare's: the run, PID 1 inside), or None."""
  try:
    with open(f"/proc/{pid}/task/{pid}/children") as f:
      children = f.read().split()
  except OSError:
    return None
  return int(children[0]) if children else None


class Pid1SigtermTest(parameterized.TestCase):

  def setUp(self):
    super().setUp()
    if not can_unshare():
      real_parts.missing("root with unshare(1) for a PID namespace",
                         "run the suite as root (CI does)")

  def start(self, model_dir, out_dir):
    stdout = os.path.join(out_dir, "stdout")
    with open(stdout, "w") as out, open(os.path.join(out_dir, "stderr"), "w") as err:
      process = subprocess.Popen(
          ["unshare", "--pid", "--fork", sys.executable, "-m", "recipes.train", cli.TINY,
           f"--model_dir={model_dir}"], cwd=cli.ROOT,
          env=cli.environment({"PYTHONUNBUFFERED": "1"}), stdout=out, stderr=err)
    self.addCleanup(lambda: process.poll() is None and process.kill())
    found = stopping.wait_for(lambda: child_of(process.pid), 30)
    self.assertTrue(found, "unshare started no child")
    return process, child_of(process.pid), stdout

  @parameterized.parameters(*stopping.PHASES)
  def test_sigterm_ends_the_run_within_seconds(self, phase):
    root = self.create_tempdir().full_path
    model_dir = os.path.join(root, "run")
    process, pid, stdout = self.start(model_dir, root)
    alive = lambda: process.poll() is None
    problem = stopping.reach(phase, pid, stdout, model_dir, alive)
    self.assertIsNone(problem, problem)
    os.kill(pid, signal.SIGTERM)
    sent = time.monotonic()
    try:
      code = process.wait(timeout=EXIT_WITHIN)
    except subprocess.TimeoutExpired:
      self.fail(f"{phase}: still running {EXIT_WITHIN} s after SIGTERM (PID 1 ignored it)")
    took = time.monotonic() - sent
    print(f"{phase}: exit {code} {took:.1f} s after SIGTERM", file=sys.stderr)
    errors = stopping.read(os.path.join(root, "stderr"))
    self.assertEqual(143, code, errors[-2000:])
    self.assertIn("stopped:", errors)
    self.assertFalse(os.path.exists(os.path.join(model_dir, "metrics.json")))
    kept = stopping.latest_checkpoint(model_dir)
    if phase == "start-up":
      self.assertIsNone(kept)  # no progress: nothing to keep
    elif phase == "training":
      self.assertIsNotNone(kept)
      self.assertNotEqual("ckpt-0", kept, "the steps trained were not saved")
    else:
      self.assertEqual(stopping.LAST_CHECKPOINT, kept)


if __name__ == "__main__":
  absltest.main()
