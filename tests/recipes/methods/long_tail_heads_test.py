"""normed_head, sigmoid_prior_bias and posthoc_adjusted on a zoo model."""

import numpy as np
import tensorflow as tf
import tf_keras

from recipes.methods import long_tail_heads
from tricks import ldam
from tricks import posthoc
from zoo import finetune
from zoo import resnet_cifar


def tiny_model(num_classes=5):
  return resnet_cifar.resnet_cifar(depth=8, num_classes=num_classes, input_shape=(8, 8, 3),
                                   width=4)


class NormedHeadTest(tf.test.TestCase):

  def test_replaces_the_head_with_cosines(self):
    model = tiny_model()
    rebuilt = long_tail_heads.normed_head(model)
    head = rebuilt.get_layer(finetune.HEAD)
    self.assertIsInstance(head, ldam.NormedLinear)
    self.assertEqual((head.units, rebuilt.name), (5, model.name))
    # The backbone is the same layers (weights shared), the head its only new weights.
    self.assertIs(rebuilt.get_layer("pool"), model.get_layer("pool"))
    self.assertLen(head.trainable_weights, 1)
    x = np.random.default_rng(0).normal(size=(3, 8, 8, 3)).astype(np.float32)
    features = tf_keras.Model(model.inputs, model.get_layer("pool").output)(x).numpy()
    w = head.kernel.numpy()
    want = (features / np.linalg.norm(features, axis=1, keepdims=True)) @ (
        w / np.linalg.norm(w, axis=0))
    self.assertAllClose(rebuilt(x), want, rtol=1e-5, atol=1e-6)

  def test_refuses_a_second_application_and_headless_models(self):
    rebuilt = long_tail_heads.normed_head(tiny_model())
    with self.assertRaisesRegex(ValueError, "normed_head: .* is a NormedLinear, not a Dense"):
      long_tail_heads.normed_head(rebuilt)
    inputs = tf_keras.Input([3])
    headless = tf_keras.Model(inputs, tf_keras.layers.Dense(2, name="out")(inputs))
    with self.assertRaisesRegex(ValueError, "has no 'logits' head layer"):
      long_tail_heads.normed_head(headless)


class SigmoidPriorBiasTest(tf.test.TestCase):

  def test_every_sigmoid_starts_at_one_over_k(self):
    model = long_tail_heads.sigmoid_prior_bias(tiny_model(num_classes=10))
    bias = model.get_layer(finetune.HEAD).bias.numpy()
    self.assertAllClose(bias, np.full(10, -np.log(9.0)))
    self.assertAllClose(1 / (1 + np.exp(-bias)), np.full(10, 0.1), rtol=1e-6)


class PosthocAdjustedTest(tf.test.TestCase):

  def test_adjusts_at_inference_only(self):
    # Menon et al. 2021 eq. (9): f(x) - tau * log(pi), pi = n / sum(n); training unchanged.
    counts = [50, 20, 10, 5, 1]
    model = tiny_model()
    adjusted = long_tail_heads.posthoc_adjusted(model, class_counts=counts, tau=0.7)
    x = np.random.default_rng(1).normal(size=(4, 8, 8, 3)).astype(np.float32)
    raw = model(x, training=False).numpy()
    want = raw - 0.7 * np.log(np.array(counts) / np.sum(counts))
    self.assertAllClose(adjusted(x, training=False), want, rtol=1e-5, atol=1e-5)
    # The rarest class gains the most: 0.7 * log(86) over the most frequent's 0.7 * log(86/50).
    self.assertAllClose((adjusted(x, training=False) - raw)[:, 4], np.full(4, 0.7 * np.log(86)),
                        rtol=1e-5)
    # (Training-mode calls move BatchNorm's statistics: compare them last.)
    self.assertAllClose(adjusted(x, training=True), model(x, training=True), atol=1e-5)
    config = adjusted.get_layer("posthoc_adjustment").get_config()
    again = posthoc.PosthocAdjustment.from_config(config)
    self.assertAllClose(again(raw), want, rtol=1e-5, atol=1e-5)

  def test_bad_tau_and_headless_models(self):
    with self.assertRaisesRegex(ValueError, "tau=-1 must be a number >= 0"):
      long_tail_heads.posthoc_adjusted(tiny_model(), class_counts=[1] * 5, tau=-1)
    with self.assertRaisesRegex(ValueError, "positive training count"):
      long_tail_heads.posthoc_adjusted(tiny_model(), class_counts=[1, 1, 0, 1, 1])
    inputs = tf_keras.Input([3])
    headless = tf_keras.Model(inputs, tf_keras.layers.Dense(2, name="out")(inputs))
    with self.assertRaisesRegex(ValueError, "has no 'logits' head layer"):
      long_tail_heads.posthoc_adjusted(headless, class_counts=[1, 1])


if __name__ == "__main__":
  tf.test.main()
