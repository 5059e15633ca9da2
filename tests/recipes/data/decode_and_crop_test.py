"""Training decodes each JPEG only inside its random resized crop's box: the same box
and pixels as decoding the whole image, and the same batches on a rebuilt epoch, with
either sampler of the box (Model Garden's, torchvision's).

With 4:2:0 chroma subsampling (libjpeg's default), libjpeg-turbo's cropped decode
upsamples the chroma of the box's first and last columns from the box's edge, not from
the columns beyond it: those two columns differ by a few levels, the rest not at all.
"""

import dataclasses
import os

from absl.testing import parameterized
import numpy as np
import tensorflow as tf

from recipes.data import augment
from recipes.data import image_folder
from recipes.data import pipeline

# (method, antialias) of the crop's resize.
RESIZES = (("bilinear", True), ("bilinear", False), ("bicubic", False), ("bicubic", True))


def write_tree(root, subsampled):
  """Two classes of smooth images 40-72 x 56: colour (chroma 4:2:0 when `subsampled`,
  else 4:4:4) and grayscale JPEGs, and a PNG."""
  rng = np.random.default_rng(0)
  for c, name in enumerate(("a", "b")):
    os.makedirs(os.path.join(root, name))
    for i in range(5):
      small = rng.uniform(0, 255, [5, 7, 3])
      image = tf.cast(tf.image.resize(small, [40 + 8 * i, 56]), tf.uint8)
      if i == 3:
        data = tf.io.encode_png(image)
      elif i == 4:
        data = tf.io.encode_jpeg(tf.image.rgb_to_grayscale(image), quality=90)
      else:
        data = tf.io.encode_jpeg(image, quality=90, chroma_downsampling=subsampled)
      ext = "png" if i == 3 else "jpg"
      tf.io.write_file(os.path.join(root, name, f"{c}{i}.{ext}"), data)


