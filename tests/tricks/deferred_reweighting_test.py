"""Deferred re-weighting (Cao et al. 2019, Algorithm 1): unit weights, then the given
weights from the start epoch."""

import numpy as np
import tensorflow as tf

from tricks import deferred_reweighting


class DeferredWeightsTest(tf.test.TestCase):

  def test_weights_switch_at_the_start_epoch(self):
    drw = deferred_reweighting.DeferredWeights([0.5, 1.0, 2.5], start_epoch=160)
    for epoch, want in ((0, [1, 1, 1]), (159, [1, 1, 1]), (160, [0.5, 1, 2.5]),
                        (199, [0.5, 1, 2.5])):
      drw.set_epoch(epoch)
      self.assertAllEqual(drw.variable.numpy(), want)
    drw.set_epoch(3)  # a rollback before the start goes back to unit weights
    self.assertAllEqual(drw.variable.numpy(), [1, 1, 1])

  def test_a_traced_loss_reads_the_switch(self):
    drw = deferred_reweighting.DeferredWeights([0.0, 3.0], start_epoch=1)

    @tf.function
    def weighted(labels, per_example):
      return per_example * tf.gather(drw.variable, labels)

    labels, losses = tf.constant([0, 1]), tf.constant([2.0, 2.0])
    drw.set_epoch(0)
    self.assertAllEqual(weighted(labels, losses), [2.0, 2.0])
    drw.set_epoch(1)
    self.assertAllEqual(weighted(labels, losses), [0.0, 6.0])

  def test_bad_settings(self):
    with self.assertRaisesRegex(ValueError, "start_epoch=-1 must be a whole number"):
      deferred_reweighting.DeferredWeights([1.0], -1)
    with self.assertRaisesRegex(ValueError, "one finite weight >= 0 a class"):
      deferred_reweighting.DeferredWeights([1.0, np.nan], 2)


if __name__ == "__main__":
  tf.test.main()
