"""The logit-adjusted loss (Menon et al. 2021, arXiv:2007.07314, eq. 10).

    loss(y, f(x)) = -log softmax(f(x) + tau * log(pi))_y,

pi the class priors of the training split. At test time the plain logits f(x) are
used: the adjustment lives in the loss only. tau = 0 is cross-entropy. With label
smoothing eps (Szegedy et al. 2016) the target is (1 - eps) * onehot(y) + eps / K.
Labels are class ids [batch] or soft targets [batch, K] (MixUp / CutMix); soft targets
t give -sum_k t_k log softmax(f(x) + tau * log(pi))_k.
"""

import numpy as np
import tensorflow as tf
import tf_keras


def log_priors(class_counts):
  """log(pi) from per-class training counts; every class must have an example."""
  counts = np.asarray(class_counts, dtype=np.float64)
  if counts.ndim != 1 or np.any(counts <= 0):
    raise ValueError(
        "the logit-adjusted loss needs a positive training count for every class, "
        f"got {counts.tolist()}")
  return np.log(counts / counts.sum()).astype(np.float32)


@tf_keras.utils.register_keras_serializable(package="tricks")
class LogitAdjustedLoss(tf_keras.losses.Loss):
  """Per-example softmax cross-entropy of `logits + tau * log(prior)`."""

  def __init__(self, class_counts, tau=1.0, label_smoothing=0.0, reduction="none",
               name="logit_adjusted_loss"):
    super().__init__(reduction=reduction, name=name)
    self.class_counts = [float(c) for c in class_counts]
    self.tau = tau
    self.label_smoothing = label_smoothing
    self._log_priors = tf.constant(log_priors(self.class_counts))

  def call(self, y_true, y_pred):
    logits = tf.cast(y_pred, tf.float32) + self.tau * self._log_priors
    num_classes = len(self.class_counts)
    y_true = tf.convert_to_tensor(y_true)
    if y_true.shape.rank == 2 and y_true.shape[-1] == num_classes:
      targets = tf.cast(y_true, tf.float32)
    else:
      labels = tf.cast(tf.reshape(y_true, [-1]), tf.int32)
      if not self.label_smoothing:
        return tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels,
                                                              logits=logits)
      targets = tf.one_hot(labels, num_classes)
    if self.label_smoothing:
      targets = targets * (1.0 - self.label_smoothing) + self.label_smoothing / num_classes
    return tf.nn.softmax_cross_entropy_with_logits(labels=targets, logits=logits)

  def get_config(self):
    return dict(super().get_config(), class_counts=self.class_counts, tau=self.tau,
                label_smoothing=self.label_smoothing)