class DecodeAndCropTest(tf.test.TestCase, parameterized.TestCase):

  def setUp(self):
    super().setUp()
    self.root = os.path.join(self.get_temp_dir(), "tree")
    self.settings = pipeline.InputPipeline(
        batch_size=4, image_size=16, random_resized_crop=(0.08, 1.0), random_flip=True,
        mean=(0.5, 0.5, 0.5), std=(0.25, 0.25, 0.25), eval_image_size=16,
        eval_crop_fraction=1.0, eval_resize_method="bilinear", randaugment=(),
        uint8_batches=False)  # float32 pixels: the differences read in levels

  @parameterized.parameters(*augment.CROP_SAMPLERS)
  def test_same_pixels_as_decode_then_crop(self, sampler):
    write_tree(self.root, subsampled=True)
    settings = self.settings.replace(random_resized_crop_sampler=sampler)
    for name in ("a", "b"):
      for f in sorted(os.listdir(os.path.join(self.root, name))):
        encoded = tf.io.read_file(os.path.join(self.root, name, f))
        whole, _ = image_folder.decode(os.path.join(self.root, name, f), 0)
        for s in range(4):
          seed = tf.constant([s, 7], tf.int64)
          begin, extent = augment.crop_box(settings, tf.shape(whole), seed)
          got = augment.decode_and_crop(settings, encoded, seed).numpy()
          want = tf.slice(whole, begin, extent).numpy()
          self.assertEqual(got.shape, want.shape, msg=f)
          self.assertAllEqual(got[:, 1:-1], want[:, 1:-1], msg=f)
          self.assertAllClose(got, want, atol=16, msg=f)

  @parameterized.parameters(*augment.CROP_SAMPLERS)
  def test_fused_epochs_equal_decoded_ones_and_rebuild_alike(self, sampler):
    write_tree(self.root, subsampled=False)  # 4:4:4: no edge columns differ
    source = image_folder.image_folder(self.root, test_per_class=1)
    decoded = dataclasses.replace(source, read_encoded=None)
    settings = self.settings.replace(random_resized_crop_sampler=sampler)
    self.assertTrue(settings.decodes_with_crop(source))
    self.assertFalse(settings.decodes_with_crop(decoded))
    indices = np.arange(len(source.train_labels))

    def epoch(src, e, p=settings):
      return [x.numpy() for x, _ in p.train_dataset(src, indices, e, seed=3)]

    fused = epoch(source, 1)
    self.assertLen(fused, 2)
    for got, want in zip(fused, epoch(decoded, 1)):
      self.assertAllClose(got, want, atol=1e-5)
    for got, again in zip(fused, epoch(source, 1)):  # a resumed run rebuilds epoch 1
      self.assertAllEqual(got, again)
    self.assertNotAllClose(fused[0], epoch(source, 2)[0])
    other = [s for s in augment.CROP_SAMPLERS if s != sampler][0]  # the sampler is used
    self.assertNotAllClose(fused[0], epoch(
        source, 1, settings.replace(random_resized_crop_sampler=other))[0])

  @parameterized.parameters((tf.string, []), (tf.uint8, [None, None, 3]),
                            (tf.float32, [40, 56, 3]))
  def test_the_crop_keeps_the_channel_count_static(self, dtype, shape):
    # A crop by a drawn box loses the channel count from the static shape; without it
    # RandAugment's three-channel ops (recipes/data/randaugment.py) fall back to Model
    # Garden's slower ones (Equalize, AutoContrast, Sharpness, Cutout): 1.2 ms an
    # image more at 224 px in the pipeline (docs/input.md).
    settings = self.settings.replace(randaugment=(2, 9))

    @tf.function(input_signature=[tf.TensorSpec(shape, dtype)])
    def augmented(image):
      return augment.augment_image(settings, image, tf.constant([1, 2], tf.int64),
                                   (augment.randaugment_op(settings.randaugment),))

    self.assertEqual(augmented.get_concrete_function().output_shapes, [16, 16, 3])
    graph = augmented.get_concrete_function().graph.as_graph_def()
    ops = {n.op for f in graph.library.function for n in f.node_def} | {
        n.op for n in graph.node}
    self.assertIn("DenseBincount", ops)  # the pipeline's Equalize: one bincount of 3 channels
    self.assertNotIn("HistogramFixedWidth", ops)  # not Model Garden's, channel by channel

  @parameterized.parameters(False, True)
  def test_evaluation_decodes_only_the_centre_crop(self, subsampled):
    # Evaluation from image files decodes a JPEG inside its centred crop: the pixels of
    # decoding it whole, but (4:2:0) the crop's edge columns, whose chroma is upsampled
    # from the edge: after the resize, the outer output columns, by up to 16 levels.
    write_tree(self.root, subsampled)
    source = image_folder.image_folder(self.root, test_per_class=1)
    p = self.settings.replace(eval_crop_fraction=0.6, eval_resize_method="bicubic")
    got = np.concatenate([x for x, _ in p.eval_dataset(source, "train")])
    want = np.stack([p.eval_image(image) for image, _ in source.make_dataset("train")])
    self.assertEqual(got.shape[0], 8)  # 4 + 4 training images: two whole batches of 4
    levels = np.abs(got - want[:8]) * 0.25 * 255  # std 0.25 of x / 255
    self.assertAllClose(levels[:, :, 2:-2], np.zeros_like(levels[:, :, 2:-2]), atol=1e-3)
    self.assertLess(levels.max(), 16.0)
    if subsampled:  # the edge columns do differ (the test would see a whole decode)
      self.assertGreater(levels.max(), 1.0)
    else:
      self.assertLess(levels.max(), 1e-3)

  @parameterized.parameters(*RESIZES)
  def test_the_crop_resizes_by_its_method(self, method, antialias):
    # torchvision's crop (antialiased bilinear), Model Garden's (plain bilinear),
    # DeepMind's NFNet input (plain bicubic): the decoded box, resized so.
    write_tree(self.root, subsampled=False)
    settings = self.settings.replace(random_resized_crop_method=method,
                                     random_resized_crop_antialias=antialias)
    settings.check()
    encoded = tf.io.read_file(os.path.join(self.root, "a", "00.jpg"))
    seed = tf.constant([4, 2], tf.int64)
    box = augment.decode_and_crop(settings, encoded, seed)
    got = augment.augment_image(settings.replace(random_flip=False), encoded, seed)
    want = tf.image.resize(box, [16, 16], method=method, antialias=antialias)
    self.assertAllClose(got, want, atol=1e-4)
    others = [tf.image.resize(box, [16, 16], method=m, antialias=a)
              for m, a in RESIZES if (m, a) != (method, antialias)]
    for other in others:  # the four differ, so the test tells them apart
      self.assertNotAllClose(got, other, atol=1e-2)

  @parameterized.parameters((7, 10), (16, 16), (16, 5), (17, 9), (30, 40))
  def test_crops_no_larger_than_the_output_resize_alike_without_antialiasing(self, h, w):
    # resize_crop takes plain bilinear for them: the triangle kernel widens only when
    # it shrinks, so the pixels are the antialiased resize's, to float rounding.
    image = tf.constant(np.random.default_rng(h * w).integers(0, 256, [h, w, 3]), tf.uint8)
    got = augment.resize_crop(self.settings, image)
    self.assertAllClose(got, tf.image.resize(image, [16, 16], antialias=True), atol=1e-3)
    if max(h, w) > 16:  # shrunk on a side: antialiased, unlike plain bilinear
      self.assertNotAllClose(got, tf.image.resize(image, [16, 16]), atol=1e-2)

  @parameterized.parameters(((447, 900), 224, 0), ((448, 448), 224, 1),
                            ((900, 896), 448, 1), ((897, 896), 224, 2),
                            ((1792, 2000), 224, 3), ((5000, 5000), 224, 3))
  def test_the_dct_scaling_leaves_the_box_at_least_the_output(self, extent, size, index):
    self.assertEqual(int(augment.dct_ratio_index(tf.constant(extent), size)), index)
    r = augment.DCT_RATIOS[index]
    self.assertGreaterEqual(min(extent) // r, size)
    if index < 3:  # the next scaling would leave it short
      self.assertLess(min(extent) // (2 * r), size)

  @parameterized.parameters(((0, 0), (96, 128)), ((17, 30), (64, 70)), ((5, 3), (40, 41)))
  def test_a_scaled_box_is_the_scaled_decode_sliced(self, begin, extent):
    """By its definition: libjpeg's whole image decoded at 1/r, sliced at begin // r,
    extent // r (4:4:4 chroma, so the cropped decode's edge columns agree too)."""
    image = self.photo([100, 140])
    encoded = tf.io.encode_jpeg(image, quality=90, chroma_downsampling=False)
    size = 20
    r = augment.DCT_RATIOS[int(augment.dct_ratio_index(tf.constant(extent), size))]
    self.assertGreater(r, 1)
    got = augment.decode_and_crop_scaled(encoded, tf.constant(begin), tf.constant(extent), size)
    whole = tf.io.decode_jpeg(encoded, channels=3, ratio=r)
    top, left = begin[0] // r, begin[1] // r
    self.assertAllEqual(got, whole[top:top + extent[0] // r, left:left + extent[1] // r])

  def test_scaled_decodes_resize_to_nearly_the_same_pixels(self):
    """Decoded at 1/2 or 1/4 in the IDCT, then resized to 224 (antialiased): PSNR over
    30 dB against the unscaled crop's resize on a textured photo-like image (measured
    2026-11-27: 41.3 dB at 1/2, 33.1 dB at 1/4, where libjpeg's scaled IDCT, a sharper
    filter than the resize's triangle, does most of the shrinking: docs/input.md)."""
    settings = self.settings.replace(image_size=224)
    encoded = tf.io.encode_jpeg(self.photo([1000, 1300]), quality=90)
    for begin, extent in (((37, 51), (600, 700)), ((37, 51), (901, 1170))):
      begin, extent = tf.constant(begin), tf.constant(extent)
      plain = tf.image.decode_and_crop_jpeg(encoded, tf.concat([begin, extent], 0),
                                            channels=3)
      scaled = augment.decode_and_crop_scaled(encoded, begin, extent, 224)
      self.assertLess(scaled.shape[0], plain.shape[0] // 2 + 1)
      error = augment.resize_crop(settings, scaled) - augment.resize_crop(settings, plain)
      psnr = 10 * np.log10(255.0 ** 2 / np.mean(np.square(error.numpy())))
      self.assertGreater(psnr, 30.0)

  def test_the_pipeline_decodes_large_boxes_scaled(self):
    settings = self.settings.replace(image_size=8, random_resized_crop=(0.9, 1.0),
                                     random_resized_crop_dct_scaling=True)
    encoded = tf.io.encode_jpeg(self.photo([40, 48]), quality=90)
    seed = tf.constant([3, 4], tf.int64)
    begin, extent = augment.crop_box(settings, tf.constant([40, 48, 3]), seed)
    r = augment.DCT_RATIOS[int(augment.dct_ratio_index(extent, 8))]
    self.assertGreater(r, 1)
    got = augment.decode_and_crop(settings, encoded, seed)
    self.assertAllEqual(tf.shape(got)[:2], extent[:2] // r)
    unscaled = augment.decode_and_crop(
        settings.replace(random_resized_crop_dct_scaling=False), encoded, seed)
    self.assertAllEqual(tf.shape(unscaled)[:2], extent[:2])

  @staticmethod
  def photo(shape):
    """A smooth colour field with grain: a JPEG of photo-like spectrum, uint8."""
    rng = np.random.default_rng(shape[0])
    field = tf.image.resize(rng.uniform(0, 255, [12, 16, 3]), shape, method="bicubic")
    grain = rng.normal(0, 8, shape + [3])
    return tf.cast(tf.clip_by_value(field + grain, 0, 255), tf.uint8)

  def test_bad_resize_settings_name_themselves(self):
    with self.assertRaisesRegex(ValueError, "random_resized_crop_antialias='no' must be"):
      self.settings.replace(random_resized_crop_antialias="no").check()
    with self.assertRaisesRegex(ValueError, "random_resized_crop_dct_scaling=1 must be"):
      self.settings.replace(random_resized_crop_dct_scaling=1).check()
    with self.assertRaisesRegex(ValueError, "random_resized_crop_method='area'; use one of "
                                "bilinear, bicubic"):
      self.settings.replace(random_resized_crop_method="area").check()


if __name__ == "__main__":
  tf.test.main()
