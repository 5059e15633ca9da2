"""zoo.transforms.recompute: blocks from the model's card, or a one-line error."""

import dataclasses

import numpy as np
import tensorflow as tf
import tf_keras

from tricks import recompute as recompute_lib
from zoo import card
from zoo import resnet_cifar
from zoo import transforms

CIFAR = card.ModelCard(8, 8, 1.0, "bilinear", (0.5,) * 3, (0.25,) * 3, None,
                       r"^(stage[0-9]/block[0-9]+)/")


def small_resnet():
  """ResNet-8: three stages of one basic block (He et al. 2016, section 4.2, n = 1)."""
  model = resnet_cifar.resnet_cifar(8, num_classes=3, input_shape=(8, 8, 3))
  return card.attach_card(model, CIFAR)


def recompute_layers(model):
  return [l for l in model.layers if isinstance(l, recompute_lib.Recompute)]


class RecomputeTest(tf.test.TestCase):

  def tearDown(self):
    tf_keras.backend.clear_session()
    super().tearDown()

  def test_pattern_from_the_card(self):
    model = small_resnet()
    x = tf.constant(np.random.default_rng(0).normal(size=(2, 8, 8, 3)), tf.float32)
    rebuilt = transforms.recompute(model)
    self.assertLen(recompute_layers(rebuilt), 3)  # one segment a block
    self.assertLen(recompute_layers(transforms.recompute(model, every=2)), 2)  # 2 + 1
    self.assertIs(card.card_of(rebuilt), CIFAR)
    self.assertAllClose(rebuilt(x), model(x))  # same layers, same function

  def test_explicit_pattern_wins_and_models_without_a_card_take_one(self):
    model = resnet_cifar.resnet_cifar(8, num_classes=3, input_shape=(8, 8, 3))
    rebuilt = transforms.recompute(model, pattern=r"^(stage[0-9])/")
    self.assertLen(recompute_layers(rebuilt), 3)
    self.assertIsNone(card.card_of(rebuilt))

  def test_no_pattern_is_a_one_line_error(self):
    inputs = tf_keras.Input((4,))
    model = tf_keras.Model(inputs, tf_keras.layers.Dense(2)(inputs), name="plain")
    no_pattern = dataclasses.replace(CIFAR, block_pattern=None)
    for attached, why in ((None, "it has no zoo card"),
                          (no_pattern, "its zoo card has no block pattern")):
      if attached:
        card.attach_card(model, attached)
      with self.assertRaisesRegex(ValueError, f"model 'plain' names no blocks \\({why}\\); "
                                  "bind recompute.pattern") as e:
        transforms.recompute(model)
      self.assertNotIn("\n", str(e.exception))


if __name__ == "__main__":
  tf.test.main()
