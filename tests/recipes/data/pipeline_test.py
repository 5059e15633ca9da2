"""The input pipeline: normalisation, per-epoch determinism, padded evaluation."""

import socket

import numpy as np
import tensorflow as tf

from recipes.data import pipeline
from recipes.data import source as source_lib
from recipes.errors import ConfigError
from zoo import card as card_lib


def toy_source(n_train=20, n_test=7, size=6):
  rng = np.random.default_rng(0)
  images = {"train": rng.integers(0, 256, [n_train, size, size, 3], dtype=np.uint8),
            "test": rng.integers(0, 256, [n_test, size, size, 3], dtype=np.uint8)}
  labels = {"train": np.arange(n_train, dtype=np.int32) % 3,
            "test": np.arange(n_test, dtype=np.int32) % 3}

  def make_dataset(split, indices=None):
    idx = np.arange(len(labels[split])) if indices is None else indices
    return tf.data.Dataset.from_tensor_slices((images[split][idx], labels[split][idx]))

  source = source_lib.Source("toy", ["a", "b", "c"], labels["train"], labels["test"],
                             make_dataset)
  return source, images


def float_batches(**settings):
  """An InputPipeline handing float32 batches, normalised on the host: the formulas
  here are checked on unrounded pixels (the default's uint8 batches are these rounded:
  uint8_batches_test)."""
  return pipeline.InputPipeline(uint8_batches=False, **settings)


