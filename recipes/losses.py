"""Loss builders for the trainer: each takes the training split's class counts.

The trainer calls `loss(class_counts=...)` and expects per-example losses, so a
recipe switches between them with one Gin binding (`train_and_evaluate.loss`).
"""

import gin
import tf_keras

from tricks import logit_adjustment


@gin.configurable
def cross_entropy(class_counts=None):
  """Plain softmax cross-entropy on logits (the counts are not used)."""
  del class_counts
  return tf_keras.losses.SparseCategoricalCrossentropy(
      from_logits=True, reduction=tf_keras.losses.Reduction.NONE)


@gin.configurable
def logit_adjusted(class_counts, tau=1.0):
  """Menon et al.'s logit-adjusted loss with priors from `class_counts`."""
  return logit_adjustment.LogitAdjustedLoss(class_counts, tau=tau)
