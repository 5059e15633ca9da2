"""SavedModel export: encoded images in, the Keras model's predictions out."""

import os

import numpy as np
import tensorflow as tf

from zoo import card
from zoo import export
from zoo import resnet_cifar

MEAN, STD = (0.5, 0.4, 0.3), (0.25, 0.2, 0.3)


def encoded_images(n=3, size=20, width=None):
  rng = np.random.default_rng(0)
  pixels = rng.integers(0, 256, size=(n, size, width or size, 3), dtype=np.uint8)
  return pixels, [tf.io.encode_png(p).numpy() for p in pixels]


class ExportTest(tf.test.TestCase):

  def test_reloaded_model_serves_the_keras_predictions(self):
    model = resnet_cifar.resnet_cifar(8, num_classes=4, input_shape=(16, 16, 3))
    x = tf.random.stateless_normal((8, 16, 16, 3), seed=[1, 2])
    model(x, training=True)  # move the BN statistics away from their initial values
    path = export.export_saved_model(model, os.path.join(self.get_temp_dir(), "sm"),
                                     image_size=16, mean=MEAN, std=STD)
    pixels, encoded = encoded_images()
    # What evaluation feeds the model: resize (antialiased), then normalise.
    images = tf.image.resize(tf.cast(pixels, tf.float32), [16, 16], antialias=True)
    want = model((images / 255.0 - MEAN) / STD, training=False).numpy()

    served = tf.saved_model.load(path).signatures["serving_default"](
        images=tf.constant(encoded))
    self.assertAllClose(served["logits"], want, rtol=1e-4, atol=1e-5)
    self.assertAllEqual(served["classes"], np.argmax(want, axis=-1))
    self.assertAllClose(tf.reduce_sum(served["probabilities"], axis=-1), np.ones(3))

  def test_whole_pixels_serves_the_rounded_crop(self):
    """With `whole_pixels` (a pipeline handing uint8 batches), the resized crop is
    rounded to whole levels (half to even) before the normalisation, as evaluation
    rounded it; the unrounded crop's logits are not what it serves."""
    model = resnet_cifar.resnet_cifar(8, num_classes=4, input_shape=(16, 16, 3))
    path = export.export_saved_model(model, os.path.join(self.get_temp_dir(), "sm"),
                                     image_size=16, mean=MEAN, std=STD, whole_pixels=True)
    pixels, encoded = encoded_images()
    images = tf.image.resize(tf.cast(pixels, tf.float32), [16, 16], antialias=True)
    rounded = np.clip(np.round(images.numpy()), 0, 255)
    served = tf.saved_model.load(path).signatures["serving_default"](
        images=tf.constant(encoded))["logits"]
    self.assertAllClose(served, model((rounded / 255.0 - MEAN) / STD, training=False),
                        rtol=1e-4, atol=1e-5)
    self.assertNotAllClose(served, model((images / 255.0 - MEAN) / STD, training=False),
                           rtol=1e-4, atol=1e-5)

  def test_serves_the_evaluation_crop_and_resize_method(self):
    """Serving runs zoo.card.eval_preprocess, as evaluation does: here DeepMind's
    square centre crop of a non-square image, resized bicubically."""
    model = resnet_cifar.resnet_cifar(8, num_classes=4, input_shape=(16, 16, 3))
    crop = card.deepmind_eval_crop(16)
    path = export.export_saved_model(model, os.path.join(self.get_temp_dir(), "sm"),
                                     image_size=16, mean=MEAN, std=STD,
                                     crop_fraction=crop, method="bicubic")
    pixels, pngs = encoded_images(n=2, size=20, width=30)
    jpegs = [tf.io.encode_jpeg(p).numpy() for p in pixels]
    serve = tf.saved_model.load(path).signatures["serving_default"]
    # PNGs: the decoded image's crop. JPEG bytes: decoded inside the crop, as
    # evaluation of image files decodes them.
    for encoded, evaluated in ((pngs, [card.eval_preprocess(p, 16, crop, MEAN, STD, "bicubic")
                                       for p in pixels]),
                               (jpegs, [card.eval_preprocess_encoded(
                                   e, 16, crop, MEAN, STD, "bicubic") for e in jpegs])):
      served = serve(images=tf.constant(encoded))
      self.assertAllClose(served["logits"], model(tf.stack(evaluated), training=False),
                          rtol=1e-4, atol=1e-5)
    with self.assertRaisesRegex(ValueError, "method='area'"):
      export.export_saved_model(model, path, 16, MEAN, STD, method="area")

  def test_grey_model_serves_the_luma(self):
    """A grey model (one-channel input, one-value mean and std) is served each image's
    luma, normalised, as evaluation feeds it."""
    model = resnet_cifar.resnet_cifar(8, num_classes=4, input_shape=(16, 16, 1))
    path = export.export_saved_model(model, os.path.join(self.get_temp_dir(), "sm"),
                                     image_size=16, mean=(0.45,), std=(0.22,))
    pixels, encoded = encoded_images()
    images = tf.image.resize(tf.cast(pixels, tf.float32), [16, 16], antialias=True)
    luma = tf.reduce_sum(images * [0.299, 0.587, 0.114], axis=-1, keepdims=True)
    want = model((luma / 255.0 - 0.45) / 0.22, training=False).numpy()
    served = tf.saved_model.load(path).signatures["serving_default"](
        images=tf.constant(encoded))
    self.assertAllClose(served["logits"], want, rtol=1e-4, atol=1e-5)

  def test_refuses_what_is_not_a_keras_model(self):
    with self.assertRaisesRegex(ValueError, "tf_keras model"):
      export.export_saved_model(object(), self.get_temp_dir(), 16, MEAN, STD)


if __name__ == "__main__":
  tf.test.main()
