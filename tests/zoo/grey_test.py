"""A grey input for RGB models (zoo.build input_channels=1): the first convolution's
kernel summed over the colour channels (timm's adapt_input_conv), so the grey model on
an image equals the RGB model on that image replicated to three channels, in every zoo
family with a first convolution; NFNets' weight-standardised stem keeps its
standardisation with the gain corrected."""

import os

from absl.testing import parameterized
import numpy as np
import tensorflow as tf
import tf_keras

from tricks import ws_conv
from zoo import grey
from zoo import registry

FAMILIES = (  # (model, input side): one of each family with a first convolution
    ("resnet50", 32),  # tf_keras.applications, caffe input (a channel flip inside)
    ("resnet50_v1_5", 32),  # Model Garden's backbone, nested
    ("inception_v3", 75),
    ("resnext50_32x4d", 32),
    ("resnet20_cifar", 16),
    ("resnet32_menon", 16),
    ("nfnet_nano", 16),  # weight-standardised stem
)


def pair(name, side, **overrides):
  """The grey model, and the RGB model its weights came from (same seed, same draws)."""
  tf_keras.utils.set_random_seed(3)
  grey_model = registry.build(name, num_classes=4, input_shape=(side, side, 3),
                              input_channels=1, **overrides)
  tf_keras.utils.set_random_seed(3)
  rgb_model = registry.build(name, num_classes=4, input_shape=(side, side, 3), **overrides)
  return grey_model, rgb_model


class GreyTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.parameters(*FAMILIES)
  def test_grey_model_equals_rgb_model_on_replicated_grey(self, name, side):
    grey_model, rgb_model = pair(name, side)
    self.assertEqual(grey_model.input_shape, (None, side, side, 1))
    self.assertIsNotNone(registry.card_of(grey_model))
    x = np.random.default_rng(0).normal(size=(3, side, side, 1)).astype(np.float32)
    want = rgb_model(np.repeat(x, 3, axis=-1), training=False).numpy()
    got = grey_model(x, training=False).numpy()
    scale = np.abs(want).max()
    self.assertGreater(scale, 0.0)
    self.assertAllClose(got, want, rtol=0, atol=1e-4 * scale)
    # Not by chance: a grey image in one channel only (zeros in the others) differs.
    only_red = np.concatenate([x, np.zeros_like(x), np.zeros_like(x)], axis=-1)
    self.assertNotAllClose(rgb_model(only_red, training=False), want, rtol=0,
                           atol=1e-2 * scale)

  def test_pretrained_weights_reach_the_grey_model(self):
    tf_keras.utils.set_random_seed(1)
    source = tf_keras.applications.ResNet50(include_top=False, weights=None,
                                            input_shape=(32, 32, 3), pooling="avg")
    path = os.path.join(self.get_temp_dir(), "resnet50_notop.h5")
    source.save_weights(path)
    model = registry.build("resnet50", num_classes=3, input_shape=(32, 32, 3),
                           input_channels=1, weights=path)
    for name in ("conv1_bn", "conv3_block2_2_conv", "conv5_block3_3_bn"):
      for got, want in zip(model.get_layer(name).weights, source.get_layer(name).weights):
        self.assertAllEqual(got, want, msg=name)
    self.assertAllClose(model.get_layer("conv1_conv").kernel,
                        source.get_layer("conv1_conv").kernel.numpy().sum(2, keepdims=True))
    self.assertAllEqual(model.get_layer("conv1_conv").bias, source.get_layer("conv1_conv").bias)

  def test_ws_stem_keeps_its_standardisation_with_a_corrected_gain(self):
    """WS over the summed kernel is not the sum of the WS kernels; the RGB model on
    replicated grey convolves with the latter, so the gain is rescaled to make the two
    equal, and the layer's kernel is still standardised (zero mean over its fan-in,
    N' var = gain'^2 / ... in the WS form)."""
    grey_model, rgb_model = pair("nfnet_nano", 16)
    rgb, adapted = rgb_model.get_layer("stem_conv0"), grey_model.get_layer("stem_conv0")
    rgb_hat = ws_conv.standardize_kernel(rgb.kernel, rgb.gain, rgb.eps).numpy()
    got = ws_conv.standardize_kernel(adapted.kernel, adapted.gain, adapted.eps).numpy()
    want = rgb_hat.sum(axis=2, keepdims=True)
    self.assertAllClose(got, want, rtol=1e-5, atol=1e-6)
    # The sum of the raw kernels, standardised with the RGB gain (timm's adaptation of
    # its ScaledStdConv2d): the output's scale per unit is off by sqrt(N' var' / N var).
    plain = ws_conv.standardize_kernel(adapted.kernel, rgb.gain, rgb.eps).numpy()
    self.assertNotAllClose(plain, want, rtol=1e-2)
    self.assertAllClose(adapted.kernel, rgb.kernel.numpy().sum(2, keepdims=True))
    # The adapted kernel is standardised: zero mean and sum of squares gain'^2 per unit
    # (W_hat = gain (W - mean) / sqrt(N var), so sum W_hat^2 = gain^2).
    self.assertAllClose(got.mean(axis=(0, 1, 2)), np.zeros(got.shape[-1]), atol=1e-6)
    self.assertAllClose((got ** 2).sum(axis=(0, 1, 2)), adapted.gain.numpy() ** 2,
                        rtol=1e-4)
    # The gain by formula, in float64.
    kernel = rgb.kernel.numpy().astype(np.float64)
    summed = kernel.sum(2, keepdims=True)
    gain = (rgb.gain.numpy() * np.sqrt(np.maximum(9 * summed.var(axis=(0, 1, 2)), rgb.eps))
            / np.sqrt(np.maximum(27 * kernel.var(axis=(0, 1, 2)), rgb.eps)))
    self.assertAllClose(adapted.gain, gain, rtol=1e-6)

  def test_bad_settings(self):
    for bad in (2, 0, "1", True):
      with self.assertRaisesRegex(ValueError, f"input_channels={bad!r} must be 3 .* or 1"):
        registry.build("resnet20_cifar", num_classes=3, input_shape=(8, 8, 3),
                       input_channels=bad)
    with self.assertRaisesRegex(ValueError, "set zoo.build.input_channels = 1"):
      registry.build("resnet20_cifar", num_classes=3, input_shape=(8, 8, 1))
    with self.assertRaisesRegex(grey.AdaptError, r"\[h, w, 3, out\] kernel"):
      grey.summed_kernel(np.zeros([3, 3, 4, 8]))


if __name__ == "__main__":
  tf.test.main()
