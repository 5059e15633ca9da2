"""Preemption notices: SIGTERM, which Kubernetes, Vertex AI, Cloud TPU and Slurm send
before they take a machine, asks the run to save a checkpoint and exit.

The handler only records the request; the trainer looks at it between inner loops
(the host runs no Python while a loop runs on the device), saves where it is, even
mid-epoch, and exits with status 143 (errors.EXIT_PREEMPTED), which schedulers retry.
The same idea as tf.distribute's PreemptionCheckpointHandler, for one process; a
multi-worker job's workers agree on the step through the strategy (see the launcher).
"""

import signal
import threading


class Notice:
  """Catches SIGTERM while entered (main thread only; elsewhere a no-op)."""

  def __init__(self):
    self.signal = None
    self._previous = None

  @property
  def requested(self):
    return self.signal is not None

  def _handle(self, signum, frame):
    del frame
    self.signal = signum

  def __enter__(self):
    if threading.current_thread() is threading.main_thread():
      self._previous = signal.signal(signal.SIGTERM, self._handle)
    return self

  def __exit__(self, *exc):
    if self._previous is not None:
      signal.signal(signal.SIGTERM, self._previous)
      self._previous = None
    return False
