"""Stopping a real run at a chosen phase from outside, as a scheduler does: find when
the run is in that phase (its output, its checkpoints, its signal mask), send SIGTERM,
time the exit. Used on a run as PID 1 of its own PID namespace (pid1_sigterm_test) and
as PID 1 of a container (tests/launch/image_real_test).

The tiny flagship (cli.TINY): 2 epochs of 8 steps, so ckpt-16 is its last checkpoint.
"""

import os
import signal
import time

LAST_CHECKPOINT = "ckpt-16"
PHASES = ("start-up", "training", "final evaluation")


def catches(pid, signum=signal.SIGTERM):
  """Whether process `pid` has a handler for `signum` (its SigCgt mask in /proc)."""
  try:
    with open(f"/proc/{pid}/status") as f:
      for line in f:
        if line.startswith("SigCgt:"):
          return bool(int(line.split()[1], 16) >> (signum - 1) & 1)
  except OSError:
    pass
  return False


def latest_checkpoint(model_dir):
  """The checkpoint `checkpoints/checkpoint` names ("ckpt-N"), or None."""
  try:
    with open(os.path.join(model_dir, "checkpoints", "checkpoint")) as f:
      for line in f:
        if line.startswith("model_checkpoint_path:"):
          return line.split('"')[1]
  except OSError:
    pass
  return None


def read(path):
  try:
    with open(path, errors="replace") as f:
      return f.read()
  except OSError:
    return ""


def wait_for(condition, timeout, alive=lambda: True, interval=0.05):
  """Polls `condition` until true (True), `timeout` seconds pass or `alive()` is false
  (False)."""
  end = time.monotonic() + timeout
  while time.monotonic() < end and alive():
    if condition():
      return True
    time.sleep(interval)
  return False


def reach(phase, pid, stdout_path, model_dir, alive):
  """Waits until the run is in `phase`; None, or what went wrong.

  start-up: the SIGTERM handler is in place (the old code never has one then: after
  10 s the signal is sent anyway), nothing printed about the devices yet; training:
  epoch 1 has begun stepping; final evaluation: the last checkpoint is written (then
  the run evaluates, writes its report and metrics.json)."""
  if phase == "start-up":
    wait_for(lambda: catches(pid), 10, alive)
    return "start-up was over" if "devices:" in read(stdout_path) else None
  if phase == "training":
    reached = lambda: "1/8 [" in read(stdout_path)
  elif phase == "final evaluation":
    reached = lambda: latest_checkpoint(model_dir) == LAST_CHECKPOINT
  else:
    raise ValueError(f"unknown phase {phase!r}; one of {PHASES}")
  if wait_for(reached, 240, alive, interval=0.02):
    return None
  return f"never reached {phase}: {read(stdout_path)[-2000:]}"
