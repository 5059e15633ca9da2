"""The best checkpoint on validation, and early stopping (Orbit's `new_best_metric`
action: a value is kept when it beats the best so far, with the weights that scored
it; `Runtime.early_stopping_patience` evaluations without a new best stop the run).

The best value, its epoch and the stop are variables saved in the run's checkpoints,
so a resumed run keeps them; the weights go to `<model_dir>/best/` (one checkpoint,
the validated, averaged weights).
"""

import os

import tensorflow as tf

from recipes import checkpoints
from recipes import evaluation
from recipes import nonfinite
from recipes.errors import ConfigError


def check_metric(metric, num_validation, counts, shot_thresholds):
  """`Runtime.best_metric` can be scored on this run's data: it needs validation
  examples (a hold-out or the source's own validation split), and a shot-group metric
  needs classes in its group (evaluation.shot_groups; the report gives None else)."""
  if metric is None:
    return
  if not num_validation:
    raise ConfigError(f"Runtime.best_metric={metric!r} needs a validation split: set "
                      "Task.validation_per_class (e.g. 5), or use a source with its own "
                      "validation list")
  many, few = shot_thresholds
  groups = evaluation.shot_groups(counts, many_shot_above=many, few_shot_below=few)
  group = metric[:-len("_shot_accuracy")] if metric.endswith("_shot_accuracy") else None
  if group is not None and group not in groups:
    raise ConfigError(f"Runtime.best_metric={metric!r} but no class has that many training "
                      f"examples (counts {list(counts)}, Task.shot_thresholds="
                      f"{tuple(shot_thresholds)}); choose 'balanced_accuracy'")


class Best:
  """The best validation value so far, its weights, and the patience left."""

  def __init__(self, *, root, chief, strategy, model, metric, patience, eval_every):
    """`root`: where this worker writes (model_dir on the chief); `metric`: the
    Runtime.best_metric; `patience`: evaluations without a new best before a stop
    (None: never); `eval_every`: epochs between evaluations."""
    with strategy.scope():
      self.value = tf.Variable(-1.0, dtype=tf.float64, trainable=False, name="best")
      self.epoch = tf.Variable(0, dtype=tf.int64, trainable=False, name="best_epoch")
      self.stopped = tf.Variable(False, trainable=False, name="stopped_early")
    self.model = model
    self.metric = metric
    self.patience = patience
    self.eval_every = max(1, eval_every or 1)
    directory = os.path.join(root, "best")
    if chief:
      checkpoints.remove_temporary(directory)
    self.manager = checkpoints.checkpoint_manager(tf.train.Checkpoint(model=model),
                                                  directory, 1)

  def update(self, done, value, steps_per_epoch):
    """After epoch `done` (1-based) scored `value` with the model's current weights:
    saves them when `value` is a new best (raising NonFinite if a weight is not
    finite); returns True when the patience has run out (the run stops)."""
    if value > float(self.value.numpy()):
      nonfinite.check_finite(self.model.weights, done * steps_per_epoch, done - 1)
      self.manager.save(checkpoint_number=done)
      self.value.assign(value)
      self.epoch.assign(done)
      return False
    evals_since = (done - int(self.epoch.numpy())) // self.eval_every
    if self.patience is not None and evals_since >= self.patience:
      print(f"Early stop after epoch {done}: validation {self.metric} has not passed "
            f"{float(self.value.numpy()):.4f} (epoch {int(self.epoch.numpy())}) in "
            f"{evals_since} evaluations", flush=True)
      self.stopped.assign(True)
      return True
    return False

  def forget_later(self):
    """After a rollback: a best checkpoint saved after the restored point came from the
    abandoned attempt; it is removed and the next validation sets the best again."""
    latest = self.manager.latest_checkpoint
    if latest and int(latest.rsplit("-", 1)[1]) > int(self.epoch.numpy()):
      for path in tf.io.gfile.glob(latest + ".*"):
        tf.io.gfile.remove(path)
      self.manager = checkpoints.record_state(tf.train.Checkpoint(model=self.model),
                                              os.path.dirname(latest), 1, [])
      self.value.assign(-1.0)
      self.epoch.assign(0)

  def summary(self):
    """{epoch, validation_<metric>, checkpoint} of the best so far, or None."""
    if not self.metric or not self.manager.latest_checkpoint:
      return None
    return {"epoch": int(self.epoch.numpy()),
            f"validation_{self.metric}": float(self.value.numpy()),
            "checkpoint": self.manager.latest_checkpoint}
