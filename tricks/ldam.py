"""LDAM loss and the normalised linear classifier (Cao et al. 2019, arXiv:1906.07413).

Label-distribution-aware margins (eq. 13): class j's margin is

    Delta_j = C / n_j^(1/4),

C chosen so that the largest margin (the rarest class's) is `max_m` (0.5 in the paper's
experiments). The margin is subtracted from the true class's logit only, the logits are
scaled by s (30), then softmax cross-entropy:

    L((x, y); f) = -log( e^{s (z_y - Delta_y)} / (e^{s (z_y - Delta_y)} + sum_{j != y} e^{s z_j}) ),

optionally weighted by the true class's weight w_y (`weights`: the re-weighting of
LDAM-DRW; a tf.Variable or callable lets DRW switch it on later, see
tricks/class_balanced.py). This is the authors' `LDAMLoss` (kaidic/LDAM-DRW, losses.py:
`m_list = 1 / n^(1/4)`, scaled to `max_m`; `x - m` at the target only; `s * output`
into `F.cross_entropy(weight=...)`). Their weighted mean divides by the batch's sum of
weights; here the per-example losses w_y L are averaged over the batch by the trainer
(the normalisation Cui et al. use), a per-batch scalar apart.

Soft targets t [batch, K] (MixUp / CutMix): the expected loss sum_k t_k w_k L((x, k); f),
each class k's loss with its own margin on its own logit (MixUp's definition,
lambda L(y_a) + (1 - lambda) L(y_b); the paper defines hard labels only). It is
computed in [batch, K] without a [batch, K, K] tensor: for label k the denominator is
sum_{j != k} e^{s z_j} + e^{s (z_k - Delta_k)}, the first sum taken against the row's
largest logit so that it does not cancel.

`NormedLinear` is the classifier their code trains LDAM with (models/resnet_cifar.py,
`use_norm=True`): cosines between L2-normalised features and L2-normalised weight
columns, no bias (F.normalize: x / max(||x||, 1e-12)); its kernel starts with unit-norm
columns drawn from U(-1, 1) (`uniform_(-1, 1).renorm_(2, 1, 1e-5).mul_(1e5)`). The loss
scales its cosines by s; the model's outputs (for accuracy, evaluation) are the cosines.
"""

import numpy as np
import tensorflow as tf
import tf_keras

from tricks import class_balanced


def margins(class_counts, max_m=0.5):
  """Delta_j proportional to n_j^(-1/4), the largest equal to `max_m` (float32 [K])."""
  counts = np.asarray(class_counts, dtype=np.float64)
  if counts.ndim != 1 or counts.size == 0 or np.any(counts <= 0):
    raise ValueError("LDAM needs a positive training count for every class, got "
                     f"{np.asarray(class_counts).tolist()}")
  if isinstance(max_m, bool) or not isinstance(max_m, (int, float)) or not max_m > 0:
    raise ValueError(f"max_m={max_m!r} must be a number > 0 (the rarest class's margin)")
  m = counts ** -0.25
  return (m * (max_m / m.max())).astype(np.float32)


