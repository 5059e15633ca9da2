"""Loss builders: both give per-example losses; the adjusted one uses the counts."""

import numpy as np
import tensorflow as tf

from recipes import losses


class LossesTest(tf.test.TestCase):

  def test_cross_entropy_is_per_example(self):
    logits = tf.constant([[2.0, 0.0], [0.0, 3.0]])
    got = losses.cross_entropy(class_counts=[5, 1])([0, 0], logits)
    self.assertAllClose(got, [np.log(1 + np.exp(-2.0)), np.log(1 + np.exp(3.0))])

  def test_logit_adjusted_uses_priors(self):
    logits = tf.zeros([1, 2])
    got = losses.logit_adjusted(class_counts=[3, 1], tau=1.0)([1], logits)
    # softmax(log(0.75), log(0.25))_1 = 0.25.
    self.assertAllClose(got, [-np.log(0.25)])


if __name__ == "__main__":
  tf.test.main()
