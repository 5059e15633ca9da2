"""`python -m tests.recipes.interrupt <when> <n> -- <recipes.train flags>`: runs the
recipe command line and sends this process a real signal at a chosen point, so tests
can interrupt a run deterministically:

  loop <n>        SIGKILL after the n-th inner training loop (mid-epoch)
  term <n>        SIGTERM after the n-th inner training loop (the run saves and exits)
  save <n>        SIGKILL inside the n-th checkpoint write, after its shards are
                  written and before they are merged into the checkpoint
  evaluate <n>    SIGKILL at the start of the n-th evaluation (after an epoch's
                  checkpoint)
  report <n>      SIGKILL just before metrics.json is written (the run's last write)
  nan <n>         the n-th inner loop reports a NaN loss at its first step, as the
                  device-side guard does (a one-off divergence a retry gets past)
"""

import os
import signal
import sys

from recipes import run_report
from recipes import train
from recipes import train_step
from recipes import trainer
from tensorflow.python.checkpoint import functional_saver  # pylint: disable=g-direct-tensorflow-import


def after(count, action):
  """A function that runs `action` on its `count`-th call."""
  calls = [0]

  def tick():
    calls[0] += 1
    if calls[0] == count:
      action()
  return tick


def kill(sig):
  def send():
    sys.stdout.flush()
    os.kill(os.getpid(), sig)
  return send


def main():
  when, count = sys.argv[1], int(sys.argv[2])
  argv = sys.argv[sys.argv.index("--") + 1:]
  if when in ("loop", "term", "nan"):
    loop = train_step.TrainStep.loop
    if when == "nan":
      calls = [0]

      def nan_loop(self, iterator, steps):
        result = loop(self, iterator, steps)
        calls[0] += 1
        if calls[0] != count:
          return result
        return train_step.LoopResult(result.losses[:1], result.accuracies[:1], 0,
                                     float("nan"), 1.0)
      train_step.TrainStep.loop = nan_loop
    else:
      tick = after(count, kill(signal.SIGKILL if when == "loop" else signal.SIGTERM))

      def patched(self, iterator, steps):
        result = loop(self, iterator, steps)
        tick()
        return result
      train_step.TrainStep.loop = patched
  elif when == "save":
    merge = functional_saver.gen_io_ops.merge_v2_checkpoints
    tick = after(count, kill(signal.SIGKILL))

    def merge_then_maybe_die(*args, **kwargs):
      tick()
      return merge(*args, **kwargs)
    functional_saver.gen_io_ops.merge_v2_checkpoints = merge_then_maybe_die
  elif when == "evaluate":
    evaluate = trainer.Trainer.evaluate
    tick = after(count, kill(signal.SIGKILL))

    def patched_evaluate(self, *args, **kwargs):
      tick()
      return evaluate(self, *args, **kwargs)
    trainer.Trainer.evaluate = patched_evaluate
  elif when == "report":
    write_json = run_report.write_json
    tick = after(count, kill(signal.SIGKILL))

    def patched_write_json(path, data):
      if os.path.basename(path) == "metrics.json":
        tick()
      return write_json(path, data)
    run_report.write_json = patched_write_json
  else:
    raise SystemExit(f"unknown point {when!r}")
  train.cli(["train", *argv])


if __name__ == "__main__":
  main()
