"""Focal loss (Lin et al. 2017, arXiv:1708.02002, eq. 5), sigmoid and softmax.

    FL(p_t) = -alpha_t (1 - p_t)^gamma log(p_t).

`SigmoidFocalLoss` is the focal loss as Cui et al. 2019 (arXiv:1901.05555, Sec. 4, the
class-balanced focal loss; their code richardaecn/class-balanced-loss, src/cifar_main.py
`focal_loss`, and its PyTorch port vandit15/Class-balanced-loss-pytorch) use it for
classification: one sigmoid per
class over one-hot targets, p_t = sigmoid(z_j) for the true class and 1 - sigmoid(z_j)
for the others, summed over the K classes, the example weighted by its class's weight
w_y (the class-balanced term; `weights`). Their modulator is written stably as
exp(-gamma y z - gamma log(1 + exp(-z))); here as exp(-gamma softplus(+-z)), the same
value without overflow. Their loss is the weighted sum over the batch divided by the
number of positive labels (the batch size): the mean over the batch of these
per-example losses. Lin et al.'s alpha (alpha for the true class's term, 1 - alpha for
the others) is `alpha`; Cui et al. do not use it (None). With gamma = 0 it is sigmoid
cross-entropy (Cui et al.'s "sigmoid" loss). Cui et al. also initialise the classifier's
bias to -log(K - 1) for sigmoid losses (src/model_base.py); recipes do that with the
`sigmoid_prior_bias` model transform (recipes/methods/long_tail_heads.py).

`SoftmaxFocalLoss` is eq. 5 with p_t the softmax probability of the true class and
alpha_t = w_y, as LDAM-DRW's code uses focal loss (kaidic/LDAM-DRW, losses.py
`FocalLoss`, gamma = 1 there). One difference: that code passes the weighted
cross-entropy w_y * CE to the modulator (p = exp(-w_y CE)); here the modulator uses the
true p_t, as in eq. 5 (they agree without weights). With gamma = 0 it is softmax
cross-entropy weighted by w_y (with Cui et al.'s weights, their class-balanced softmax
cross-entropy).

Labels are class ids [batch] or soft targets t [batch, K] (MixUp / CutMix, summing to
1); soft targets give the expected loss sum_k t_k w_k L(z, k), L(z, k) the loss for
label k (MixUp's own definition of the loss of a mixed example, linear in t).
"""

import tensorflow as tf
import tf_keras

from tricks import class_balanced


def _check(num_classes, gamma, per_class):
  if isinstance(num_classes, bool) or not isinstance(num_classes, int) or num_classes < 1:
    raise ValueError(f"num_classes={num_classes!r} must be a positive integer")
  if isinstance(gamma, bool) or not isinstance(gamma, (int, float)) or not gamma >= 0:
    raise ValueError(f"gamma={gamma!r} must be a number >= 0 (0: no focusing)")
  class_balanced.check_weights(per_class, num_classes)


class _WeightedLoss(tf_keras.losses.Loss):
  """Per-example sum_k t_k w_k L(z, k) from a [batch, K] matrix of L(z, k)."""

  def __init__(self, num_classes, gamma, weights, reduction, name):
    super().__init__(reduction=reduction, name=name)
    _check(num_classes, gamma, weights)
    self.num_classes = num_classes
    self.gamma = float(gamma)
    self.weights = weights

  def _targets_and_weights(self, y_true):
    targets = class_balanced.as_targets(y_true, self.num_classes)
    w = class_balanced.read_weights(self.weights, self.num_classes)
    return targets if w is None else targets * w

  def get_config(self):
    return dict(super().get_config(), num_classes=self.num_classes, gamma=self.gamma,
                weights=class_balanced.weights_config(self.weights))


@tf_keras.utils.register_keras_serializable(package="tricks")
class SigmoidFocalLoss(_WeightedLoss):
  """Per-example sigmoid focal loss summed over classes (Cui et al.'s CB focal loss)."""

  def __init__(self, num_classes, gamma=2.0, alpha=None, weights=None, reduction="none",
               name="sigmoid_focal_loss"):
    super().__init__(num_classes, gamma, weights, reduction, name)
    if alpha is not None and (isinstance(alpha, bool) or not isinstance(alpha, (int, float))
                              or not 0 <= alpha <= 1):
      raise ValueError(f"alpha={alpha!r} must be None or a number in [0, 1]")
    self.alpha = alpha

  def call(self, y_true, y_pred):
    z = tf.cast(y_pred, tf.float32)
    tw = self._targets_and_weights(y_true)
    minus_log_p = tf.nn.softplus(-z)       # -log sigmoid(z): the true class's term
    minus_log_not_p = tf.nn.softplus(z)    # -log(1 - sigmoid(z)): the others' term
    positive, negative = minus_log_p, minus_log_not_p
    if self.gamma:
      positive = tf.exp(-self.gamma * minus_log_not_p) * positive  # (1 - p)^gamma
      negative = tf.exp(-self.gamma * minus_log_p) * negative      # p^gamma
    if self.alpha is not None:
      positive, negative = self.alpha * positive, (1.0 - self.alpha) * negative
    # sum_k t_k w_k [positive_k + sum_{j != k} negative_j]
    return (tf.reduce_sum(tw * (positive - negative), axis=-1)
            + tf.reduce_sum(tw, axis=-1) * tf.reduce_sum(negative, axis=-1))

  def get_config(self):
    return dict(super().get_config(), alpha=self.alpha)


@tf_keras.utils.register_keras_serializable(package="tricks")
class SoftmaxFocalLoss(_WeightedLoss):
  """Per-example softmax focal loss; gamma = 0 is (weighted) softmax cross-entropy."""

  def __init__(self, num_classes, gamma=2.0, weights=None, reduction="none",
               name="softmax_focal_loss"):
    super().__init__(num_classes, gamma, weights, reduction, name)

  def call(self, y_true, y_pred):
    tw = self._targets_and_weights(y_true)
    log_p = tf.nn.log_softmax(tf.cast(y_pred, tf.float32), axis=-1)
    per_class = -log_p
    if self.gamma:
      # (1 - p)^gamma, 1 - p as -expm1(log p); floored so that gamma < 1 keeps a finite
      # gradient where p rounds to 1.
      one_minus_p = tf.maximum(-tf.math.expm1(log_p), 1e-30)
      per_class = tf.pow(one_minus_p, self.gamma) * per_class
    return tf.reduce_sum(tw * per_class, axis=-1)
