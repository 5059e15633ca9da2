"""Loss builders for the trainer: each takes the training split's class counts.

The trainer calls `loss(class_counts=...)` and expects per-example losses, so a
recipe switches between them with one Gin binding (`Task.loss`): `cross_entropy`,
`logit_adjusted` (Menon et al. 2021), `balanced_softmax` (Ren et al. 2020: the
logit-adjusted loss at tau = 1), `focal` (Lin et al. 2017; sigmoid as Cui et al. 2019
use it, or softmax), `ldam` (Cao et al. 2019; with `Task.model_transforms =
[@normed_head]`), and `class_balanced` (Cui et al. 2019's effective-number weights on
softmax or sigmoid cross-entropy, focal or LDAM).
"""

import gin
import tensorflow as tf
import tf_keras

from recipes import hooks
from tricks import class_balanced as class_balanced_lib
from tricks import deferred_reweighting
from tricks import focal as focal_lib
from tricks import ldam as ldam_lib
from tricks import logit_adjustment
from tricks import softmax_bce


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
                     "cross-entropy); check LOGIT_ADJUST_TAU")
  return logit_adjustment.LogitAdjustedLoss(class_counts, tau=tau,
                                            label_smoothing=label_smoothing)


@gin.configurable
def balanced_softmax(class_counts):
  """Ren et al. 2020's Balanced Softmax, -log(n_y e^{z_y} / sum_j n_j e^{z_j}): the same
  loss as `logit_adjusted` at tau = 1 (log n_j = log pi_j + log N), one implementation."""
  return logit_adjustment.LogitAdjustedLoss(class_counts, tau=1.0, name="balanced_softmax")


def _number(value, lowest, strict=False):
  return (not isinstance(value, bool) and isinstance(value, (int, float))
          and (value > lowest if strict else value >= lowest))


def _weights(binding, weights, num_classes):
  try:
    class_balanced_lib.check_weights(weights, num_classes)
  except ValueError as e:
    raise ValueError(f"{binding}={weights!r}: {e}; bind one weight a class, or leave it "
                     "unbound and use class_balanced") from None
  return weights


FOCAL_KINDS = ("sigmoid", "softmax")


@gin.configurable
def focal(class_counts, gamma=2.0, kind="sigmoid", alpha=None, weights=None):
  """Lin et al.'s focal loss: "sigmoid" (a sigmoid a class, summed: Cui et al.'s focal
  loss) or "softmax"; `alpha` is Lin et al.'s alpha (sigmoid only); `weights` per-class
  weights (a list, a tf.Variable or a callable; class_balanced sets them)."""
  num_classes = len(class_counts)
  if not _number(gamma, 0):
    raise ValueError(f"focal.gamma={gamma!r} must be a number >= 0 (0 is cross-entropy; "
                     "Lin et al. use 2)")
  if kind not in FOCAL_KINDS:
    raise ValueError(f"focal.kind={kind!r} must be one of {FOCAL_KINDS} ('sigmoid' is "
                     "Cui et al.'s focal loss)")
  if alpha is not None and (kind != "sigmoid" or not _number(alpha, 0) or alpha > 1):
    raise ValueError(f"focal.alpha={alpha!r} must be None or a number in [0, 1], with "
                     "focal.kind='sigmoid'; weight softmax classes with class_balanced")
  _weights("focal.weights", weights, num_classes)
  if kind == "sigmoid":
    return focal_lib.SigmoidFocalLoss(num_classes, gamma=gamma, alpha=alpha, weights=weights)
  return focal_lib.SoftmaxFocalLoss(num_classes, gamma=gamma, weights=weights)


@gin.configurable
def ldam(class_counts, max_m=0.5, s=30.0, weights=None):
  """Cao et al.'s LDAM loss: margins proportional to n_j^(-1/4), the largest `max_m`, on
  logits scaled by `s`; train it with `Task.model_transforms = [@normed_head]`."""
  if not _number(max_m, 0, strict=True):
    raise ValueError(f"ldam.max_m={max_m!r} must be a number > 0 (the rarest class's "
                     "margin; Cao et al. use 0.5)")
  if not _number(s, 0, strict=True):
    raise ValueError(f"ldam.s={s!r} must be a number > 0 (the logit scale; Cao et al. "
                     "use 30)")
  _weights("ldam.weights", weights, len(class_counts))
  return ldam_lib.LDAMLoss(class_counts, max_m=max_m, s=s, weights=weights)


BALANCED_LOSSES = ("softmax", "sigmoid", "focal", "ldam", "softmax_bce")
NORMALIZATIONS = ("batch", "weights")


class DeferredLoss:
  """A class-weighted loss whose weights are deferred (DRW, Cao et al. 2019): the
  trainer tells it each epoch (hooks.EpochAware) and the weights' variable follows."""

  def __init__(self, loss, deferred):
    self.loss = loss
    self.deferred = deferred

  def set_epoch(self, epoch):
    self.deferred.set_epoch(epoch)

  def __call__(self, labels, logits):
    return self.loss(labels, logits)


