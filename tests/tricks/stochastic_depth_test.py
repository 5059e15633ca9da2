"""Batch-wise stochastic depth (Huang et al. 2016; DeepMind's nfnets StochDepth)."""

import numpy as np
import tensorflow as tf
import tf_keras

from tricks import stochastic_depth


class StochasticDepthTest(tf.test.TestCase):

  def test_identity_at_inference(self):
    x = tf.random.stateless_normal([4, 3, 3, 2], seed=[0, 0])
    self.assertAllEqual(stochastic_depth.StochasticDepth(0.5)(x, training=False), x)

  def test_drops_whole_examples_at_the_rate(self):
    layer = stochastic_depth.StochasticDepth(0.3, seed=1)
    x = tf.ones([4000, 2, 2, 3])
    y = tf.function(lambda t: layer(t, training=True))(x).numpy()
    per_example = y.reshape(4000, -1)
    # Each example is all kept or all dropped, never partly.
    self.assertTrue(np.all((per_example == 0).all(1) | (per_example == 1).all(1)))
    kept = (per_example == 1).all(1).mean()
    self.assertAllClose(kept, 0.7, atol=0.03)  # 4000 draws: 3 sigma is 0.022

  def test_scale_by_keep(self):
    layer = stochastic_depth.StochasticDepth(0.5, scale_by_keep=True, seed=2)
    y = layer(tf.ones([1000, 1]), training=True).numpy()
    self.assertEqual(set(np.unique(y)), {0.0, 2.0})

  def test_seeded_masks_repeat_and_vary_between_calls(self):
    # As the trainer runs it: Keras layer RNGs backed by tf.random.Generator.
    tf_keras.backend.experimental.enable_tf_random_generator()
    self.addCleanup(tf_keras.backend.experimental.disable_tf_random_generator)
    x = tf.ones([64, 1])
    a = stochastic_depth.StochasticDepth(0.5, seed=3)
    b = stochastic_depth.StochasticDepth(0.5, seed=3)
    first = a(x, training=True)
    self.assertAllEqual(first, b(x, training=True))
    self.assertNotAllEqual(first, a(x, training=True))

  def test_rejects_rate_one(self):
    with self.assertRaisesRegex(ValueError, r"in \[0, 1\)"):
      stochastic_depth.StochasticDepth(1.0)


if __name__ == "__main__":
  tf.test.main()
