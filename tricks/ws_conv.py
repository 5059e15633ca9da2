"""Scaled weight-standardised convolution (Brock et al. 2021, arXiv:2101.08692).

Eq. (2) of "Characterizing signal propagation to close the performance gap in
unnormalized ResNets" (Brock, De, Smith 2021), with the learnable gain of NFNets:

    W_hat[..., j] = gain[j] * (W[..., j] - mean_j) / sqrt(N * var_j),

mean and variance taken over the fan-in axes (H, W, I) of each output unit j, N the
fan-in, and N * var floored at `eps` (DeepMind's nfnets/base.py WSConv2D). With
`variance_eps` set, the variance is offset instead of floored,

    W_hat[..., j] = gain[j] * (W[..., j] - mean_j) / sqrt(N * (var_j + variance_eps)),

batch normalisation over the fan-in as timm's ScaledStdConv2d / ScaledStdConv2dSame
compute it (timm/layers/std_conv.py: F.batch_norm(W, eps) * gain / sqrt(N); its
DeepMind-compatible NFNets use eps 1e-5), so timm's checkpoints give timm's numbers.
The convolution always has a bias; grouped ones run through `tricks.grouped_conv`
(not tf_keras's slow XLA path on CPU).
"""

import numpy as np
import tensorflow as tf
import tf_keras

from tricks import grouped_conv


def standardize_kernel(kernel, gain, eps=1e-4, variance_eps=None):
  """Returns the scaled weight-standardised `kernel` (HWIO), computed in float32.

  The gradient is written out, as batch normalisation's backward pass over the fan-in
  (Ioffe & Szegedy 2015, section 3), with x_c = W - mean_j and s_j = gain_j /
  sqrt(max(N var_j, eps)):

      dL/dW    = s_j (dY - mean(dY) - x_c mean(dY x_c) / var_j)   (var_j term 0 when
                                                                   N var_j < eps)
      dL/dgain = sum(dY x_c) / sqrt(max(N var_j, eps)),

  and with `variance_eps` (timm's form) s_j = gain_j / sqrt(N (var_j + variance_eps))
  and var_j + variance_eps in place of var_j, never floored.

  the same numbers as automatic differentiation in about 65% of its time (it touches
  every kernel twice a step, 46M weights in NFNet-F0). A bfloat16 kernel (mixed
  precision) is standardised in float32 the same way, and the result cast back.
  """
  dtype = kernel.dtype
  fan_in = float(np.prod(kernel.shape[:-1]))
  axes = [0, 1, 2]
  @tf.custom_gradient
  def standardize(w, g):
    mean, var = tf.nn.moments(w, axes=axes, keepdims=True)
    if variance_eps is None:
      inv = tf.math.rsqrt(tf.maximum(var * fan_in, eps))
    else:
      inv = tf.math.rsqrt((var + variance_eps) * fan_in)
    scale = inv * g

    def grad(dy):
      centred = w - mean
      dy_centred = tf.reduce_sum(dy * centred, axis=axes, keepdims=True)
      dy_mean = tf.reduce_mean(dy, axis=axes, keepdims=True)
      if variance_eps is None:
        through_var = tf.where(var * fan_in < eps, tf.zeros_like(var),
                               dy_centred / (fan_in * tf.maximum(var, 1e-30)))
      else:
        through_var = dy_centred / (fan_in * (var + variance_eps))
      return (scale * (dy - dy_mean - centred * through_var),
              tf.reshape(dy_centred * inv, tf.shape(g)))

    return w * scale - mean * scale, grad

  return tf.cast(standardize(tf.cast(kernel, tf.float32), tf.cast(gain, tf.float32)),
                 dtype)


@tf_keras.utils.register_keras_serializable(package="tricks")
class WSConv2D(grouped_conv.GroupedConv2D):
  """A `Conv2D` whose kernel is scaled-weight-standardised with a learnable gain
  (`eps`: DeepMind's floor on N var; `variance_eps`: timm's offset of var instead)."""

  def __init__(self, filters, kernel_size, eps=1e-4, variance_eps=None, **kwargs):
    kwargs.setdefault(
        "kernel_initializer",
        tf_keras.initializers.VarianceScaling(1.0, "fan_in", "untruncated_normal"))
    kwargs["use_bias"] = True
    super().__init__(filters, kernel_size, **kwargs)
    self.eps = eps
    self.variance_eps = variance_eps

  def build(self, input_shape):
    super().build(input_shape)
    self.gain = self.add_weight(
        name="gain", shape=(self.filters,), initializer="ones", trainable=True)

  def convolution_op(self, inputs, kernel):
    return super().convolution_op(
        inputs, standardize_kernel(kernel, self.gain, self.eps, self.variance_eps))

  def get_config(self):
    config = super().get_config()
    config.pop("use_bias", None)
    return dict(config, eps=self.eps, variance_eps=self.variance_eps)
