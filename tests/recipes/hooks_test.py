"""The declared hooks (recipes/hooks.py) against what takes part in them: the tricks
that implement a hook are instances of its Protocol, plain callables are not, and a
wrapping loss passes the epoch on to the loss it wraps."""

import numpy as np
import tensorflow as tf

from recipes import hooks
from recipes import losses
from tricks import agc
from tricks import max_norm


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


if __name__ == "__main__":
  tf.test.main()
