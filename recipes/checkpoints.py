"""The run's checkpoints: restore the newest that reads back whole, save after checking
every weight finite, and set damaged ones aside.

Checkpoints are numbered by global step and hold the model, the optimizer, the run's
`Progress` (epochs done, the step within the next, rollbacks, the current epoch's data
order), the epoch's running metrics, the layers' random generators and the best-
checkpoint states, so a run resumes exactly, even mid-epoch. `layout` names every key
in one place: the keys are a file format (a rename would make every existing run's
checkpoints unreadable; tests/recipes/checkpoint_fixture/ holds one written before
this layout was gathered here, and checkpoints_test reads it).

Multi-worker: every worker saves (saving reads the replicas' variables, which takes
every worker), but only the chief into model_dir; the others into a scratch directory
of their own (lifecycle.py), as TF's multi-worker guide says. Every worker restores
from model_dir's checkpoints.
"""

import dataclasses
import os
import re
import sys
from typing import Any, Optional, Sequence

import tensorflow as tf

from recipes import nonfinite
from recipes.errors import ConfigError

NUMBERED = re.compile(r"^ckpt-(\d+)\.index$")


class Progress:
  """Where the run is, saved in every checkpoint: epochs done, steps done into the
  next, rollbacks so far, and the rollback count whose data order the current epoch
  follows (a resumed partial epoch keeps its order, even after a rollback). The loop
  asks it; only `Checkpoints` sets the position."""

  def __init__(self, strategy):
    with strategy.scope():
      self.epoch = tf.Variable(0, dtype=tf.int64, trainable=False, name="epoch")
      self.step_in_epoch = tf.Variable(0, dtype=tf.int64, trainable=False,
                                       name="step_in_epoch")
      self.rollbacks = tf.Variable(0, dtype=tf.int64, trainable=False, name="retries")
      self.epoch_order = tf.Variable(0, dtype=tf.int64, trainable=False, name="epoch_order")

  @property
  def epochs_done(self):
    return int(self.epoch.numpy())

  @property
  def position(self):
    """(epochs done, steps done into the next)."""
    return int(self.epoch.numpy()), int(self.step_in_epoch.numpy())

  def begin_epoch(self):
    """A new epoch (not a resumed one) takes the latest data order."""
    self.epoch_order.assign(self.rollbacks)

  def data_seed(self, seed):
    """The seed of the current epoch's data order (nonfinite.data_seed)."""
    return nonfinite.data_seed(seed, int(self.epoch_order.numpy()))

  def end_epoch(self, done):
    """`done` epochs are trained."""
    self.epoch.assign(done)
    self.step_in_epoch.assign(0)


@dataclasses.dataclass(frozen=True)
class Kept:
  """What a run's checkpoints keep beside model, optimizer and progress (None: not
  kept): the best checkpoint's state (best.Best), the paper's best test epoch
  (best_on_test.BestOnTest), the epoch's running metrics, the random layers'
  generators."""
  best: Optional[Any] = None
  best_on_test: Optional[Any] = None
  loss_metric: Optional[Any] = None
  accuracy_metric: Optional[Any] = None
  layer_rngs: Sequence[Any] = ()


def layout(model, optimizer, progress, kept):
  """Every key of a run's checkpoint and what it holds: the file format, in one place.
  "retries" is the rollback count's key (its first name); the best-on-test keys exist
  only in runs that keep that selection (Runtime.test_selection)."""
  keys = dict(model=model, optimizer=optimizer, epoch=progress.epoch,
              step_in_epoch=progress.step_in_epoch, retries=progress.rollbacks,
              epoch_order=progress.epoch_order)
  if kept.best is not None:
    keys.update(best_value=kept.best.value, best_epoch=kept.best.epoch,
                stopped=kept.best.stopped)
  if kept.best_on_test is not None and kept.best_on_test.paper:
    keys.update(test_selected_top1=kept.best_on_test.top1,
                test_selected_epoch=kept.best_on_test.epoch,
                test_selected_balanced_accuracy=kept.best_on_test.balanced)
  if kept.loss_metric is not None:
    keys.update(loss_metric=kept.loss_metric, accuracy_metric=kept.accuracy_metric,
                layer_rngs=list(kept.layer_rngs))
  return keys


