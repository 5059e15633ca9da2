"""Preemption notices: SIGTERM, which Kubernetes, Vertex AI, Cloud TPU and Slurm send
before they take a machine, asks the run to save a checkpoint and exit.

Ctrl-C (SIGINT) does the same, so a run stopped by hand resumes where it stopped.
The handler only records the request; the trainer looks at it between inner loops
(the host runs no Python while a loop runs on the device), saves where it is, even
mid-epoch, and exits with status 143 (errors.EXIT_PREEMPTED), which schedulers retry.
The same idea as tf.distribute's PreemptionCheckpointHandler: in a multi-worker job
the workers agree on the stop through one all-reduce of a flag between inner loops
(`stop_requested`), so all save at the same step.
"""

import os
import signal
import threading

import tensorflow as tf

from recipes.errors import Preempted


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


def stop_requested(strategy, notice):
  """A function telling whether the run is asked to stop: this process's `notice`, or
  in a multi-worker job any worker's (one all-reduce of a flag, asked between inner
  loops), so every worker saves at the same step and exits (tf.distribute's
  PreemptionCheckpointHandler's idea: a worker that saved alone would wait forever for
  the others)."""
  resolver = getattr(strategy, "cluster_resolver", None)
  workers = sum(len(tasks) for kind, tasks in resolver.cluster_spec().as_dict().items()
                if kind in ("chief", "worker")) if resolver is not None else 1
  if not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy) or workers < 2:
    return lambda: notice.requested

  def any_worker():
    flag = tf.constant(1.0 if notice.requested else 0.0)
    flags = strategy.run(lambda: tf.identity(flag))
    return float(strategy.reduce(tf.distribute.ReduceOp.SUM, flags, axis=None)) > 0

  return any_worker


def preempted(notice, saved, epoch, step_in_epoch, steps_per_epoch):
  """The Preempted error after the checkpoint `saved` at (`epoch`, `step_in_epoch`)."""
  name = ("SIGTERM on another worker" if notice.signal is None
          else signal.Signals(notice.signal).name)
  by_hand = notice.signal == signal.SIGINT
  return Preempted(f"{'interrupted' if by_hand else 'preempted'} ({name}) at epoch "
                   f"{epoch + 1}, step {step_in_epoch} of {steps_per_epoch}: saved "
                   f"{saved}; rerun the same command to resume from it", by_hand)
