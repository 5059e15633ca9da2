"""Weight EMA: the average follows avg_t = m avg_{t-1} + (1 - m) w_t; the swap restores."""

from absl.testing import parameterized
import numpy as np
import tensorflow as tf
import tf_keras

from tricks import weight_ema


class WeightEmaTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.parameters("float32", "mixed_bfloat16")
  def test_average_matches_formula_and_swaps_back(self, policy):
    tf_keras.mixed_precision.set_global_policy(policy)
    self.addCleanup(tf_keras.mixed_precision.set_global_policy, "float32")
    layer = tf_keras.layers.Dense(1, use_bias=False, kernel_initializer="ones")
    layer.build((None, 1))
    optimizer = tf_keras.optimizers.SGD(0.1, use_ema=True, ema_momentum=0.5)
    step = tf.function(lambda g: optimizer.apply_gradients([(g, layer.kernel)]))
    w, avg = 1.0, 1.0
    for g in (1.0, 2.0, 3.0):
      step(tf.constant([[g]]))
      w -= 0.1 * g
      avg = 0.5 * avg + 0.5 * w        # the formula, by hand
    self.assertAllClose(layer.kernel.numpy(), [[w]], rtol=1e-6)
    with weight_ema.averaged_weights(optimizer, [layer.kernel]) as swapped:
      self.assertTrue(swapped)
      self.assertAllClose(layer.kernel.numpy(), [[avg]], rtol=1e-6)
      self.assertAllClose(layer(np.ones((1, 1), np.float32)), [[avg]], rtol=1e-2)
    self.assertAllClose(layer.kernel.numpy(), [[w]], rtol=1e-6)

  def test_average_is_in_the_checkpoint(self):
    var = tf.Variable([2.0])
    optimizer = tf_keras.optimizers.SGD(1.0, use_ema=True, ema_momentum=0.9)
    optimizer.apply_gradients([(tf.constant([1.0]), var)])
    path = tf.train.Checkpoint(var=var, optimizer=optimizer).save(
        self.get_temp_dir() + "/ckpt")
    # The optimizer checkpoints its slots by position in `optimizer.variables`.
    index = [i for i, v in enumerate(optimizer.variables) if "/average/" in v.name]
    self.assertLen(index, 1)
    saved = tf.train.load_variable(path, f"optimizer/_variables/{index[0]}/.ATTRIBUTES/"
                                   "VARIABLE_VALUE")
    self.assertAllClose(saved, [0.9 * 2.0 + 0.1 * 1.0])  # avg_1 = m w_0 + (1 - m) w_1

  def test_without_ema_nothing_changes(self):
    var = tf.Variable([3.0])
    optimizer = tf_keras.optimizers.SGD(1.0)
    optimizer.apply_gradients([(tf.constant([1.0]), var)])
    with weight_ema.averaged_weights(optimizer, [var]) as swapped:
      self.assertFalse(swapped)
      self.assertAllClose(var, [2.0])


if __name__ == "__main__":
  tf.test.main()