class Checkpoints:
  """Restore and save of one run's training state (see the module docstring)."""

  def __init__(self, *, model_dir, root, chief, strategy, model, optimizer, length, keep,
               kept=Kept()):
    """`root`: where this worker writes (model_dir on the chief); `length`: the run's
    build.Length; `keep`: checkpoints kept on the chief; `kept`: the other state saved
    (`Kept`)."""
    self.progress = Progress(strategy)
    self.checkpoint = tf.train.Checkpoint(**layout(model, optimizer, self.progress, kept))
    self._weights = lambda: model.weights + list(optimizer.variables)
    self.length = length
    self.keep = keep
    self.chief = chief
    self.directory = os.path.join(model_dir, "checkpoints")  # restored from
    if chief:
      remove_temporary(self.directory)
    self.manager = checkpoint_manager(self.checkpoint, os.path.join(root, "checkpoints"),
                                      keep if chief else 1)
    self.restored = None  # the checkpoint the run stands on
    self.position = None  # (epoch, step in epoch) of `restored`

  def candidates(self):
    """The checkpoints on disk, newest first (the directory, not the state file, is
    the truth: a kill between a checkpoint's write and the state file's update leaves
    the state file behind)."""
    if not tf.io.gfile.isdir(self.directory):
      return []
    numbered = [(int(m.group(1)), m.group(0)[:-len(".index")])
                for m in map(NUMBERED.match, tf.io.gfile.listdir(self.directory)) if m]
    return [os.path.join(self.directory, name) for _, name in sorted(numbered, reverse=True)]

  def restore(self):
    """Restores the newest checkpoint that reads back whole; a damaged one (truncated,
    emptied, a shard missing) is reported in one warning line, moved to
    checkpoints/damaged/, and the one before it is tried. Returns (epoch, step in
    epoch) to start from; (0, 0) with no checkpoint."""
    damaged = False
    for path in self.candidates():
      try:
        self.checkpoint.read(path).assert_existing_objects_matched()
      except (tf.errors.OpError, IndexError, EOFError) as e:  # the files, not the run
        reason = " ".join(str(e).split())[:160]
        print(f"warning: checkpoint {path} is damaged ({type(e).__name__}: {reason}); "
              "moved to checkpoints/damaged/, trying the one before it", file=sys.stderr,
              flush=True)
        if self.chief:
          quarantine(path)
        damaged = True
        continue
      except (AssertionError, ValueError) as e:
        raise ConfigError(
            f"checkpoint {path} does not match this run's model and optimizer "
            f"({' '.join(str(e).split())[:120]}); it was written by another version of "
            "the recipe: choose a new --model_dir") from None
      self.restored = path
      epoch, step = self.position = self.progress.position
      if damaged and self.chief:  # the state file names what was moved: write it again
        self.manager = record_state(self.checkpoint, self.directory, self.keep,
                                    self.candidates())
      print(f"Resumed from {path} at epoch {epoch} of {self.length.epochs}"
            + (f", step {step} of {self.length.steps_per_epoch}" if step else ""),
            flush=True)
      return epoch, step
    if damaged:
      raise ConfigError(f"every checkpoint in {self.directory} is damaged (moved to its "
                        "damaged/ folder); to start afresh choose a new --model_dir")
    return 0, 0

  def roll_back(self):
    """Restores the last good checkpoint after a non-finite step and counts the
    rollback in the run's state (the next epochs take a fresh data order); returns
    (epoch, step in epoch) to start from."""
    rollbacks = self.progress.rollbacks
    before = int(rollbacks.numpy())
    position = self.restore()
    rollbacks.assign(max(before, int(rollbacks.numpy())) + 1)
    return position

  def save(self, epoch, step_in_epoch=0):
    """Checks every weight finite, then writes a checkpoint at (`epoch` epochs done,
    `step_in_epoch` steps into the next); returns its path."""
    step = epoch * self.length.steps_per_epoch + step_in_epoch
    if self.position == (epoch, step_in_epoch):
      return self.restored  # nothing new since: never rewrite the checkpoint in place
    nonfinite.check_finite(self._weights(), step, epoch)
    self.progress.epoch.assign(epoch)
    self.progress.step_in_epoch.assign(step_in_epoch)
    path = self.manager.save(checkpoint_number=step)
    self.restored, self.position = path, (epoch, step_in_epoch)
    return path


def checkpoint_manager(checkpoint, directory, max_to_keep):
  """A CheckpointManager; a state file that does not parse is set aside (the
  checkpoints themselves are found by listing the directory)."""
  try:
    return tf.train.CheckpointManager(checkpoint, directory, max_to_keep=max_to_keep)
  except (tf.errors.OpError, ValueError) as e:
    state = os.path.join(directory, "checkpoint")
    print(f"warning: {state} does not parse ({type(e).__name__}); set aside as "
          "checkpoint.damaged", file=sys.stderr, flush=True)
    tf.io.gfile.rename(state, state + ".damaged", overwrite=True)
    return tf.train.CheckpointManager(checkpoint, directory, max_to_keep=max_to_keep)


def record_state(checkpoint, directory, max_to_keep, paths):
  """A CheckpointManager over `paths` (newest first), its state file written anew."""
  state = os.path.join(directory, "checkpoint")
  if tf.io.gfile.exists(state):
    tf.io.gfile.remove(state)
  if paths:
    tf.compat.v1.train.update_checkpoint_state(directory, paths[0],
                                               all_model_checkpoint_paths=list(reversed(paths)))
  return tf.train.CheckpointManager(checkpoint, directory, max_to_keep=max_to_keep)


def remove_temporary(directory):
  """Removes what a kill during a checkpoint write leaves: `<prefix>_temp*/` folders
  of shards that were never merged into a checkpoint."""
  if not tf.io.gfile.isdir(directory):
    return
  for name in tf.io.gfile.listdir(directory):
    name = name.rstrip("/")
    path = os.path.join(directory, name)
    if "_temp" in name and tf.io.gfile.isdir(path):
      print(f"Removed {path}, left by a checkpoint write that did not finish", flush=True)
      tf.io.gfile.rmtree(path)


def quarantine(prefix):
  """Moves the files of checkpoint `prefix` into a `damaged/` folder beside it."""
  directory, name = os.path.split(prefix)
  damaged = os.path.join(directory, "damaged")
  tf.io.gfile.makedirs(damaged)
  for path in tf.io.gfile.glob(prefix + ".*"):
    tf.io.gfile.rename(path, os.path.join(damaged, os.path.basename(path)), overwrite=True)
