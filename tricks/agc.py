"""Adaptive gradient clipping (Brock et al. 2021, arXiv:2102.06171, eq. 3).

For every unit i (all fan-in weights of one output unit: tf_keras's kernels are laid out
(..., in, out), the output axis last, so a unit is a column of a Dense kernel and one
output channel's slice [..., j] of a convolution kernel; `unit_axes` gives the
depthwise and transposed layouts),

    G_i <- lambda * max(||W_i||, eps) / ||G_i|| * G_i   if ||G_i|| / max(||W_i||, eps) > lambda
    G_i <- G_i                                           otherwise,

with Frobenius norms. Vectors and scalars (biases, gains) are one unit each. The final
classifier is excluded by default, as in the paper (section 4.1). Applied to unscaled,
all-reduced gradients: the trainer unscales mixed-precision losses and all-reduces
across replicas before it calls the transform.
"""

import tensorflow as tf
import tf_keras


def unit_axes(variable, transposed=False):
  """The fan-in axes of `variable`'s units, by Keras's kernel layouts: the axes a
  unit's norm sums over, the unit being the slice at one index of the rest.

  Dense (I, O): (0,), a unit per column. ConvND kernels (spatial..., I, O): all but the
  last, a unit per output channel.
  DepthwiseConv2D (H, W, I, M): (0, 1), a unit per (channel, multiplier).
  ConvNDTranspose (spatial..., O, I): all but the second to last. Vectors and scalars:
  None, the whole tensor is one unit.
  """
  rank = variable.shape.rank
  if rank <= 1:
    return None
  if "depthwise_kernel" in variable.name:
    return tuple(range(rank - 2))
  if transposed:
    return tuple(range(rank - 2)) + (rank - 1,)
  return tuple(range(rank - 1))


def unitwise_norm(x, axes):
  """The Frobenius norm of each unit of `x`, broadcastable against `x`."""
  return tf.sqrt(tf.reduce_sum(tf.square(x), axis=axes, keepdims=True))


def clip_gradient(grad, param, clipping, eps, axes, min_grad_norm=1e-6):
  """Eq. (3) for one tensor: unit-wise clip of `grad` against `param`'s norms."""
  grad32 = tf.cast(grad, tf.float32)
  param32 = tf.cast(param, tf.float32)
  max_norm = tf.maximum(unitwise_norm(param32, axes), eps) * clipping
  grad_norm = unitwise_norm(grad32, axes)
  # One multiply a unit: max_norm / ||G_i|| where it is below 1, else exactly 1.
  factor = tf.minimum(max_norm / tf.maximum(grad_norm, min_grad_norm), 1.0)
  return tf.cast(grad32 * factor, grad.dtype)


class AdaptiveGradClip:
  """A gradient transform: `agc(grads, variables)` returns the clipped gradients.

  Args:
    clipping: lambda, the largest allowed ratio ||G_i|| / ||W_i||.
    eps: floor on parameter norms, so zero-initialised weights can still move.
    exclude: variables whose name contains any of these strings are not clipped.
  """

  def __init__(self, clipping=0.01, eps=1e-3, exclude=("logits",)):
    if clipping <= 0:
      raise ValueError(f"AGC clipping must be > 0, got {clipping}")
    self.clipping = clipping
    self.eps = eps
    self.exclude = tuple(exclude)
    self._transposed = set()

  def build(self, model):
    """Notes which kernels are transposed convolutions (their fan-in axes differ)."""
    transposed = (tf_keras.layers.Conv1DTranspose, tf_keras.layers.Conv2DTranspose,
                  tf_keras.layers.Conv3DTranspose)
    self._transposed = set()  # this model's alone: a rebuilt model starts afresh
    for layer in model.submodules:
      if isinstance(layer, transposed) and getattr(layer, "kernel", None) is not None:
        self._transposed.add(id(layer.kernel))
    return self

  def excluded(self, variable):
    return any(pattern in variable.name for pattern in self.exclude)

  def __call__(self, grads, variables):
    out = []
    for grad, var in zip(grads, variables):
      if grad is None or self.excluded(var):
        out.append(grad)
        continue
      axes = unit_axes(var, transposed=id(var) in self._transposed)
      out.append(clip_gradient(grad, var, self.clipping, self.eps, axes))
    return out
