"""Non-finite training: detection, and the rollback policy.

A loop whose step had a NaN or Inf loss or gradient norm (train_step reports the first
such step), or a weight that is not finite when a checkpoint is about to be written,
raises `NonFinite`. The trainer then rolls back to the last good checkpoint and retries
on a fresh data order, at most `Runtime.nonfinite_retries` times in a row; past that
`RollbackPolicy.count_one` raises Diverged (exit status 3).

One name per concept: `Runtime.nonfinite_retries` is the limit; a rollback is one
return to a checkpoint; the run's rollbacks so far (kept in the checkpoint) offset the
data order's seed (`data_seed`); metrics.json's `nonfinite_rollbacks` counts this
process's.
"""

import numpy as np
import tensorflow as tf

from recipes.errors import Diverged

# Far apart, so that a retry's data order is no epoch's order of another rollback count.
SEED_OFFSET = 1_000_000_000


class NonFinite(Exception):
  """A step (or the weights about to be saved) went NaN or Inf."""

  def __init__(self, step, epoch, loss=None, grad_norm=None, weight=None):
    super().__init__(step)
    self.step, self.epoch = step, epoch
    if weight is not None:
      self.what = f"weight {weight[0]!r} is {weight[1]}"
    elif loss is not None and not np.isfinite(loss):
      self.what = f"the loss is {loss}"
    else:
      self.what = f"the gradient norm is {grad_norm} (loss {loss:.4g})"


def data_seed(seed, rollbacks):
  """The seed of the epochs' data order: the run's, or after `rollbacks` rollbacks a
  fresh one (so a retry does not meet the batches that diverged again)."""
  return seed + SEED_OFFSET * rollbacks


def first_non_finite(variables):
  """(name, 'nan' or 'inf') of the first floating-point variable holding a non-finite
  value, or None."""
  floats = [v for v in variables if v.dtype.is_floating]
  if not floats:
    return None
  flags = _all_finite(floats).numpy()
  for variable, finite in zip(floats, flags):
    if not finite:
      values = variable.numpy()
      return variable.name, "nan" if np.isnan(values).any() else "inf"
  return None


def check_finite(variables, step, epoch):
  """Raises NonFinite (at `step`, `epoch`) naming the first non-finite variable."""
  bad = first_non_finite(variables)
  if bad is not None:
    raise NonFinite(step, epoch, weight=bad)


@tf.function
def _all_finite(variables):
  return tf.stack([tf.reduce_all(tf.math.is_finite(tf.cast(v, tf.float32)))
                   for v in variables])


class RollbackPolicy:
  """The rollback policy: retry from the last good checkpoint, at most `limit` times
  in a row; a rollback counts as "in a row" while the run has saved no checkpoint
  past the one the previous rollback went back to."""

  def __init__(self, limit):
    self.limit = limit
    self.in_a_row = 0
    self.count = 0  # rollbacks in this process
    self._back_to = None  # the checkpoint the last rollback went back to

  def count_one(self, bad, standing_on):
    """Counts a rollback after `bad` (NonFinite) on a run standing on checkpoint
    `standing_on`, or raises Diverged when the limit is used up."""
    if standing_on != self._back_to:
      self.in_a_row = 0  # the run got past its last rollback: a new divergence
    if self.in_a_row >= self.limit:
      tried = (f"after {self.in_a_row} {'retry' if self.in_a_row == 1 else 'retries'} on "
               "fresh data orders" if self.in_a_row else
               "no retries: Runtime.nonfinite_retries = 0")
      raise Diverged(
          f"training diverged at step {bad.step} (epoch {bad.epoch + 1}): {bad.what}; "
          f"the last good checkpoint is {standing_on} ({tried}); lower LEARNING_RATE (or "
          "clip harder, or raise Runtime.nonfinite_retries) and train in a new "
          "--model_dir") from None
    self.in_a_row += 1
    self.count += 1

  def went_back_to(self, checkpoint):
    self._back_to = checkpoint
