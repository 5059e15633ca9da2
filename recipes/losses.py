"""Loss builders for the trainer: each takes the training split's class counts.

The trainer calls `loss(class_counts=...)` and expects per-example losses, so a
recipe switches between them with one Gin binding (`train_and_evaluate.loss`).
"""

import gin
import tensorflow as tf
import tf_keras

from tricks import logit_adjustment


@gin.configurable
def cross_entropy(class_counts, label_smoothing=0.0):
  """Softmax cross-entropy on logits, optionally label-smoothed (Szegedy et al. 2016)."""
  if not label_smoothing:
    return tf_keras.losses.SparseCategoricalCrossentropy(
        from_logits=True, reduction=tf_keras.losses.Reduction.NONE)
  smoothed = tf_keras.losses.CategoricalCrossentropy(
      from_logits=True, label_smoothing=label_smoothing,
      reduction=tf_keras.losses.Reduction.NONE)
  num_classes = len(class_counts)
  return lambda labels, logits: smoothed(
      tf.one_hot(tf.reshape(tf.cast(labels, tf.int32), [-1]), num_classes), logits)


@gin.configurable
def logit_adjusted(class_counts, tau=1.0, label_smoothing=0.0):
  """Menon et al.'s logit-adjusted loss with priors from `class_counts`."""
  return logit_adjustment.LogitAdjustedLoss(class_counts, tau=tau,
                                            label_smoothing=label_smoothing)
