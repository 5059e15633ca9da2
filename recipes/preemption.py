"""Preemption notices: SIGTERM, which Kubernetes, Vertex AI, Cloud TPU and Slurm send
before they take a machine, asks the run to save a checkpoint and exit.

Ctrl-C (SIGINT) does the same, so a run stopped by hand resumes where it stopped.
The handler only records the request; the trainer looks at it between inner loops
(the host runs no Python while a loop runs on the device), saves where it is, even
mid-epoch, and exits with status 143 (errors.EXIT_PREEMPTED), which schedulers retry.
The same idea as tf.distribute's PreemptionCheckpointHandler: in a multi-worker job
the workers agree on the stop through one all-reduce of a flag between inner loops
(trainer.stop_requested), so all save at the same step.
"""

import os
import signal
import threading


SIGNALS = (signal.SIGTERM, signal.SIGINT)


class Notice:
  """Catches SIGTERM, and Ctrl-C (SIGINT), while entered (main thread only; elsewhere
  a no-op). A second Ctrl-C interrupts at once, as Ctrl-C does."""

  def __init__(self):
    self.signal = None
    self._previous = {}

  @property
  def requested(self):
    return self.signal is not None

  def _handle(self, signum, frame):
    del frame
    if signum == signal.SIGINT and self.signal == signal.SIGINT:
      raise KeyboardInterrupt
    if signum == signal.SIGINT:  # os.write: print may be mid-write (not reentrant)
      os.write(1, b"\nCtrl-C: saving a checkpoint after this loop (Ctrl-C again to stop "
               b"at once)\n")
    self.signal = signum

  def __enter__(self):
    if threading.current_thread() is threading.main_thread():
      for signum in SIGNALS:
        if signal.getsignal(signum) is signal.SIG_IGN:
          continue  # ignored on purpose (nohup, a background job): left so
        self._previous[signum] = signal.signal(signum, self._handle)
    return self

  def __exit__(self, *exc):
    for signum, previous in self._previous.items():
      signal.signal(signum, previous)
    self._previous = {}
    return False