class PipelineTest(tf.test.TestCase):

  def test_normalisation_without_augmentation(self):
    source, images = toy_source()
    p = float_batches(batch_size=4, image_size=6, mean=(0.5, 0.4, 0.3),
                               std=(0.2, 0.25, 0.5))
    got, _ = next(iter(p.eval_dataset(source)))
    want = (images["test"][:4] / 255.0 - [0.5, 0.4, 0.3]) / [0.2, 0.25, 0.5]
    self.assertAllClose(got, want, atol=1e-5)

  def test_normalisation_error_against_the_exact_value(self):
    """The one multiply-add is not bit-identical to the per-image three passes it
    replaced ((x / 255 - mean) / std in float32): for ImageNet's statistics the two
    differ in the last bit of 562 of the 768 (pixel value, channel) pairs. Both are
    within 4e-7 of the exact value (float64), which is what docs/input.md states."""
    mean, std = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
    p = float_batches(batch_size=1, image_size=6, mean=mean, std=std)
    pixels = np.repeat(np.arange(256, dtype=np.float32)[:, None], 3, axis=1)
    got = p._normalize(tf.constant(pixels)).numpy()  # pylint: disable=protected-access
    exact = (pixels.astype(np.float64) / 255 - mean) / std
    self.assertLess(np.abs(got - exact).max(), 4e-7)
    three = (pixels / np.float32(255) - np.float32(mean)) / np.float32(std)
    self.assertEqual(int(np.sum(got != three)), 562)

  def test_training_normalisation(self):
    # Normalised per batch, after augmentation: still (x / 255 - mean) / std of
    # each image. Unaugmented, same size: each output is one of the source images.
    source, images = toy_source()
    mean, std = (0.5, 0.4, 0.3), (0.2, 0.25, 0.5)
    p = float_batches(batch_size=5, image_size=6, mean=mean, std=std)
    got = np.concatenate([x for x, _ in p.train_dataset(source, np.arange(20), 0, 0)])
    want = (images["train"] / 255.0 - mean) / std
    order = lambda x: np.argsort(x.reshape(len(x), -1)[:, 0] + 10 * x.reshape(len(x), -1)[:, 1])
    self.assertEqual(got.shape, want.shape)
    self.assertAllClose(got[order(got)], want[order(want)], atol=1e-5)

  def test_epochs_are_reproducible_and_differ(self):
    source, _ = toy_source()
    p = float_batches(batch_size=4, image_size=8, random_crop_padding=2,
                               random_flip=True)
    indices = np.arange(0, 20, 2)

    def epoch(e, seed=0):
      return [(x.numpy(), y.numpy()) for x, y in p.train_dataset(source, indices, e, seed)]

    first = epoch(0)
    self.assertLen(first, 10 // 4)  # drop_remainder
    self.assertEqual(first[0][0].shape, (4, 8, 8, 3))
    again = epoch(0)
    for (x1, y1), (x2, y2) in zip(first, again):
      self.assertAllEqual(x1, x2)
      self.assertAllEqual(y1, y2)
    other = epoch(1)
    self.assertNotAllEqual(np.concatenate([y for _, y in first]),
                           np.concatenate([y for _, y in other]))
    # Only the selected examples appear.
    seen = np.concatenate([y for _, y in first + other])
    self.assertTrue(set(seen.tolist()) <= set(source.train_labels[indices].tolist()))

  def test_eval_is_padded_to_whole_batches(self):
    source, _ = toy_source(n_test=7)
    p = float_batches(batch_size=4, image_size=6)
    labels = np.concatenate([y.numpy() for _, y in p.eval_dataset(source)])
    self.assertLen(labels, 8)
    self.assertEqual(labels.tolist().count(pipeline.PAD_LABEL), 1)
    self.assertAllEqual(labels[:7], source.test_labels)

  def test_echo_placements(self):
    source, _ = toy_source(n_train=16)
    kwargs = dict(batch_size=4, image_size=8, random_crop_padding=2, random_flip=True,
                  echo_factor=2, echo_shuffle_buffer=1)  # no shuffle: copies adjacent

    def batches(placement):
      p = float_batches(echo_placement=placement, **kwargs)
      self.assertEqual(p.steps_per_epoch(16), 8)
      out = [(x.numpy(), y.numpy()) for x, y in p.train_dataset(source, np.arange(16), 0, 0)]
      self.assertLen(out, 8)
      return out

    before = batches("before_augmentation")
    x, y = before[0]
    self.assertEqual(y[0], y[1])                 # the same example twice ...
    self.assertNotAllClose(x[0], x[1])           # ... augmented two ways
    x, y = batches("after_augmentation")[0]
    self.assertAllEqual(x[0], x[1])              # the same augmented image twice
    out = batches("batch")
    self.assertAllEqual(out[0][0], out[1][0])    # the same batch twice
    with self.assertRaisesRegex(ValueError, "echo_placement=.late.; choose one of"):
      float_batches(echo_placement="late")

  def test_fractional_echo_gives_the_expected_epoch(self):
    source, _ = toy_source(n_train=20)
    p = float_batches(batch_size=4, image_size=6, echo_factor=1.5)
    self.assertEqual(p.steps_per_epoch(20), 7)   # floor(30 / 4)
    self.assertLen(list(p.train_dataset(source, np.arange(20), 3, 1)), 7)

  def test_randaugment_from_model_garden(self):
    source, _ = toy_source(size=16)
    p = float_batches(batch_size=4, image_size=16, randaugment=(2, 5), mean=(0,) * 3,
                               std=(1,) * 3)
    x, _ = next(iter(p.train_dataset(source, np.arange(8), 0, 0)))
    self.assertEqual(x.shape, (4, 16, 16, 3))
    self.assertAllInRange(x, 0.0, 1.0)

  def mixed_and_plain(self, **mix):
    source, _ = toy_source(n_train=24, size=8)
    kwargs = dict(batch_size=8, image_size=8, mean=(0,) * 3, std=(1,) * 3)
    plain = float_batches(**kwargs)
    mixed = float_batches(**kwargs, **mix)
    self.assertTrue(mixed.mixes)
    self.assertFalse(plain.mixes)
    take = lambda p, e: [(x.numpy(), y.numpy())
                         for x, y in p.train_dataset(source, np.arange(24), e, 7)]
    return take(plain, 0), take(mixed, 0), take(mixed, 0), take(mixed, 1)

  def test_mixup_follows_zhang_et_al(self):
    plain, mixed, again, other = self.mixed_and_plain(mixup_alpha=0.4)
    for (x, y), (xm, ym), (xa, ya) in zip(plain, mixed, again):
      self.assertEqual(ym.shape, (8, 3))
      self.assertAllClose(ym.sum(axis=1), np.ones(8), atol=1e-6)
      self.assertAllEqual(xm, xa)  # a rebuilt epoch mixes the same way
      self.assertAllEqual(ym, ya)
      pair = y[::-1]  # Model Garden pairs each example with the batch reversed
      for i in range(8):
        if y[i] == pair[i]:
          continue
        lam = ym[i, y[i]]  # x~ = lam x_i + (1 - lam) x_j, y~ = lam y_i + (1 - lam) y_j
        self.assertAllClose(ym[i, pair[i]], 1 - lam, atol=1e-6)
        self.assertAllClose(xm[i], lam * x[i] + (1 - lam) * x[::-1][i], atol=1e-5)
    self.assertNotAllClose(mixed[0][1], other[0][1])  # new draws each epoch

  def test_cutmix_follows_yun_et_al(self):
    plain, mixed, _, _ = self.mixed_and_plain(cutmix_alpha=1.0)
    for (x, y), (xm, ym) in zip(plain, mixed):
      for i in range(8):
        from_self = np.all(xm[i] == x[i], axis=-1)
        from_pair = np.all(xm[i] == x[::-1][i], axis=-1)
        self.assertTrue(np.all(from_self | from_pair))  # every pixel from one of two
        if y[i] != y[::-1][i]:
          # lam = 1 - box area / image area for the box as drawn; the pasted box is
          # that box clipped to the image, so the pixels kept are at least lam.
          lam = ym[i, y[i]]
          self.assertAllClose(ym[i, y[::-1][i]], 1 - lam, atol=1e-6)
          self.assertLessEqual(lam, np.mean(from_self) + 1e-6)
          self.assertGreaterEqual(lam, 0.0)

  def test_remix_gets_the_training_counts_and_each_batchs_seed(self):
    calls = []

    class Recording:
      """A stand-in mixer: records what the pipeline gives it (the rule itself is
      //tests/tricks:remix_test's)."""

      def mix(self, images, labels, class_counts, seed):
        calls.append(np.asarray(class_counts))
        # Every pixel set to a hash of the batch's seed: the test reads the seed back.
        marks = tf.cast((seed[0] % 100_003) + 100_003 * (seed[1] % 7), images.dtype)
        return tf.zeros_like(images) + marks, tf.one_hot(labels, 3)

    source, _ = toy_source(n_train=24, size=8)
    indices = np.array([0, 3, 6, 9, 12, 15, 18, 21, 1, 4, 7, 2])  # 8, 3, 1 a class
    kwargs = dict(batch_size=4, image_size=8, mean=(0,) * 3, std=(1,) * 3)
    remixed = float_batches(**kwargs, remix=Recording())
    self.assertTrue(remixed.mixes)
    take = lambda p, e: [(x.numpy(), y.numpy())
                         for x, y in p.train_dataset(source, indices, e, 7)]
    first, again, other = take(remixed, 0), take(remixed, 0), take(remixed, 1)
    plain = take(float_batches(**kwargs), 0)
    self.assertAllEqual(calls[0], [8, 3, 1])  # the training split's counts
    for (x, _), (xa, _), (xp, _) in zip(first, again, plain):
      self.assertAllEqual(x, xa)  # a rebuilt epoch draws alike
      self.assertEqual(x.shape, xp.shape)
    marks = [float(x.flat[0]) for x, _ in first + other]
    self.assertLen(marks, 6)
    self.assertLen(set(marks), 6)  # each batch of each epoch: its own draws
    with self.assertRaisesRegex(ValueError, "remix mixes the batch itself"):
      float_batches(**kwargs, remix=Recording(), mixup_alpha=0.2)

  def test_card_fills_what_is_left_unset(self):
    f0 = card_lib.ModelCard(192, 256, 256 / 288, "bicubic", (0.1, 0.2, 0.3), (1.0, 1.0, 1.0),
                            (4, 5), None, test_crop_padding=32)
    # Open input, trained at 128: tested at 128 * 256 / 192, on S / (S + 32) for that S.
    got, taken = float_batches(image_size=128).with_card(f0)
    self.assertEqual(got.eval_image_size, 171)
    self.assertAllClose(got.eval_crop_fraction, 171 / 203)
    self.assertEqual((got.eval_resize_method, got.mean, got.randaugment),
                     ("bicubic", (0.1, 0.2, 0.3), (4, 5)))
    self.assertEqual(set(taken), {"eval_image_size", "eval_crop_fraction",
                                  "eval_resize_method", "mean", "std", "randaugment"})
    # A fixed input size wins; bound values stay; full-frame data keeps whole images.
    got, taken = float_batches(mean=(0.5, 0.5, 0.5)).with_card(
        f0, model_size=32, full_frame=True)
    self.assertEqual((got.image_size, got.eval_image_size, got.eval_crop_fraction),
                     (32, 32, 1.0))
    self.assertEqual(got.mean, (0.5, 0.5, 0.5))
    self.assertNotIn("mean", taken)
    unresolved = float_batches(image_size=16)
    self.assertIsNone(unresolved.eval_image_size)  # the Gin-built one is left as built

  def test_grey_pipeline_feeds_the_luma_of_the_augmented_images(self):
    source, images = toy_source()
    augment = dict(batch_size=4, image_size=8, random_crop_padding=2, random_flip=True)
    rgb = float_batches(**augment, mean=(0.0,) * 3, std=(1.0,) * 3)
    grey = float_batches(**augment, mean=(0.0,), std=(1.0,))
    luma = np.asarray([0.299, 0.587, 0.114])
    for (a, y), (b, z) in zip(rgb.train_dataset(source, np.arange(20), 1, 5),
                              grey.train_dataset(source, np.arange(20), 1, 5)):
      self.assertEqual(b.shape, (4, 8, 8, 1))
      self.assertAllEqual(y, z)  # the same examples, augmented alike
      self.assertAllClose(b[..., 0], np.asarray(a) @ luma, atol=1e-5)
    got, labels = next(iter(grey.eval_dataset(source)))  # 7 test images: one padded
    self.assertEqual(got.shape, (4, 8, 8, 1))
    self.assertAllClose(got[0, ..., 0], card_lib.eval_preprocess(
        images["test"][0], 8, 1.0, (0.0,), (1.0,))[..., 0], atol=1e-5)
    padded = list(grey.eval_dataset(source))[-1]
    self.assertEqual(padded[0].shape, (4, 8, 8, 1))
    self.assertEqual(padded[1].numpy().tolist()[-1], pipeline.PAD_LABEL)
    # From a card: its statistics reduced to one value each for a one-channel model.
    card = card_lib.ModelCard(8, 8, 1.0, "bilinear", (0.1, 0.2, 0.3), (0.5, 0.6, 0.7))
    got, taken = float_batches(image_size=8).with_card(card, channels=1)
    self.assertEqual((taken["mean"], taken["std"]), card_lib.grey_statistics(card.mean,
                                                                             card.std))
    got.check()
    # Bound RGB statistics (a data set's) are reduced alike; one-value ones are kept.
    bound = float_batches(image_size=8, mean=(0.3, 0.3, 0.3), std=(0.4, 0.4, 0.4))
    got, taken = bound.with_card(card, channels=1)
    self.assertAllClose(got.mean + got.std, (0.3, 0.4))
    self.assertIn("mean", taken)
    got, taken = float_batches(image_size=8, mean=(0.3,), std=(0.4,)).with_card(
        card, channels=1)
    self.assertEqual((got.mean, got.std), ((0.3,), (0.4,)))
    self.assertNotIn("mean", taken)
    with self.assertRaisesRegex(ValueError, "need 3 values each \\(1 each for a grey"):
      float_batches(image_size=8, mean=(0.1,), std=(0.5, 0.5, 0.5)).with_card(
          card)[0].check()

  def test_cached_epochs_equal_uncached_ones(self):
    source, _ = toy_source()
    indices = np.arange(0, 20, 2)
    epochs = {}
    for cache in (True, False):
      p = float_batches(batch_size=4, image_size=8, random_crop_padding=2,
                                 random_flip=True, cache=cache)
      epochs[cache] = [[(x.numpy(), y.numpy()) for x, y in p.train_dataset(source, indices, e, 3)]
                       for e in (0, 1)]
    for (a, b), (c, d) in zip(sum(epochs[True], []), sum(epochs[False], [])):
      self.assertAllEqual(a, c)
      self.assertAllEqual(b, d)
    auto = float_batches(cache="auto", cache_limit_mb=1)
    self.assertTrue(auto.caches(20, 64))  # 20 x 64 x 64 x 3 x 4 bytes: 0.9 MiB
    self.assertFalse(auto.caches(30, 64))  # 1.4 MiB
    self.assertTrue(auto.caches(85, 64, value_bytes=1))  # uint8: 0.996 MiB
    self.assertFalse(auto.caches(86, 64, value_bytes=1))  # 1.008 MiB

  def test_the_evaluation_cache_is_sized_by_what_it_holds(self):
    # 7 test images of 128^2: 0.34 MiB as uint8, 1.38 MiB as float32; the limit 1 MiB.
    source, _ = toy_source(n_train=4, n_test=7, size=128)
    for uint8_batches, cached in ((True, True), (False, False)):
      p = pipeline.InputPipeline(
          batch_size=4, image_size=128, eval_image_size=128, eval_crop_fraction=1.0,
          eval_resize_method="bilinear", mean=(0.5,) * 3, std=(0.25,) * 3, cache="auto",
          randaugment=(), cache_limit_mb=1, uint8_batches=uint8_batches)
      p.eval_dataset(source)
      self.assertEqual(any(key[1] == "eval" for key in p._cached), cached,
                       msg=f"uint8_batches={uint8_batches}")

  def test_bad_settings_after_resolution(self):
    for fields, message in ((dict(eval_resize_method="nearest"), "eval_resize_method"),
                            (dict(randaugment=(2, 5, 1)), "randaugment"),
                            (dict(shuffle_buffer=0), "shuffle_buffer=0"),
                            (dict(batch_size=0), "batch_size=0")):
      p = float_batches(image_size=8, **fields)
      with self.assertRaisesRegex(ValueError, message):
        p.with_card(p.plain_card())[0].check()

  def test_negative_alpha_is_refused(self):
    with self.assertRaisesRegex(ValueError, "must be >= 0"):
      float_batches(mixup_alpha=-1.0)


  def constant_epoch(self, value, **fields):
    """One training epoch of 8 constant images (pixel `value`), unnormalised."""
    images = np.full([8, 16, 16, 3], value, np.uint8)
    labels = np.arange(8, dtype=np.int32) % 2
    make = lambda split, indices=None: tf.data.Dataset.from_tensor_slices(
        (images[indices if indices is not None else slice(None)],
         labels[indices if indices is not None else slice(None)]))
    source = source_lib.Source("constant", ["a", "b"], labels, labels, make)
    p = float_batches(batch_size=8, image_size=16, mean=(0,) * 3, std=(1,) * 3,
                               **fields)
    x, _ = next(iter(p.train_dataset(source, np.arange(8), 0, 0)))
    return x.numpy() * 255

  def test_crop_padding_fill(self):
    # Reflection keeps the constant; a constant fill brings its value in at the border,
    # on a band as wide as the crop's offset (torchvision's RandomCrop(padding=4)).
    self.assertAllClose(self.constant_epoch(200, random_crop_padding=4), np.full(
        [8, 16, 16, 3], 200.0), atol=1e-3)
    for fill in (0, 127.5):
      x = self.constant_epoch(200, random_crop_padding=4, random_crop_fill=fill)
      values = np.unique(np.round(x, 3))
      self.assertAllClose(values, [fill, 200.0], atol=1e-3)
      for image in x:
        filled = np.abs(image[..., 0] - fill) < 1e-3
        rows, cols = filled.all(axis=1), filled.all(axis=0)
        self.assertTrue(((filled == (rows[:, None] | cols[None, :])).all()),
                        "the fill is whole rows and columns")
        self.assertLessEqual(rows.sum(), 4)
        self.assertLessEqual(cols.sum(), 4)

  def test_cutout_is_one_clipped_square_of_zeros(self):
    x = self.constant_epoch(255, cutout=8)
    for image in x:
      hole = image[..., 0] == 0
      rows, cols = np.flatnonzero(hole.any(axis=1)), np.flatnonzero(hole.any(axis=0))
      self.assertTrue(hole[rows.min():rows.max() + 1, cols.min():cols.max() + 1].all())
      self.assertEqual(hole.sum(), len(rows) * len(cols))  # a rectangle
      # A side of 8 around a centre anywhere in the image: 4 to 8 pixels a side.
      self.assertBetween(len(rows), 4, 8)
      self.assertBetween(len(cols), 4, 8)
      self.assertTrue((image[~hole] == 255).all())

  def test_autoaugment_from_model_garden(self):
    x = self.constant_epoch(100, autoaugment="reduced_cifar10")
    self.assertEqual(x.shape, (8, 16, 16, 3))
    self.assertAllInRange(x, 0.0, 255.0)
    with self.assertRaisesRegex(ValueError, "not a policy"):
      float_batches(autoaugment="cifar11")
    p = float_batches(autoaugment="reduced_cifar10", autoaugment_translate=16.1)
    self.assertEqual(p._autoaugment.translate_const, 16.1)  # pylint: disable=protected-access
    with self.assertRaisesRegex(ValueError, "autoaugment_translate=0 must be"):
      float_batches(autoaugment="reduced_cifar10", autoaugment_translate=0)

  def test_autoaugment_pil_cifar10_policy(self):
    """'cifar10_pil' runs the PIL port's policy (recipes/data/autoaugment_pil.py, tested
    op by op there) inside the training pipeline."""
    x = self.constant_epoch(100, autoaugment="cifar10_pil")
    self.assertEqual(x.shape, (8, 16, 16, 3))
    self.assertAllInRange(x, 0.0, 255.0)
    p = float_batches(autoaugment="cifar10_pil")
    self.assertLen(p._autoaugment.policy, 25)  # pylint: disable=protected-access

  def test_bad_fill_and_cutout(self):
    for fields, message in ((dict(random_crop_fill=-1), "random_crop_fill=-1"),
                            (dict(random_crop_fill="zero"), "random_crop_fill='zero'"),
                            (dict(cutout=7), "cutout=7 must be an even"),
                            (dict(cutout=-2), "cutout=-2")):
      p = float_batches(image_size=8, **fields)
      with self.assertRaisesRegex(ValueError, message):
        p.with_card(p.plain_card())[0].check()


  def test_random_resized_crop_is_a_slice_of_the_source_image(self):
    # Area fraction 1/4 at aspect 1 of a 32x32 image: a 16x16 window of the source,
    # resized to 16 (identity), anywhere in the image; the image is not resized first.
    cols = np.tile(np.arange(32, dtype=np.uint8)[None, :, None] * 8, [32, 1, 3])
    rows = np.transpose(cols, [1, 0, 2])
    images = np.stack([cols, rows] * 4)
    labels = np.zeros(8, np.int32)
    make = lambda split, indices=None: tf.data.Dataset.from_tensor_slices(
        (images[indices if indices is not None else slice(None)],
         labels[indices if indices is not None else slice(None)]))
    source = source_lib.Source("grid", ["a"], labels, labels, make)
    p = float_batches(batch_size=8, image_size=16, mean=(0,) * 3, std=(1,) * 3,
                               random_resized_crop=(0.25, 0.25),
                               random_resized_crop_ratio=(1.0, 1.0))
    x = [b.numpy() * 255 for b, _ in p.train_dataset(source, np.arange(8), 0, 0)][0]
    again = [b.numpy() * 255 for b, _ in p.train_dataset(source, np.arange(8), 0, 0)][0]
    self.assertAllClose(x, again)  # drawn from (seed, epoch, position)
    offsets = set()
    for image in x:  # shuffled: a column ramp or a row ramp
      varying = image[0, :, 0] if np.ptp(image[0, :, 0]) > 0 else image[:, 0, 0]
      start = varying[0] / 8
      self.assertAllClose(varying, (start + np.arange(16)) * 8, atol=1e-3)
      offsets.add(float(start))
    self.assertGreater(len(offsets), 1)

  def test_color_jitter_from_model_garden(self):
    plain = self.constant_epoch(100)
    jittered = self.constant_epoch(100, color_jitter=(0.4, 0.4, 0.4))
    self.assertAllInRange(jittered, 0.0, 255.0)
    self.assertNotAllClose(plain, jittered)
    # A grey image keeps its saturation and contrast: only brightness moves, by <= 40%.
    self.assertAllInRange(jittered, 60.0 - 1, 140.0 + 1)
    for fields, message in ((dict(color_jitter=(0.4, 0.4)), "color_jitter"),
                            (dict(random_resized_crop=(0.5, 0.1)), "random_resized_crop"),
                            (dict(random_resized_crop_ratio=(0, 1)), "ratio")):
      p = float_batches(image_size=8, **fields)
      with self.assertRaisesRegex(ValueError, message):
        p.with_card(p.plain_card())[0].check()



class PipelineChecksTest(tf.test.TestCase):

  def test_a_batch_needs_one_step_an_epoch_echoes_counted(self):
    small = float_batches(batch_size=20)
    with self.assertRaisesRegex(ConfigError, r"^the training split has 5 examples, fewer "
                                "than one global batch of 20; lower InputPipeline"):
      small.check_batch(5, replicas=1)
    # Echoed 4 times before augmentation: 20 examples an epoch, one batch.
    float_batches(batch_size=20, echo_factor=4).check_batch(5, replicas=1)
    with self.assertRaisesRegex(ConfigError, r"5 examples \(echoed x3: before_augmentation"
                                r"\), fewer than one global batch of 20; .* raise "
                                "InputPipeline.echo_factor"):
      float_batches(batch_size=20, echo_factor=3).check_batch(5, replicas=1)
    with self.assertRaisesRegex(ConfigError, "batch_size=6 does not split over 4 replicas"):
      float_batches(batch_size=6).check_batch(100, replicas=4)

  def test_data_service_must_answer(self):
    pipeline.data_service_answers(None)
    listening = socket.create_server(("localhost", 0))
    port = listening.getsockname()[1]
    pipeline.data_service_answers(f"grpc://localhost:{port}")  # something answers
    listening.close()  # now nothing listens on that port
    with self.assertRaisesRegex(ConfigError, rf"InputPipeline.data_service='grpc://localhost:"
                                rf"{port}': no dispatcher answers there \(.*\); start one"):
      pipeline.data_service_answers(f"grpc://localhost:{port}", timeout=2)


if __name__ == "__main__":
  tf.test.main()
