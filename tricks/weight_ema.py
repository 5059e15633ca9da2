"""Weight EMA (Polyak averaging; Polyak & Juditsky 1992) for evaluation and export.

The average itself is tf_keras's: an optimizer built with `use_ema=True` keeps, after
every step t, a slot

    avg_t = m * avg_{t-1} + (1 - m) * w_t,   avg_0 = w_0,  m = ema_momentum,

saved in the checkpoint with the other slots. `averaged_weights` swaps the averages
into the model for evaluation (or export) and puts the trained weights back after.
"""

import contextlib

import tensorflow as tf
import tf_keras


def inner(optimizer):
  """The optimizer a LossScaleOptimizer wraps, else `optimizer`: the one that keeps the
  slots, the average among them."""
  if isinstance(optimizer, tf_keras.mixed_precision.LossScaleOptimizer):
    return optimizer.inner_optimizer
  return optimizer


def uses_ema(optimizer):
  """Whether `optimizer` (or the one a LossScaleOptimizer wraps) keeps an average: EMA
  on, and built (tf_keras sets `_built` when it builds the slots)."""
  keeper = inner(optimizer)
  return bool(keeper.use_ema) and bool(getattr(keeper, "_built", False))


@contextlib.contextmanager
def averaged_weights(optimizer, variables):
  """Inside the block `variables` hold the optimizer's averages; restored on exit."""
  if not uses_ema(optimizer):
    yield False
    return
  trained = [tf.identity(v.read_value()) for v in variables]
  inner(optimizer).finalize_variable_values(variables)
  try:
    yield True
  finally:
    for variable, value in zip(variables, trained):
      variable.assign(value)
