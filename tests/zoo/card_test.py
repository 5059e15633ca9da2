"""Model cards: validation, and the evaluation preprocessing against DeepMind's crop."""

import dataclasses

from absl.testing import parameterized
import numpy as np
import tensorflow as tf
import tf_keras

from zoo import card

MEAN, STD = (0.5, 0.4, 0.3), (0.25, 0.2, 0.3)


def pixels(height, width, seed=0):
  return np.random.default_rng(seed).integers(0, 256, (height, width, 3), dtype=np.uint8)


def deepmind_crop(image, test_size):
  """nfnets/dataset.py `_decode_and_center_crop`, in numpy float32 as DeepMind writes
  it: scale = min(H, W) / (S + 32), side = int(scale * S), offsets (D - side + 1) // 2."""
  height, width = image.shape[:2]
  scale = min(np.float32(height) / np.float32(test_size + 32),
              np.float32(width) / np.float32(test_size + 32))
  side = int(np.float32(scale * np.float32(test_size)))
  top, left = (height - side + 1) // 2, (width - side + 1) // 2
  return image[top:top + side, left:left + side]


def normalise(image, mean=MEAN, std=STD):
  return (np.asarray(image, np.float64) / 255 - mean) / std


class EvalPreprocessTest(tf.test.TestCase, parameterized.TestCase):

  def test_whole_pixels_round_half_to_even_and_clip(self):
    got = card.whole_pixels(tf.constant([-0.6, 0.4, 0.5, 1.5, 2.5, 254.5, 255.4, 300.0]))
    self.assertEqual(got.dtype, tf.uint8)
    self.assertAllEqual(got, [0, 0, 0, 2, 2, 254, 255, 255])

  def test_deepmind_crop_of_a_non_square_image(self):
    image = pixels(40, 60)
    crop = card.deepmind_eval_crop(16)  # 16 / 48
    cropped = deepmind_crop(image, 16)
    # By hand: side int(40 / 48 * 16) = 13, offsets (27 + 1) // 2 = 14, (47 + 1) // 2 = 24.
    self.assertAllEqual(cropped, image[14:27, 24:37])
    # Resized to the crop's own size, bicubic sampling hits pixel centres: the crop.
    got = card.eval_preprocess(image, 13, crop, MEAN, STD, "bicubic")
    self.assertAllClose(got, normalise(cropped), atol=1e-5)
    # At the test size, DeepMind's bicubic resize of that crop (not clamped).
    want = tf.image.resize(cropped, [16, 16], method="bicubic").numpy()
    got = card.eval_preprocess(image, 16, crop, MEAN, STD, "bicubic")
    self.assertEqual(got.dtype, tf.float32)
    self.assertAllClose(got, normalise(want), atol=1e-5)

  def test_published_nfnet_f0_geometry(self):
    """F0 tests at 256 on 256 / 288 of the shorter side: a 288 x 320 image keeps
    rows 16-271 and columns 32-287, already 256 square."""
    self.assertAllClose(card.deepmind_eval_crop(256), 256 / 288)
    image = pixels(288, 320, seed=1)
    got = card.eval_preprocess(image, 256, card.deepmind_eval_crop(256), MEAN, STD,
                               "bicubic")
    self.assertAllClose(got, normalise(image[16:272, 32:288]), atol=1e-5)

  def test_encoded_jpeg_decodes_only_its_crop(self):
    # The published F0 geometry from JPEG bytes (4:4:4: no chroma upsampling at the
    # crop's edge): rows 16-271 and columns 32-287 of the decoded image, as above; a
    # PNG takes the whole decode. Both equal eval_preprocess of the decoded image.
    image = pixels(288, 320, seed=2)
    crop = card.deepmind_eval_crop(256)
    self.assertAllEqual([t.numpy() for t in card.centre_crop_box([288, 320], crop)],
                        [16, 32, 256])
    jpeg = tf.io.encode_jpeg(image, quality=95, chroma_downsampling=False)
    for encoded in (jpeg, tf.io.encode_png(image)):
      decoded = tf.io.decode_image(encoded, channels=3)
      got = card.eval_preprocess_encoded(encoded, 256, crop, MEAN, STD, "bicubic")
      self.assertAllClose(got, normalise(decoded.numpy()[16:272, 32:288]), atol=1e-5)
      self.assertAllClose(got, card.eval_preprocess(decoded, 256, crop, MEAN, STD,
                                                    "bicubic"), atol=1e-5)

  def test_bilinear_crop_is_antialiased_resize_of_the_crop(self):
    image = pixels(60, 40, seed=2)  # portrait: the crop's side comes from the width
    cropped = deepmind_crop(image, 16)
    want = tf.image.resize(cropped, [8, 8], antialias=True).numpy()
    got = card.eval_preprocess(image, 8, card.deepmind_eval_crop(16), MEAN, STD)
    self.assertAllClose(got, normalise(want), atol=1e-5)

  @parameterized.parameters(np.uint8, np.float32)
  def test_whole_image_bilinear_is_todays_evaluation_exactly(self, dtype):
    """crop 1, bilinear: the pipeline's resize(antialias) then normalisation, bit for
    bit (no crop op at all), so recorded metrics do not move."""
    image = pixels(40, 60, seed=3).astype(dtype)
    mean, std = tf.constant(MEAN, tf.float32), tf.constant(STD, tf.float32)
    resized = tf.image.resize(image, [16, 16], antialias=True)
    want = (tf.cast(resized, tf.float32) / 255.0 - mean) / std
    self.assertAllEqual(card.eval_preprocess(image, 16, 1.0, MEAN, STD), want)

  def test_bicubic_is_not_bilinear_and_overshoots_unclamped(self):
    image = np.zeros((8, 8, 3), np.uint8)
    image[:, 4:] = 255  # a step edge: bicubic rings past [0, 255]
    got = card.eval_preprocess(image, 6, 1.0, (0.0,) * 3, (1.0,) * 3, "bicubic")
    want = tf.image.resize(image, [6, 6], method="bicubic").numpy() / 255
    self.assertAllClose(got, want, atol=1e-6)
    self.assertLess(float(tf.reduce_min(got)), 0.0)
    self.assertGreater(float(tf.reduce_max(got)), 1.0)
    bilinear = card.eval_preprocess(image, 6, 1.0, (0.0,) * 3, (1.0,) * 3)
    self.assertNotAllClose(got, bilinear)

  def test_symbolic_shapes_in_tf_data_and_tf_function(self):
    images = [pixels(40, 60, seed=4), pixels(50, 30, seed=5)]
    crop = card.deepmind_eval_crop(16)
    want = [card.eval_preprocess(i, 16, crop, MEAN, STD, "bicubic") for i in images]
    ds = tf.data.Dataset.from_generator(
        lambda: iter(images), output_signature=tf.TensorSpec([None, None, 3], tf.uint8))
    ds = ds.map(lambda i: card.eval_preprocess(i, 16, crop, MEAN, STD, "bicubic"))
    self.assertEqual(ds.element_spec.shape, (16, 16, 3))
    for got, expected in zip(ds, want):
      self.assertAllClose(got, expected)
    fn = tf.function(lambda i: card.eval_preprocess(i, 16, crop, MEAN, STD),
                     input_signature=[tf.TensorSpec([None, None, 3], tf.uint8)])
    self.assertAllClose(fn(images[0]), card.eval_preprocess(images[0], 16, crop, MEAN, STD))

  def test_grey_is_bt601_luma_normalised_with_reduced_statistics(self):
    image = pixels(9, 9)
    luma = image.astype(np.float64) @ [0.299, 0.587, 0.114]  # ITU-R BT.601
    self.assertAllClose(card.to_grey(image)[..., 0], luma, rtol=1e-6)
    grey_as_rgb = np.repeat(image[..., :1], 3, axis=-1)  # a grey image stored as RGB
    self.assertAllClose(card.to_grey(grey_as_rgb)[..., 0], image[..., 0], rtol=1e-6)
    (mean,), (std,) = card.grey_statistics(MEAN, STD)
    self.assertAllClose([mean, std], [0.299 * 0.5 + 0.587 * 0.4 + 0.114 * 0.3,
                                      0.299 * 0.25 + 0.587 * 0.2 + 0.114 * 0.3])
    got = card.eval_preprocess(grey_as_rgb, 9, 1.0, (mean,), (std,))
    self.assertEqual(got.shape, (9, 9, 1))
    self.assertAllClose(got[..., 0], (image[..., 0] / 255 - mean) / std, atol=1e-5)
    # Equal statistics in every channel (Inception's 0.5): the grey pipeline gives each
    # channel of the RGB pipeline on the replicated image.
    rgb = card.eval_preprocess(grey_as_rgb, 9, 1.0, (0.5,) * 3, (0.5,) * 3)
    grey = card.eval_preprocess(grey_as_rgb, 9, 1.0, *card.grey_statistics((0.5,) * 3,
                                                                           (0.5,) * 3))
    for c in range(3):
      self.assertAllClose(grey[..., 0], rgb[..., c], atol=1e-5)

  @parameterized.parameters(dict(crop=0.0), dict(crop=1.5), dict(method="nearest"))
  def test_bad_arguments(self, crop=1.0, method="bilinear"):
    with self.assertRaisesRegex(ValueError, "eval_preprocess"):
      card.eval_preprocess(pixels(8, 8), 4, crop, MEAN, STD, method)


