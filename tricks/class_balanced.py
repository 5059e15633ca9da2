"""Class-balanced weights by effective number (Cui et al. 2019, arXiv:1901.05555).

The effective number of n samples (Sec. 3, Proposition 1):

    E_n = (1 - beta^n) / (1 - beta),    beta in [0, 1),

and class j's weight is 1 / E_{n_j} = (1 - beta) / (1 - beta^{n_j}) (Sec. 4),
normalised so the weights sum to the number of classes K, as in the authors' code
(richardaecn/class-balanced-loss, src/cifar_main.py: `weights / np.sum(weights) *
num_classes`). beta = 0 gives uniform weights (E_n = 1); beta -> 1 gives E_n -> n, i.e.
inverse class frequency; beta = 1 is taken as that limit.

A loss applies the weight of the example's class, w_y, to the example (Cui et al.,
Sec. 4: softmax cross-entropy, sigmoid cross-entropy and focal loss; the
losses are in tricks/focal.py and tricks/ldam.py). Per-example losses weighted so and
averaged over the global batch are the authors' normalisation (their TF code divides the
weighted sum by the batch size); LDAM-DRW's PyTorch `F.cross_entropy(weight=...)` divides
by the batch's sum of weights instead, a per-batch scalar on the step (same direction).

`read_weights` lets those losses take weights that change during training (deferred
re-weighting, Cao et al. 2019): a constant, a `tf.Variable` (read at every step), or a
callable returning a [K] tensor (called at every trace, so it must read state, e.g. a
variable, to change after tracing).
"""

import numpy as np
import tensorflow as tf


def _counts(class_counts, what):
  counts = np.asarray(class_counts, dtype=np.float64)
  if counts.ndim != 1 or counts.size == 0 or np.any(counts <= 0):
    raise ValueError(f"{what} needs a positive training count for every class, got "
                     f"{np.asarray(class_counts).tolist()}")
  return counts


def _check_beta(beta):
  if isinstance(beta, bool) or not isinstance(beta, (int, float)) or not 0 <= beta <= 1:
    raise ValueError(f"beta={beta!r} must be a number in [0, 1] (0: uniform weights, "
                     "1: inverse class frequency)")


def effective_number(class_counts, beta):
  """E_n = (1 - beta^n) / (1 - beta) for each class's count n (float64 array)."""
  _check_beta(beta)
  n = _counts(class_counts, "the effective number")
  if beta == 1:
    return n
  if beta == 0:
    return np.ones_like(n)
  # 1 - beta^n without cancellation for beta near 1: -expm1(n log beta).
  return -np.expm1(n * np.log(beta)) / (1.0 - beta)


def weights(class_counts, beta):
  """Per-class weights 1 / E_{n_j}, normalised to sum to the number of classes."""
  inverse = 1.0 / effective_number(class_counts, beta)
  return (inverse / inverse.sum() * len(inverse)).astype(np.float32)


def read_weights(per_class, num_classes):
  """`per_class` (None, a [K] constant, a tf.Variable, or a callable returning one) as a
  float32 [K] tensor, or None."""
  if per_class is None:
    return None
  value = per_class() if callable(per_class) and not isinstance(per_class, tf.Variable) \
      else per_class
  value = tf.cast(tf.convert_to_tensor(value), tf.float32)
  if value.shape.rank != 1 or (value.shape[0] is not None and value.shape[0] != num_classes):
    raise ValueError(f"per-class weights must have shape [{num_classes}], got {value.shape}")
  return value


def weights_config(per_class):
  """`per_class` as a loss's get_config stores it: a list of floats (a variable's value
  now), or None for none or a callable (it is not serialisable: rebuild it)."""
  if isinstance(per_class, tf.Variable):
    per_class = per_class.numpy()
  if per_class is None or callable(per_class):
    return None
  return [float(v) for v in per_class]


def check_weights(per_class, num_classes):
  """Validates constant weights now (variables and callables are read when called)."""
  if per_class is None or callable(per_class) or isinstance(per_class, tf.Variable):
    if isinstance(per_class, tf.Variable) and per_class.shape != [num_classes]:
      raise ValueError(f"per-class weights must have shape [{num_classes}], got "
                       f"{per_class.shape}")
    return
  value = np.asarray(per_class, dtype=np.float64)
  if value.shape != (num_classes,) or not np.all(np.isfinite(value)) or np.any(value < 0):
    raise ValueError(f"per-class weights must be {num_classes} finite numbers >= 0, got "
                     f"{np.asarray(per_class).tolist()}")


def as_targets(y_true, num_classes):
  """Class ids [batch] (or [batch, 1]) as one-hot, or soft targets [batch, K], float32."""
  y_true = tf.convert_to_tensor(y_true)
  if y_true.shape.rank == 2 and y_true.shape[-1] == num_classes:
    return tf.cast(y_true, tf.float32)
  labels = tf.cast(tf.reshape(y_true, [-1]), tf.int32)
  return tf.one_hot(labels, num_classes, dtype=tf.float32)
