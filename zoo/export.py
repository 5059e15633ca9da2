"""SavedModel export with the preprocessing inside: serving takes encoded images.

`export_saved_model(model, path, image_size, mean, std)` writes a SavedModel whose
default signature takes a batch of encoded images (JPEG, PNG, GIF, BMP bytes) and
returns logits, softmax probabilities and the top class. Each image is decoded to
RGB and preprocessed by `zoo.card.eval_preprocess_encoded` (centred square crop of
`crop_fraction` of the shorter side, a JPEG decoded only inside it; resize with
`method`, its luma for a grey model (one-value `mean`, `std`), (x / 255 - mean) /
std), the function evaluation of image files runs, so a served image scores as it did
in evaluation; with `whole_pixels`, the resized crop is rounded to whole levels first,
as a pipeline handing uint8 batches evaluated it.
"""

import tensorflow as tf
import tf_keras

from zoo import card as card_lib


class _Serving(tf.Module):
  """The model with its preprocessing, as a trackable module."""

  def __init__(self, model, image_size, mean, std, crop_fraction, method, whole_pixels):
    super().__init__()
    self.model = model
    self.image_size = int(image_size)
    self.mean = tf.constant(mean, tf.float32)
    self.std = tf.constant(std, tf.float32)
    self.crop_fraction = float(crop_fraction)
    self.method = method
    self.whole_pixels = bool(whole_pixels)

  def preprocess(self, encoded):
    pixels = card_lib.eval_crop_resize_encoded(encoded, self.image_size, self.crop_fraction,
                                               self.method)
    if self.whole_pixels:
      pixels = card_lib.whole_pixels(pixels)
    return card_lib.normalize_pixels(pixels, self.mean, self.std)

  @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="images")])
  def serve(self, images):
    channels = self.mean.shape[-1]  # 1: a grey model's luma
    pixels = tf.map_fn(self.preprocess, images,
                       fn_output_signature=tf.TensorSpec(
                           [self.image_size, self.image_size, channels], tf.float32))
    logits = tf.cast(self.model(pixels, training=False), tf.float32)
    return {"logits": logits, "probabilities": tf.nn.softmax(logits),
            "classes": tf.argmax(logits, axis=-1, output_type=tf.int32)}


def export_saved_model(model, path, image_size, mean, std, crop_fraction=1.0,
                       method="bilinear", whole_pixels=False):
  """Writes `model` with its preprocessing to `path`; returns `path`."""
  if not isinstance(model, tf_keras.Model):
    raise ValueError(f"export needs a tf_keras model, got {type(model).__name__}")
  if method not in card_lib.RESIZE_METHODS:
    raise ValueError(f"export method={method!r}: use one of {card_lib.RESIZE_METHODS}")
  module = _Serving(model, image_size, mean, std, crop_fraction, method, whole_pixels)
  tf.saved_model.save(module, path, signatures={"serving_default": module.serve})
  return path