GOOD = dict(train_size=192, test_size=256, test_crop=256 / 288, resize_method="bicubic",
            mean=card.IMAGENET_MEAN, std=card.IMAGENET_STD, randaugment=(4, 5),
            block_pattern=r"^(nf_block_[0-9]+)/")


class ModelCardTest(tf.test.TestCase, parameterized.TestCase):

  def test_fields(self):
    c = card.ModelCard(**dict(GOOD, mean=[0.485, 0.456, 0.406], randaugment=[4, 5]))
    self.assertEqual(c.mean, (0.485, 0.456, 0.406))  # lists become tuples
    self.assertEqual(c.randaugment, (4, 5))
    self.assertEqual(card.ModelCard(*GOOD.values()), c)  # positional, in field order
    with self.assertRaises(dataclasses.FrozenInstanceError):
      c.train_size = 10

  @parameterized.named_parameters(
      ("train_size", dict(train_size=0), "train_size=0"),
      ("test_size", dict(test_size=2.5), "test_size=2.5"),
      ("no_crop", dict(test_crop=0.0), "test_crop=0.0"),
      ("crop_above_one", dict(test_crop=1.1), "test_crop=1.1"),
      ("method", dict(resize_method="area"), "resize_method='area'"),
      ("mean", dict(mean=(0.5, 0.5)), "mean=.*3 values"),
      ("std", dict(std=(0.2, 0.2)), "std=.*3 values"),
      ("std_zero", dict(std=(0.2, 0.0, 0.2)), "std=.*positive"),
      ("randaugment", dict(randaugment=(4,)), "randaugment=.*layers, magnitude"),
      # Issue 56: NaN or infinite statistics (a timm config.json's) ran as divergence,
      # exit 3; a size of 100000 would resize every image to 10^10 pixels.
      ("mean_nan", dict(mean=(0.5, float("nan"), 0.5)), "mean=.*finite"),
      ("std_inf", dict(std=(0.2, float("inf"), 0.2)), "std=.*finite"),
      ("huge_size", dict(test_size=100000), "test_size=100000: use a positive integer "
       "up to 4096"),
  )
  def test_validation(self, change, message):
    with self.assertRaisesRegex(ValueError, f"ModelCard.{message}"):
      card.ModelCard(**dict(GOOD, **change))

  def test_attach_and_read_back(self):
    model = tf_keras.Sequential([tf_keras.Input((2,)), tf_keras.layers.Dense(1)])
    self.assertIsNone(card.card_of(model))
    c = card.ModelCard(**GOOD)
    self.assertIs(card.attach_card(model, c), model)
    self.assertIs(card.card_of(model), c)
    self.assertLen(model.weights, 2)  # the card is no weight, no tracked dependency
    with self.assertRaisesRegex(TypeError, "needs a ModelCard, got dict"):
      card.attach_card(model, GOOD)


if __name__ == "__main__":
  tf.test.main()
