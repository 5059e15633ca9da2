"""Deferred re-weighting (DRW; Cao et al. 2019, arXiv:1906.07413, Sec. 3.3 and
Algorithm 1): train with unit class weights, then, from epoch `start_epoch` (160 of 200
in the paper), with re-weighting weights, e.g. Cui et al.'s class-balanced weights at
beta = 0.9999 (tricks/class_balanced.py), as the LDAM-DRW code does.

The weights live in a [K] variable that a weighted loss reads at every step;
`set_epoch(epoch)` switches it. A loss that carries a `set_epoch` method is told each
epoch by the trainer before the epoch trains (a resumed run included), so the switch
lands on the same step in an interrupted and an uninterrupted run.
"""

import numpy as np
import tensorflow as tf


class DeferredWeights:
  """Class weights of 1 before `start_epoch` (0-based) and `weights` from it on."""

  def __init__(self, weights, start_epoch):
    if isinstance(start_epoch, bool) or not isinstance(start_epoch, int) or start_epoch < 0:
      raise ValueError(f"DRW start_epoch={start_epoch!r} must be a whole number >= 0 "
                       "(Cao et al.: 160 of 200 epochs)")
    self.after = np.asarray(weights, np.float32)
    if self.after.ndim != 1 or not np.all(np.isfinite(self.after)) or np.any(self.after < 0):
      raise ValueError(f"DRW weights must be one finite weight >= 0 a class, got "
                       f"{np.asarray(weights).tolist()}")
    self.start_epoch = start_epoch
    self.variable = tf.Variable(np.ones_like(self.after), trainable=False,
                                name="deferred_class_weights")

  def set_epoch(self, epoch):
    """Sets the weights of epoch `epoch` (0-based)."""
    self.variable.assign(self.after if epoch >= self.start_epoch
                         else np.ones_like(self.after))
