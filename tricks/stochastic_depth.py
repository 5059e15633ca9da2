"""Stochastic depth (Huang et al. 2016, arXiv:1603.09382), batch-wise as in NFNets.

In training each example's residual branch is kept with probability 1 - rate:

    y = x * floor(1 - rate + u),  u ~ U[0, 1) per example,

and divided by 1 - rate only when `scale_by_keep` (NFNets do not rescale; DeepMind's
nfnets/base.py StochDepth). Identity at inference. The random stream is Keras's
layer generator, as for `Dropout`; Keras keeps it out of checkpoints, so a trainer
that wants exact resumption saves it itself (recipes/checkpoints.py does).
"""

import tensorflow as tf
import tf_keras


@tf_keras.utils.register_keras_serializable(package="tricks")
class StochasticDepth(tf_keras.__internal__.layers.BaseRandomLayer):
  """Drops the whole input of an example with probability `rate` in training."""

  def __init__(self, rate, scale_by_keep=False, seed=None, **kwargs):
    super().__init__(seed=seed, **kwargs)
    if not 0.0 <= rate < 1.0:
      raise ValueError(f"stochastic depth rate must be in [0, 1), got {rate}")
    self.rate = rate
    self.scale_by_keep = scale_by_keep
    self.seed = seed

  def call(self, inputs, training=None):
    if not training or self.rate == 0.0:
      return inputs
    keep = 1.0 - self.rate
    shape = [tf.shape(inputs)[0]] + [1] * (inputs.shape.rank - 1)
    u = self._random_generator.random_uniform(shape, dtype=tf.float32)
    mask = tf.cast(tf.floor(keep + u), inputs.dtype)
    if self.scale_by_keep:
      inputs = inputs / tf.cast(keep, inputs.dtype)
    return inputs * mask

  def get_config(self):
    return dict(super().get_config(), rate=self.rate,
                scale_by_keep=self.scale_by_keep, seed=self.seed)