@tf_keras.utils.register_keras_serializable(package="tricks")
class LDAMLoss(tf_keras.losses.Loss):
  """Per-example LDAM loss on logits (cosines from `NormedLinear` in the paper's code)."""

  def __init__(self, class_counts, max_m=0.5, s=30.0, weights=None, reduction="none",
               name="ldam_loss"):
    super().__init__(reduction=reduction, name=name)
    self.class_counts = [float(c) for c in class_counts]
    self.max_m = max_m
    if isinstance(s, bool) or not isinstance(s, (int, float)) or not s > 0:
      raise ValueError(f"s={s!r} must be a number > 0 (the logit scale)")
    self.s = float(s)
    self.num_classes = len(self.class_counts)
    class_balanced.check_weights(weights, self.num_classes)
    self.weights = weights
    self._margins = tf.constant(margins(self.class_counts, max_m))

  def call(self, y_true, y_pred):
    z = tf.cast(y_pred, tf.float32)
    w = class_balanced.read_weights(self.weights, self.num_classes)
    y_true = tf.convert_to_tensor(y_true)
    if y_true.shape.rank == 2 and y_true.shape[-1] == self.num_classes:
      targets = tf.cast(y_true, tf.float32)
      per_class = self._per_class_losses(z)
      return tf.reduce_sum((targets if w is None else targets * w) * per_class, axis=-1)
    labels = tf.cast(tf.reshape(y_true, [-1]), tf.int32)
    margin = tf.one_hot(labels, self.num_classes) * self._margins
    loss = tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=labels, logits=self.s * (z - margin))
    return loss if w is None else loss * tf.gather(w, labels)

  def _per_class_losses(self, z):
    """[batch, K]: L((x, k); f) for every label k."""
    x = self.s * z
    x = x - tf.stop_gradient(tf.reduce_max(x, axis=-1, keepdims=True))  # max 0, at a
    top = tf.one_hot(tf.argmax(x, axis=-1), self.num_classes)
    rest = tf.reduce_sum(tf.exp(x) * (1.0 - top), axis=-1, keepdims=True)  # j != a
    # sum_{j != k} e^{x_j} = rest + e^{x_a} - e^{x_k} = rest - expm1(x_k) (e^{x_a} = 1).
    others = rest - tf.math.expm1(x)
    shifted = x - self.s * self._margins  # s (z_k - Delta_k), shifted
    # -log(e^shifted / (others + e^shifted)) = softplus(log(others) - shifted)
    return tf.nn.softplus(tf.math.log(tf.maximum(others, 1e-37)) - shifted)

  def get_config(self):
    return dict(super().get_config(), class_counts=self.class_counts, max_m=self.max_m,
                s=self.s, weights=class_balanced.weights_config(self.weights))


@tf_keras.utils.register_keras_serializable(package="tricks")
class UnitColumns(tf_keras.initializers.Initializer):
  """U(-1, 1) with every column (axis 0) rescaled to unit L2 norm."""

  def __init__(self, seed=None):
    self.seed = seed

  def __call__(self, shape, dtype=None, **kwargs):
    dtype = tf.as_dtype(dtype or tf.float32)
    w = tf_keras.initializers.RandomUniform(-1.0, 1.0, seed=self.seed)(shape, tf.float32)
    return tf.cast(w / tf.norm(w, axis=0, keepdims=True), dtype)

  def get_config(self):
    return {"seed": self.seed}


def _normalize(x, axis):
  """F.normalize: x / max(||x||_2, 1e-12)."""
  return x / tf.maximum(tf.norm(x, axis=axis, keepdims=True), 1e-12)


@tf_keras.utils.register_keras_serializable(package="tricks")
class NormedLinear(tf_keras.layers.Layer):
  """Cosine classifier: normalize(x) @ normalize(W, axis=0); no bias."""

  def __init__(self, units, kernel_initializer=None, **kwargs):
    super().__init__(**kwargs)
    if isinstance(units, bool) or not isinstance(units, int) or units < 1:
      raise ValueError(f"units={units!r} must be a positive integer")
    self.units = units
    self.kernel_initializer = tf_keras.initializers.get(kernel_initializer or UnitColumns())

  def build(self, input_shape):
    self.kernel = self.add_weight("kernel", shape=[int(input_shape[-1]), self.units],
                                  initializer=self.kernel_initializer, trainable=True)
    super().build(input_shape)

  def call(self, inputs):
    kernel = tf.cast(self.kernel, inputs.dtype)
    return tf.matmul(_normalize(inputs, -1), _normalize(kernel, 0))

  def compute_output_shape(self, input_shape):
    return tf.TensorShape(input_shape)[:-1].concatenate([self.units])

  def get_config(self):
    return dict(super().get_config(), units=self.units,
                kernel_initializer=tf_keras.initializers.serialize(self.kernel_initializer))
