"""MaxNorm on the classifier's per-class weights, by projected gradient descent.

Alshammari et al. 2022, "Long-Tailed Recognition via Weight Balancing" (CVPR,
arXiv:2203.14197), Sec. 3: after an update each class's weight vector is projected onto
the ball ||w_c||_2 <= thresh,

    w_c <- w_c * min(1, thresh / ||w_c||_2),

as their `MaxNorm_via_PGD` (ShadeAlsha/LTR-weight-balancing, utils/regularizers.py, tau
= 1) does. Their `thresh` is relative: the radius is min_c ||w_c|| + thresh (max_c ||w_c||
- min_c ||w_c||) of the classifier when the constraint is set up (`setPerLayerThresh`,
called on stage 1's classifier before stage 2); the bias is not constrained (its
threshold is infinite). `relative=False` takes `thresh` as the radius itself.

Their `train_model` (utils/trainval.py) projects once an epoch, after the epoch's
last step (`pgdFunc.PGD(model)` after the batch loop): `every="epoch"`; `every="step"`
projects after every optimizer update (projected gradient descent step by step).

The kernel is Keras's Dense layout [features, classes]: class c's vector is column c.
"""

import numpy as np
import tensorflow as tf


def project(kernel, radius):
  """Each column w_c of `kernel` [features, classes] scaled by min(1, radius / ||w_c||)."""
  norms = tf.norm(kernel, axis=0, keepdims=True)
  scale = tf.where(norms > radius, radius / tf.maximum(norms, 1e-30), tf.ones_like(norms))
  return kernel * tf.cast(scale, kernel.dtype)


class MaxNorm:
  """The per-class MaxNorm constraint on layer `layer`'s kernel, applied by the training
  step after every optimizer update, or after each epoch's last one
  (`Optimization.weight_constraints`)."""

  def __init__(self, thresh=0.1, relative=True, layer="logits", every="step"):
    if isinstance(thresh, bool) or not isinstance(thresh, (int, float)) or thresh < 0:
      raise ValueError(f"MaxNorm.thresh={thresh!r} must be a number >= 0 (Alshammari et "
                       "al.'s CIFAR-100-LT stage 2 uses 0.1, relative)")
    if every not in ("step", "epoch"):
      raise ValueError(f"MaxNorm.every={every!r}; use 'step' or 'epoch' (their code)")
    self.thresh = float(thresh)
    self.every = every
    self.relative = relative
    self.layer = layer
    self.variable = None
    self.radius = None

  def build(self, model):
    """Finds the kernel and sets the radius from its current per-class norms."""
    try:
      self.variable = model.get_layer(self.layer).kernel
    except (ValueError, AttributeError):
      raise ValueError(f"MaxNorm: model {model.name!r} has no Dense layer "
                       f"{self.layer!r}") from None
    norms = np.linalg.norm(self.variable.numpy().astype(np.float64), axis=0)
    self.radius = (norms.min() + self.thresh * (norms.max() - norms.min())
                   if self.relative else self.thresh)
    return self

  def project(self, kernel):
    return project(kernel, tf.constant(self.radius, kernel.dtype))
