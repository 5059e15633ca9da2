"""The declared hooks (recipes/hooks.py) against what takes part in them: the tricks
that implement a hook are instances of its Protocol, plain callables are not, a
wrapping loss passes the epoch on to the loss it wraps, and only a model transform
declared CountsAware is given the class counts, through Gin's wrappers too."""

import types

import gin
import numpy as np
import tensorflow as tf

from recipes import build
from recipes import hooks
from recipes.methods import long_tail_heads
from recipes.methods import losses
from tricks import agc
from tricks import max_norm
from zoo import resnet_cifar


@gin.configurable
def hooks_test_holder(value):
  return value


class HooksTest(tf.test.TestCase):

  def test_the_tricks_are_instances_of_their_hooks(self):
    self.assertIsInstance(agc.AdaptiveGradClip(), hooks.BuiltOnModel)
    self.assertIsInstance(max_norm.MaxNorm(), hooks.WeightConstraint)
    self.assertIsInstance(max_norm.MaxNorm(), hooks.BuiltOnModel)
    drw = losses.class_balanced(class_counts=[50, 5], start_epoch=2)
    self.assertIsInstance(drw, hooks.EpochAware)
    for plain in (losses.cross_entropy(class_counts=[50, 5]), lambda grads, variables: grads,
                  losses.class_balanced(class_counts=[50, 5])):
      self.assertNotIsInstance(plain, hooks.EpochAware)
      self.assertNotIsInstance(plain, hooks.WeightConstraint)
    self.assertNotIsInstance(agc.AdaptiveGradClip(), hooks.WeightConstraint)

  def test_the_epoch_reaches_the_deferred_weights_through_every_wrapper(self):
    counts = [50, 5]
    for normalize in ("batch", "weights"):
      loss = losses.class_balanced(class_counts=counts, beta=0.999, start_epoch=2,
                                   normalize=normalize)
      labels, logits = tf.constant([0, 1]), tf.constant([[1.0, 0.0], [0.0, 1.0]])
      before = loss(labels, logits).numpy()
      loss.set_epoch(1)
      self.assertAllClose(loss(labels, logits), before)  # unit weights until epoch 2
      loss.set_epoch(2)
      after = loss(labels, logits).numpy()
      self.assertFalse(np.allclose(after, before), normalize)

  def test_only_a_declared_transform_gets_the_class_counts(self):
    # As Task.model_transforms receives it from Gin: a scoped reference is a new wrapper.
    gin.parse_config("f/posthoc_adjusted.tau = 1.0\nhooks_test_holder.value = "
                     "@f/posthoc_adjusted")
    scoped = hooks_test_holder()
    self.assertIsNot(scoped, long_tail_heads.posthoc_adjusted)
    for declared in (long_tail_heads.posthoc_adjusted, scoped):
      self.assertIsInstance(declared, hooks.CountsAware)
    for plain in (long_tail_heads.normed_head, long_tail_heads.sigmoid_prior_bias):
      self.assertNotIsInstance(plain, hooks.CountsAware)
    gin.clear_config()

    def undeclared(model, class_counts=None):  # a parameter of the name is not a declaration
      if class_counts is not None:
        raise AssertionError("given counts it did not declare")
      return model

    counts = [40, 10, 5, 4, 1]
    task = types.SimpleNamespace(
        model=lambda: resnet_cifar.resnet_cifar(depth=8, num_classes=5, input_shape=(8, 8, 3),
                                                width=4),
        model_transforms=[undeclared, long_tail_heads.posthoc_adjusted])
    model, _ = build.build_model(task, counts)
    adjustment = model.get_layer("posthoc_adjustment")
    x = np.zeros((1, 5), np.float32)
    self.assertAllClose(adjustment(x, training=False)[0],
                        -np.log(np.array(counts) / np.sum(counts)), rtol=1e-5)


if __name__ == "__main__":
  tf.test.main()
