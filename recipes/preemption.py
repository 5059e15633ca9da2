"""Preemption notices: SIGTERM, which Kubernetes, Vertex AI, Cloud TPU and Slurm send
before they take a machine, asks the run to save a checkpoint and exit.

Ctrl-C (SIGINT) does the same, so a run stopped by hand resumes where it stopped.
The handler only records the request; the trainer looks at it between inner loops
(the host runs no Python while a loop runs on the device), saves where it is, even
mid-epoch, and exits with status 143 (errors.EXIT_PREEMPTED), which schedulers retry.
The same idea as tf.distribute's PreemptionCheckpointHandler: in a multi-worker job
the workers agree on the stop through one all-reduce of a flag between inner loops
(`stop_requested`), so all save at the same step.

Outside the training loop (start-up, restore, the final evaluation, the export) there is
nothing to save that the last checkpoint lacks, so the process-wide handler
(`exit_on_sigterm`, installed by the entry point before it imports TensorFlow) ends the
run at once with status 143. It matters most in a container, where the trainer is PID 1:
the kernel drops a signal PID 1 has no handler for, so without it a stop outside `fit`
waited out the grace period and ended in SIGKILL.

This module imports TensorFlow only when asked for the multi-worker stop, so the entry
point can install the handler first.
"""

import os
import signal
import threading

from recipes.errors import EXIT_PREEMPTED
from recipes.errors import Preempted


SIGNALS = (signal.SIGTERM, signal.SIGINT)


def _exit_now(signum, frame):
  del signum, frame
  os.write(2, b"stopped: SIGTERM outside the training loop; exiting with status 143 "
           b"(the last checkpoint is kept: rerun the same command to resume)\n")
  raise SystemExit(EXIT_PREEMPTED)


def exit_on_sigterm():
  """Installs the process-wide SIGTERM handler: exit status 143 at once (SystemExit, so
  `finally` blocks and locks unwind). `Notice` replaces it while the training loop runs
  and puts it back after. Main thread only; a SIGTERM ignored on purpose stays ignored."""
  if threading.current_thread() is not threading.main_thread():
    return
  if signal.getsignal(signal.SIGTERM) is not signal.SIG_IGN:
    signal.signal(signal.SIGTERM, _exit_now)


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

  def __exit__(self, kind, value, traceback):
    for signum, previous in self._previous.items():
      signal.signal(signum, previous)
    caught, self._previous = self._previous, {}
    if kind is None and self.signal == signal.SIGTERM and signal.SIGTERM in caught:
      # Asked to stop after the loop's last look (the last epoch's validation or
      # checkpoint): the request goes to the handler outside the loop, not lost. (A
      # Ctrl-C then lets the short rest of the run finish.)
      signal.raise_signal(signal.SIGTERM)
    return False


def stop_requested(strategy, notice):
  """A function telling whether the run is asked to stop: this process's `notice`, or
  in a multi-worker job any worker's (one all-reduce of a flag, asked between inner
  loops), so every worker saves at the same step and exits (tf.distribute's
  PreemptionCheckpointHandler's idea: a worker that saved alone would wait forever for
  the others)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top  (see the docstring)
  resolver = strategy.cluster_resolver  # None on one machine
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