class WeightedMean:
  """A weighted per-example loss rescaled so that the trainer's mean over the global
  batch is PyTorch's weighted mean, sum_i w_yi L_i / sum_i w_yi
  (`F.cross_entropy(weight=w)`, which Cao et al.'s LDAM-DRW code trains with), not
  sum_i w_yi L_i / B. The weights' sum is all-reduced over the replicas, so the
  normaliser is the global batch's."""

  def __init__(self, loss, weights):
    self.loss = loss
    self.class_weights = weights

  def set_epoch(self, epoch):
    """Passed on to the wrapped loss when it is epoch-aware (hooks.EpochAware)."""
    if isinstance(self.loss, hooks.EpochAware):
      self.loss.set_epoch(epoch)

  def __call__(self, labels, logits):
    per_example = tf.cast(self.loss(labels, logits), tf.float32)
    num_classes = logits.shape[-1]
    w = class_balanced_lib.read_weights(self.class_weights, num_classes)
    # Soft targets (MixUp / CutMix) weigh an example by its label mixture.
    example_w = tf.linalg.matvec(class_balanced_lib.as_targets(labels, num_classes), w)
    local = tf.stack([tf.reduce_sum(example_w), tf.cast(tf.size(example_w), tf.float32)])
    total_w, total_n = tf.unstack(tf.distribute.get_replica_context().all_reduce(
        tf.distribute.ReduceOp.SUM, local))
    return per_example * total_n / tf.maximum(total_w, 1e-12)


@gin.configurable
def class_balanced(class_counts, beta=0.9999, loss="softmax", start_epoch=0,
                   normalize="batch"):
  """Cui et al.'s class-balanced loss: the example of class y weighted by
  (1 - beta) / (1 - beta^{n_y}) (normalised to sum to the class count) in `loss`:
  "softmax" or "sigmoid" cross-entropy, or the `focal` or `ldam` builder with their
  own bindings (focal.gamma, focal.kind, ldam.max_m, ...), or "softmax_bce": binary
  cross-entropy on softmax probabilities, the PyTorch port's "softmax" that Weight
  Balancing's stage 2 trains with (tricks/softmax_bce.py).

  `start_epoch` > 0 defers the weights (DRW, Cao et al. 2019): unit weights before
  that epoch (0-based), the class-balanced ones from it on; LDAM-DRW is
  `loss = 'ldam'`, `beta = 0.9999`, `start_epoch = 160` of 200.

  `normalize`: "batch" averages the weighted losses over the batch (Cui et al.'s
  code); "weights" divides by the batch's sum of weights instead (`WeightedMean`:
  PyTorch's weighted mean, as Cao et al.'s code). At beta = 0.9999 on CIFAR-10-LT
  (rho = 100) the mean training weight is 0.17: "weights" steps about 6x larger."""
  if not _number(beta, 0) or beta > 1:
    raise ValueError(f"class_balanced.beta={beta!r} must be a number in [0, 1] (0: no "
                     "weights, 1: inverse frequency; Cui et al. use 0.9 to 0.9999)")
  if loss not in BALANCED_LOSSES:
    raise ValueError(f"class_balanced.loss={loss!r} must be one of {BALANCED_LOSSES}")
  if normalize not in NORMALIZATIONS:
    raise ValueError(f"class_balanced.normalize={normalize!r} must be one of "
                     f"{NORMALIZATIONS}")
  try:
    weights = class_balanced_lib.weights(class_counts, beta)
  except ValueError as e:
    raise ValueError(f"class_balanced: {e}; every class needs a training example") from None
  if isinstance(start_epoch, bool) or not isinstance(start_epoch, int) or start_epoch < 0:
    raise ValueError(f"class_balanced.start_epoch={start_epoch!r} must be a whole number "
                     ">= 0 (0: weighted from the start; DRW: Cao et al. use 160 of 200)")
  deferred = None
  if start_epoch:
    deferred = deferred_reweighting.DeferredWeights(weights, start_epoch)
    weights = deferred.variable
  num_classes = len(class_counts)
  if loss == "softmax":
    built = focal_lib.SoftmaxFocalLoss(num_classes, gamma=0.0, weights=weights)
  elif loss == "sigmoid":
    built = focal_lib.SigmoidFocalLoss(num_classes, gamma=0.0, weights=weights)
  elif loss == "focal":
    built = focal(class_counts, weights=weights)
  elif loss == "softmax_bce":
    built = softmax_bce.SoftmaxBCELoss(num_classes, weights=weights)
  else:
    built = ldam(class_counts, weights=weights)
  if deferred is not None:
    built = DeferredLoss(built, deferred)
  return WeightedMean(built, weights) if normalize == "weights" else built
