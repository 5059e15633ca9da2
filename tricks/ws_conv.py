"""Scaled weight-standardised convolution (Brock et al. 2021, arXiv:2101.08692).

Eq. (2) of "Characterizing signal propagation to close the performance gap in
unnormalized ResNets" (Brock, De, Smith 2021), with the learnable gain of NFNets:

    W_hat[..., j] = gain[j] * (W[..., j] - mean_j) / sqrt(N * var_j),

mean and variance taken over the fan-in axes (H, W, I) of each output unit j, N the
fan-in, and N * var floored at `eps`. The convolution always has a bias; grouped
ones run through `tricks.grouped_conv` (not tf_keras's slow XLA path on CPU).
"""

import numpy as np
import tensorflow as tf
import tf_keras

from tricks import grouped_conv


def standardize_kernel(kernel, gain, eps=1e-4):
  """Returns the scaled weight-standardised `kernel` (HWIO), computed in float32."""
  dtype = kernel.dtype
  kernel = tf.cast(kernel, tf.float32)
  fan_in = float(np.prod(kernel.shape[:-1]))
  mean, var = tf.nn.moments(kernel, axes=[0, 1, 2], keepdims=True)
  scale = tf.math.rsqrt(tf.maximum(var * fan_in, eps)) * tf.cast(gain, tf.float32)
  return tf.cast(kernel * scale - mean * scale, dtype)


@tf_keras.utils.register_keras_serializable(package="tricks")
class WSConv2D(grouped_conv.GroupedConv2D):
  """A `Conv2D` whose kernel is scaled-weight-standardised with a learnable gain."""

  def __init__(self, filters, kernel_size, eps=1e-4, **kwargs):
    kwargs.setdefault(
        "kernel_initializer",
        tf_keras.initializers.VarianceScaling(1.0, "fan_in", "untruncated_normal"))
    kwargs["use_bias"] = True
    super().__init__(filters, kernel_size, **kwargs)
    self.eps = eps

  def build(self, input_shape):
    super().build(input_shape)
    self.gain = self.add_weight(
        name="gain", shape=(self.filters,), initializer="ones", trainable=True)

  def convolution_op(self, inputs, kernel):
    return super().convolution_op(
        inputs, standardize_kernel(kernel, self.gain, self.eps))

  def get_config(self):
    config = super().get_config()
    config.pop("use_bias", None)
    return dict(config, eps=self.eps)
