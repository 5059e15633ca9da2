"""recipes/data/augment.py, op by op: the crop after constant padding is a window of
the padded image (fill outside, the image inside), the flip is the mirror or nothing,
and bad settings are refused naming the setting."""

import dataclasses

import numpy as np
import tensorflow as tf

from recipes.data import augment
from recipes.data import pipeline


def settings(**fields):
  return dataclasses.replace(pipeline.InputPipeline(batch_size=1, image_size=4), **fields)


class AugmentTest(tf.test.TestCase):

  def test_padded_crop_is_a_window_of_the_padded_image(self):
    image = tf.reshape(tf.range(1.0, 17.0), [4, 4, 1]) * tf.ones([1, 1, 3])
    padded = np.pad(image.numpy(), [[2, 2], [2, 2], [0, 0]], constant_values=7.0)
    every = {(i, j): padded[i:i + 4, j:j + 4] for i in range(5) for j in range(5)}
    seen = set()
    for seed in range(40):
      crop = augment.augment_image(
          settings(random_crop_padding=2, random_crop_fill=7, random_flip=False),
          image, tf.constant([seed, 0], tf.int64)).numpy()
      matches = [k for k, window in every.items() if np.array_equal(window, crop)]
      self.assertNotEmpty(matches, msg=f"seed {seed}: not a window of the padded image")
      seen.update(matches)
    self.assertGreater(len(seen), 5)  # the offset is drawn, not fixed

  def test_flip_is_the_mirror_or_nothing(self):
    image = tf.reshape(tf.range(48.0), [4, 4, 3])
    outcomes = set()
    for seed in range(20):
      out = augment.augment_image(settings(random_flip=True), image,
                                  tf.constant([seed, 1], tf.int64)).numpy()
      if np.array_equal(out, image.numpy()):
        outcomes.add("same")
      else:
        self.assertAllEqual(out, image.numpy()[:, ::-1])
        outcomes.add("mirror")
    self.assertEqual(outcomes, {"same", "mirror"})

  def test_bad_settings_name_themselves(self):
    for fields, message in (
        (dict(random_crop_padding=-1), "random_crop_padding=-1"),
        (dict(random_crop_fill=300), "random_crop_fill=300"),
        (dict(random_resized_crop=(0.5, 0.2)), "random_resized_crop=\\(0.5, 0.2\\)"),
        (dict(color_jitter=(0.1, 0.2)), "color_jitter=\\(0.1, 0.2\\)"),
        (dict(cutout=3), "cutout=3")):
      with self.assertRaisesRegex(ValueError, "InputPipeline." + message):
        augment.check(settings(**fields))


if __name__ == "__main__":
  tf.test.main()
