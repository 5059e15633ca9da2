"""Post-hoc logit adjustment of a trained model (Menon et al. 2021, arXiv:2007.07314).

Eq. (9): predict argmax_y f_y(x) - tau * log(pi_y), pi the training split's class priors;
tau = 1 is the Bayes-optimal rule for the balanced error when f estimates log p(y|x)
(eq. 8), and the paper tunes tau on held-out data. `choose_tau` picks tau from a grid
by balanced accuracy (the mean per-class recall, the metric the adjustment targets) on
a VALIDATION split's logits; the test split is only ever adjusted with the chosen tau,
never used to choose it. Ties go to the smallest tau in the grid.
"""

import numpy as np
import tensorflow as tf
import tf_keras

from tricks import logit_adjustment

DEFAULT_TAUS = tuple(np.round(np.arange(0.0, 2.0001, 0.05), 2).tolist())


def adjust(logits, class_counts, tau):
  """f(x) - tau * log(pi): the post-hoc adjusted logits, float32 [batch, K]."""
  log_pi = logit_adjustment.log_priors(class_counts)
  logits = np.asarray(logits, dtype=np.float32)
  if logits.ndim != 2 or logits.shape[-1] != log_pi.size:
    raise ValueError(f"logits must be [examples, {log_pi.size}], got shape {logits.shape}")
  return logits - np.float32(tau) * log_pi


def balanced_accuracy(predictions, labels):
  """Mean over the classes present in `labels` of each class's recall."""
  predictions, labels = np.asarray(predictions), np.asarray(labels)
  classes = np.unique(labels)
  return float(np.mean([np.mean(predictions[labels == c] == c) for c in classes]))


def choose_tau(val_logits, val_labels, class_counts, taus=DEFAULT_TAUS):
  """The tau of `taus` whose adjusted validation predictions have the highest balanced
  accuracy (the smallest such tau on ties)."""
  taus = sorted(float(t) for t in taus)
  if not taus:
    raise ValueError("choose_tau needs at least one tau in the grid")
  labels = np.asarray(val_labels).reshape(-1)
  logits = np.asarray(val_logits, dtype=np.float32)
  if labels.size == 0 or logits.shape[0] != labels.size:
    raise ValueError(f"choose_tau needs validation logits and labels for the same "
                     f"examples (at least one), got {logits.shape[0]} and {labels.size}")
  scores = [balanced_accuracy(adjust(logits, class_counts, t).argmax(axis=-1), labels)
            for t in taus]
  return taus[int(np.argmax(scores))]


@tf_keras.utils.register_keras_serializable(package="tricks")
class PosthocAdjustment(tf_keras.layers.Layer):
  """Eq. (9) as a layer after a model's logits: f(x) - tau * log(pi) at inference
  (evaluation, export), f(x) itself in training, so a model trained with plain
  cross-entropy is scored, and served, post-hoc adjusted."""

  def __init__(self, class_counts, tau=1.0, **kwargs):
    super().__init__(**kwargs)
    if isinstance(tau, bool) or not isinstance(tau, (int, float)) or not tau >= 0:
      raise ValueError(f"post-hoc tau={tau!r} must be a number >= 0 (0 leaves the logits)")
    self.class_counts = [int(c) for c in class_counts]
    self.tau = float(tau)
    self._shift = tf.constant(self.tau * logit_adjustment.log_priors(self.class_counts))

  def call(self, logits, training=None):
    logits = tf.cast(logits, tf.float32)
    if training:
      return logits
    return logits - self._shift

  def get_config(self):
    return dict(super().get_config(), class_counts=self.class_counts, tau=self.tau)
