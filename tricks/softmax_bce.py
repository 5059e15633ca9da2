"""Binary cross-entropy on softmax probabilities: the "softmax" class-balanced loss of
the PyTorch port Weight Balancing trains its second stage with.

Alshammari et al. 2022 (ShadeAlsha/LTR-weight-balancing, utils/class_balanced_loss.py
`CB_loss(..., "softmax", beta=0.9999, ...)`, from vandit15/Class-balanced-loss-pytorch)
computes, for p = softmax(z), one-hot t and the class-balanced weight w_y of the
example's class (Cui et al. 2019),

    F.binary_cross_entropy(p, t, weight=w_y) = mean over batch and classes of
        -w_y [t_k log p_k + (1 - t_k) log(1 - p_k)],

PyTorch clamping each log at -100. Per example that is w_y / K sum_k BCE(p_k, t_k); the
trainer's mean over the batch gives their mean. It is not Cui et al.'s softmax
cross-entropy (their TF code): the classes other than y are pushed to 0 through
log(1 - p_k) too. Soft targets t weigh the example by sum_k t_k w_k.
"""

import tensorflow as tf
import tf_keras

LOG_FLOOR = -100.0  # PyTorch's binary_cross_entropy clamps log(p), log(1 - p) here


def _as_targets(y_true, num_classes):
  y_true = tf.convert_to_tensor(y_true)
  if y_true.shape.rank == 2 and y_true.shape[-1] == num_classes:
    return tf.cast(y_true, tf.float32)
  return tf.one_hot(tf.cast(tf.reshape(y_true, [-1]), tf.int32), num_classes)


@tf_keras.utils.register_keras_serializable(package="tricks")
class SoftmaxBCELoss(tf_keras.losses.Loss):
  """Per-example w_y mean_k BCE(softmax(z)_k, t_k); `weights` [K] (a list, a tf.Variable
  read each step, or None: unit weights)."""

  def __init__(self, num_classes, weights=None, reduction="none", name="softmax_bce"):
    super().__init__(reduction=reduction, name=name)
    self.num_classes = num_classes
    self.weights = weights

  def call(self, y_true, y_pred):
    targets = _as_targets(y_true, self.num_classes)
    p = tf.nn.softmax(tf.cast(y_pred, tf.float32), axis=-1)
    log_p = tf.maximum(tf.math.log(p), LOG_FLOOR)
    log_q = tf.maximum(tf.math.log(1.0 - p), LOG_FLOOR)
    bce = -tf.reduce_mean(targets * log_p + (1.0 - targets) * log_q, axis=-1)
    if self.weights is None:
      return bce
    w = tf.cast(tf.convert_to_tensor(self.weights), tf.float32)
    return tf.linalg.matvec(targets, w) * bce
