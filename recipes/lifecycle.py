"""One run's life in its model_dir, the same for a training run and for a run that only
transforms a model (the tau-normalised classifier):

1. the lock: one run per model_dir (the chief holds it; a second run stops before
   writing anything);
2. a finished run (its metrics.json, written last) is returned as it is;
3. config.gin: the Gin config the run started with;
4. the `RunDir`: checkpoints, the best checkpoint, summary writers; a non-chief worker
   writes into a scratch directory of its own;
5. the run's body;
6. close: the scratch directory deleted, writers flushed. A data file that fails to
   decode mid-run becomes one ConfigError line naming it.
"""

import contextlib
import dataclasses
import json
import os
import shutil
import tempfile
from typing import Any, Optional

import tensorflow as tf

from recipes import best as best_lib
from recipes import best_on_test as best_on_test_lib
from recipes import checkpoints as checkpoints_lib
from recipes import run_lock
from recipes import run_report
from recipes import strategies
from recipes.errors import ConfigError
from tricks import layer_rng


@dataclasses.dataclass
class RunDir:
  """What one worker of a run writes, and where."""
  chief: bool
  root: str  # where this worker writes: model_dir, or (not the chief) `scratch`
  scratch: Optional[str]
  checkpoints: checkpoints_lib.Checkpoints
  best: best_lib.Best
  best_on_test: best_on_test_lib.BestOnTest
  train_writer: Any
  eval_writer: Any

  def close(self):
    self.train_writer.flush()
    self.eval_writer.flush()
    if self.scratch is not None:
      shutil.rmtree(self.scratch, ignore_errors=True)
      self.scratch = None


def open_run_dir(built, chief):
  """The RunDir of `built` (a build.Built) for this worker."""
  scratch = None if chief else tempfile.mkdtemp(prefix="model_zoo-worker-")
  root = built.model_dir if chief else scratch
  runtime = built.runtime
  best = best_lib.Best(root=root, chief=chief, strategy=built.strategy, model=built.model,
                       metric=runtime.best_metric, patience=runtime.early_stopping_patience,
                       eval_every=runtime.eval_every_epochs)
  on_test = best_on_test_lib.BestOnTest(strategy=built.strategy,
                                        paper=runtime.test_selection)
  kept = checkpoints_lib.Kept(
      best=best, best_on_test=on_test, loss_metric=built.step.loss_metric,
      accuracy_metric=built.step.accuracy_metric,
      layer_rngs=layer_rng.layer_random_generators(built.model))
  checkpoints = checkpoints_lib.Checkpoints(
      model_dir=built.model_dir, root=root, chief=chief, strategy=built.strategy,
      model=built.model, optimizer=built.optimizer, length=built.length,
      keep=runtime.keep_checkpoints, kept=kept)
  if chief:
    train_writer = tf.summary.create_file_writer(os.path.join(root, "train"))
    eval_writer = tf.summary.create_file_writer(os.path.join(root, "eval"))
  else:
    train_writer = eval_writer = tf.summary.create_noop_writer()
  return RunDir(chief=chief, root=root, scratch=scratch,
                checkpoints=checkpoints, best=best, best_on_test=on_test,
                train_writer=train_writer,
                eval_writer=eval_writer)


def run_in_model_dir(built, body):
  """Runs `body(run_dir)` as `built`'s run in its model_dir (steps 1 to 6 of the
  module docstring); returns its metrics, or a finished run's."""
  chief = strategies.is_chief(built.strategy)
  with run_lock.acquire(built.model_dir) if chief else contextlib.nullcontext():
    finished = finished_report(built.model_dir)
    if finished is not None:
      print(f"{built.model_dir} holds a finished run: its report (metrics.json) is left "
            "as it was; choose a new --model_dir to train again", flush=True)
      return finished
    if chief:
      run_report.write_text(os.path.join(built.model_dir, "config.gin"), built.config_text)
    run_dir = open_run_dir(built, chief)
    try:
      with data_errors(built.data):
        return body(run_dir)
    finally:
      run_dir.close()


def finished_report(model_dir):
  """The metrics of the finished run in `model_dir` (finish writes metrics.json last),
  or None."""
  path = os.path.join(model_dir, "metrics.json")
  if not os.path.exists(path):
    return None
  try:
    with open(path) as f:
      return json.load(f)
  except (OSError, ValueError):
    return None  # damaged: finish writes it again


@contextlib.contextmanager
def data_errors(data):
  """A file that fails to decode mid-run (it passed the scan's header check) becomes
  one ConfigError line naming it; the checkpoints stay as they were."""
  try:
    yield
  except (tf.errors.InvalidArgumentError, tf.errors.DataLossError,
          tf.errors.UnimplementedError) as e:
    find = data.source.find_bad_files
    if find is None:
      raise
    print(f"\n{type(e).__name__} while reading the data; decoding the data set's files "
          "to name the one that failed ...", flush=True)
    bad = find("train", None) + find("test", None)  # validation: "train" or its own
    if data.validation_split != "train":
      bad += find(data.validation_split, None)
    if not bad:
      raise
    raise ConfigError(
        f"{bad[0]} does not decode as an image (tf.io.decode_image fails on it)"
        + (f", and {len(bad) - 1} more files" if len(bad) > 1 else "")
        + "; remove or replace it, or bind image_folder.on_bad_file = 'skip'; the "
        "checkpoints are intact, rerun to resume") from None


def check_model_dir(model_dir, config_text):
  """Before a run writes anything: `model_dir` can be written, and holds no run of
  another configuration."""
  model_dir_writable(model_dir)
  resume_config(model_dir, config_text)


def model_dir_writable(model_dir):
  """Raises ConfigError unless `model_dir` exists as a writable directory or can be made."""
  path = os.path.abspath(model_dir)
  probe = path
  while not os.path.exists(probe):
    probe = os.path.dirname(probe)
  if not os.path.isdir(probe):
    raise ConfigError(
        f"model_dir {model_dir!r} cannot be created: {probe!r} is a file; choose "
        "another --model_dir")
  try:
    os.rmdir(tempfile.mkdtemp(dir=probe, prefix=".model_zoo-write-check-"))
  except OSError as e:
    raise ConfigError(
        f"model_dir {model_dir!r} is not writable ({e.strerror} in {probe!r}); choose "
        "a writable --model_dir") from None


def resume_config(model_dir, config_text):
  """A model_dir holds one run: refuse to resume it under another configuration."""
  path = os.path.join(model_dir, "config.gin")
  if not os.path.exists(path):
    return
  with open(path) as f:
    saved = f.read()
  if saved == config_text:
    return
  old = [l for l in saved.splitlines() if l and not l.startswith("#")]
  new = [l for l in config_text.splitlines() if l and not l.startswith("#")]
  was = next((l for l in old if l not in new), None)
  now = next((l for l in new if l not in old), None)
  raise ConfigError(
      f"model_dir {model_dir!r} holds a run with another configuration (its config.gin "
      f"has {was!r} where this run has {now!r}); rerun with the same flags to resume, "
      "or pick a new --model_dir")
