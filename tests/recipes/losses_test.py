"""Loss builders: both give per-example losses; the adjusted one uses the counts."""

import numpy as np
import tensorflow as tf

from recipes import losses


class LossesTest(tf.test.TestCase):

  def test_cross_entropy_is_per_example(self):
    logits = tf.constant([[2.0, 0.0], [0.0, 3.0]])
    got = losses.cross_entropy(class_counts=[5, 1])([0, 0], logits)
    self.assertAllClose(got, [np.log(1 + np.exp(-2.0)), np.log(1 + np.exp(3.0))])

  def test_label_smoothing_matches_the_smoothed_target(self):
    logits = np.array([[2.0, 0.0, -1.0]], np.float32)
    log_p = logits - np.log(np.exp(logits).sum())
    target = np.array([0.9, 0.0, 0.0]) + 0.1 / 3  # eps = 0.1, label 0
    want = -(target * log_p).sum()
    got = losses.cross_entropy(class_counts=[1, 1, 1], label_smoothing=0.1)([0], logits)
    self.assertAllClose(got, [want], rtol=1e-6)
    # The logit-adjusted loss with uniform priors is the same loss.
    got = losses.logit_adjusted(class_counts=[4, 4, 4], label_smoothing=0.1)([0], logits)
    self.assertAllClose(got, [want], rtol=1e-6)

  def test_soft_targets(self):
    """MixUp / CutMix targets: cross-entropy against the mixed distribution."""
    logits = np.array([[2.0, 0.0, -1.0], [0.5, 0.5, 1.0]], np.float32)
    log_p = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
    targets = np.array([[0.7, 0.3, 0.0], [0.0, 0.4, 0.6]], np.float32)
    got = losses.cross_entropy(class_counts=[1, 1, 1])(tf.constant(targets), logits)
    self.assertAllClose(got, -(targets * log_p).sum(axis=1), rtol=1e-6)
    got = losses.logit_adjusted(class_counts=[2, 2, 2])(tf.constant(targets), logits)
    self.assertAllClose(got, -(targets * log_p).sum(axis=1), rtol=1e-6)

  def test_logit_adjusted_uses_priors(self):
    logits = tf.zeros([1, 2])
    got = losses.logit_adjusted(class_counts=[3, 1], tau=1.0)([1], logits)
    # softmax(log(0.75), log(0.25))_1 = 0.25.
    self.assertAllClose(got, [-np.log(0.25)])


if __name__ == "__main__":
  tf.test.main()
