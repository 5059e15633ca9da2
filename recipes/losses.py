"""Loss builders for the trainer: each takes the training split's class counts.

The trainer calls `loss(class_counts=...)` and expects per-example losses, so a
recipe switches between them with one Gin binding (`Task.loss`).
"""

import gin
import tensorflow as tf
import tf_keras

from tricks import logit_adjustment


@gin.configurable
def cross_entropy(class_counts, label_smoothing=0.0):
  """Softmax cross-entropy on logits, optionally label-smoothed (Szegedy et al. 2016).

  Labels are class ids, or soft targets [batch, classes] (MixUp / CutMix).
  """
  if isinstance(label_smoothing, bool) or not 0 <= label_smoothing < 1:
    raise ValueError(f"cross_entropy.label_smoothing={label_smoothing!r} must be in [0, 1)")
  sparse = tf_keras.losses.SparseCategoricalCrossentropy(
      from_logits=True, reduction=tf_keras.losses.Reduction.NONE)
  dense = tf_keras.losses.CategoricalCrossentropy(
      from_logits=True, label_smoothing=label_smoothing,
      reduction=tf_keras.losses.Reduction.NONE)
  num_classes = len(class_counts)

  def loss(labels, logits):
    labels = tf.convert_to_tensor(labels)
    if labels.shape.rank == 2 and labels.shape[-1] == num_classes:
      return dense(labels, logits)
    if not label_smoothing:
      return sparse(labels, logits)
    return dense(tf.one_hot(tf.reshape(tf.cast(labels, tf.int32), [-1]), num_classes),
                 logits)
  return loss


@gin.configurable
def logit_adjusted(class_counts, tau=1.0, label_smoothing=0.0):
  """Menon et al.'s logit-adjusted loss with priors from `class_counts`."""
  if isinstance(tau, bool) or not isinstance(tau, (int, float)) or not tau >= 0:
    raise ValueError(f"logit_adjusted.tau={tau!r} must be a number >= 0 (0 is plain "
                     "cross-entropy); check TAU")
  return logit_adjustment.LogitAdjustedLoss(class_counts, tau=tau,
                                            label_smoothing=label_smoothing)
