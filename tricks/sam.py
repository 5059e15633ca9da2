"""Sharpness-aware minimisation and its class-imbalanced variant: the perturbation.

SAM (Foret et al. 2021, arXiv:2010.01412, eq. 2 and Algorithm 1): with g the gradient
of the training loss at w, the step is taken from w along the gradient at the
perturbed weights,

    eps = rho g / ||g||_2,        w <- w - lr grad L(w + eps)

(one norm over every trained variable). ImbSAM (Zhou et al. 2023, "ImbSAM: A Closer
Look at Sharpness-Aware Minimization in Class-Imbalanced Recognition", ICCV,
arXiv:2308.07815; their code cool-xuan/Imbalanced_SAM, imbsam.py and
utils/trainval.py `forbackward`) perturbs for the tail classes' loss alone: classes
with fewer than `eta` training examples are the tail, the batch's loss is split into
L_head (its head examples' losses summed over the batch size) and L_tail, and

    eps = rho g_tail / ||g_tail||,   w <- w - lr (grad L_head(w) + grad L_tail(w + eps)).

Their PyTorch SGD applies weight decay inside the optimizer, so it is neither in g nor
perturbed: the training step adds Optimization.l2's gradient at w.

These objects say what to perturb; recipes/train_step.py runs the passes.
"""

import numpy as np
import tensorflow as tf

EPSILON = 1e-12  # in ||g|| + EPSILON: a zero gradient gives no perturbation


def _rho(name, rho):
  if isinstance(rho, bool) or not isinstance(rho, (int, float)) or not rho > 0:
    raise ValueError(f"{name}.rho={rho!r} must be a number > 0 (Foret et al. use 0.05)")
  return float(rho)


def perturbation(grads, rho):
  """rho g / ||g|| for the gradient list `grads` (one global norm)."""
  norm = tf.linalg.global_norm(grads)
  return [tf.cast(rho / (norm + EPSILON), g.dtype) * g for g in grads]


class SAM:
  """Foret et al.'s SAM: the whole loss perturbs (`Optimization.sam = @tricks.SAM()`)."""

  def __init__(self, rho=0.05):
    self.rho = _rho("SAM", rho)

  def build(self, class_counts):
    del class_counts
    return self

  def tail_mask(self, labels):  # pylint: disable=unused-argument
    """None: every example is perturbed for."""
    return None


class ImbSAM:
  """Zhou et al.'s ImbSAM: only the tail classes' loss (n_c < eta) perturbs."""

  def __init__(self, rho=0.05, eta=20):
    self.rho = _rho("ImbSAM", rho)
    if isinstance(eta, bool) or not isinstance(eta, (int, float)):
      raise ValueError(f"ImbSAM.eta={eta!r} must be a number (classes with fewer training "
                       "examples are the tail; their code's default is 20)")
    self.eta = eta
    self.tail = None

  def build(self, class_counts):
    """The tail classes: fewer than `eta` training examples."""
    self.tail = np.asarray(class_counts) < self.eta
    return self

  def tail_mask(self, labels):
    """1.0 for the examples of tail classes, else 0.0 (class-id labels only)."""
    if self.tail is None:
      raise ValueError("ImbSAM.build(class_counts) was not called")
    labels = tf.convert_to_tensor(labels)
    if labels.shape.rank == 2 and labels.shape[-1] != 1:
      raise ValueError("ImbSAM splits the batch by each example's class; soft targets "
                       "(MixUp / CutMix) mix classes: switch them off")
    ids = tf.reshape(tf.cast(labels, tf.int32), [-1])
    return tf.cast(tf.gather(tf.constant(self.tail), ids), tf.float32)
