"""SavedModel export with the preprocessing inside: serving takes encoded images.

`export_saved_model(model, path, image_size, mean, std)` writes a SavedModel whose
default signature takes a batch of encoded images (JPEG, PNG, GIF, BMP bytes) and
returns logits, softmax probabilities and the top class. Each image is decoded to
RGB, centre-cropped to `crop_fraction`, resized to `image_size` (bilinear with
antialiasing) and normalised as (x / 255 - mean) / std: the evaluation preprocessing
of `recipes/data/pipeline.py`, so a served image scores as it did in evaluation.
"""

import tensorflow as tf
import tf_keras


class _Serving(tf.Module):
  """The model with its preprocessing, as a trackable module."""

  def __init__(self, model, image_size, mean, std, crop_fraction):
    super().__init__()
    self.model = model
    self.image_size = int(image_size)
    self.mean = tf.constant(mean, tf.float32)
    self.std = tf.constant(std, tf.float32)
    self.crop_fraction = float(crop_fraction)

  def preprocess(self, encoded):
    image = tf.io.decode_image(encoded, channels=3, expand_animations=False)
    image = tf.cast(image, tf.float32)
    if self.crop_fraction < 1.0:
      image = tf.image.central_crop(image, self.crop_fraction)
    image = tf.image.resize(image, [self.image_size, self.image_size], antialias=True)
    return (image / 255.0 - self.mean) / self.std

  @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="images")])
  def serve(self, images):
    pixels = tf.map_fn(self.preprocess, images,
                       fn_output_signature=tf.TensorSpec(
                           [self.image_size, self.image_size, 3], tf.float32))
    logits = tf.cast(self.model(pixels, training=False), tf.float32)
    return {"logits": logits, "probabilities": tf.nn.softmax(logits),
            "classes": tf.argmax(logits, axis=-1, output_type=tf.int32)}


def export_saved_model(model, path, image_size, mean, std, crop_fraction=1.0):
  """Writes `model` with its preprocessing to `path`; returns `path`."""
  if not isinstance(model, tf_keras.Model):
    raise ValueError(f"export needs a tf_keras model, got {type(model).__name__}")
  module = _Serving(model, image_size, mean, std, crop_fraction)
  tf.saved_model.save(module, path, signatures={"serving_default": module.serve})
  return path
