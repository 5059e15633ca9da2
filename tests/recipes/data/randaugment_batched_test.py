"""RandAugment over batches: every op and sign, on a batch, gives Model Garden's op on
each image; a mixed batch of two layers gives each image's ops in turn; the draws have
Model Garden's distribution; the pipeline runs it over its batches."""

from unittest import mock

from absl.testing import parameterized
import numpy as np
from scipy import stats
import tensorflow as tf

from official.vision.ops import augment as mg_augment
from recipes.data import augment
from recipes.data import pipeline
from recipes.data import randaugment
from recipes.data import randaugment_batched
from recipes.data import source as source_lib

OPS = randaugment_batched.OPS
REPLACE = [128] * 3
THEIR_WARPS = {"Rotate": mg_augment.wrapped_rotate, "ShearX": mg_augment.shear_x,
               "ShearY": mg_augment.shear_y, "TranslateX": mg_augment.translate_x,
               "TranslateY": mg_augment.translate_y}


def images(shape, seed=0):
  return tf.constant(np.random.default_rng(seed).integers(0, 256, shape), tf.uint8)


def model_gardens(image, name, sign, centre, magnitude):
  """Model Garden's op `name` on one image as its RandAugment calls it (the function
  and arguments of its `_parse_policy_info`, replace value included), the level
  negated for sign 1 (a float32 tensor, as its `_randomly_negate_tensor` makes it),
  Cutout at `centre`."""
  if name in THEIR_WARPS:
    level = tf.constant(randaugment_batched.argument(name, sign, magnitude, 100.))
    return THEIR_WARPS[name](image, level, REPLACE)
  func, _, args = mg_augment._parse_policy_info(  # pylint: disable=protected-access
      name, 0.5, magnitude, REPLACE, 40., 100.)
  if name == "Cutout":  # its two draws of the centre: row, then column
    with mock.patch.object(tf.random, "uniform", side_effect=[centre[0], centre[1]]):
      return func(image, None, *args)[0]
  return func(image, None, *args)[0]


def drawn_for(ops, signs, centres):
  return tf.constant(np.stack([ops, signs, centres[:, 0], centres[:, 1]], 1), tf.int32)


class BatchedRandAugmentTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.parameters(([4, 33, 57, 3], 9), ([3, 64, 48, 3], 5), ([2, 20, 20, 3], 10),
                            ([3, 64, 48, 3], 2), ([2, 40, 36, 3], 15))
  def test_each_op_on_a_batch_is_model_gardens_on_each_image(self, shape, magnitude):
    # At magnitude 9 TranslateY's 90 px exceed 33 rows (the warp's index map), at 5 the
    # 50 px fit (the window); 20 x 20 at 10: every shift beyond the side. At 2 Cutout's
    # 8 px blocks lie inside the image, but the first, cut by the corner; 15 is beyond
    # Model Garden's 10 (DeepMind's NFNet-F2 and up).
    augmenter = randaugment_batched.BatchedRandAugment(1, magnitude)
    x = images(shape, seed=shape[1])
    n = shape[0]
    centres = np.stack([np.arange(n) * 23 % shape[1], np.arange(n) * 31 % shape[2]], 1)
    centres[0] = 0  # a block cut by the corner
    for op, name in enumerate(OPS):
      for sign in ((0, 1) if name in randaugment_batched.SIGNED else (0,)):
        drawn = drawn_for(np.full(n, op), np.full(n, sign), centres)
        got = augmenter.apply_layer(x, drawn)
        for i in range(n):
          want = model_gardens(x[i], name, sign, centres[i], float(magnitude))
          self.assertAllEqual(got[i], want, msg=f"{name} sign {sign} image {i}")

  def test_a_mixed_batch_of_two_layers_is_each_images_ops_in_turn(self):
    augmenter = randaugment_batched.BatchedRandAugment(2, 9)
    n, height, width = 48, 40, 36
    x = images([n, height, width, 3], seed=1)
    drawn = np.stack([augmenter.draws(tf.constant([3, i], tf.int64), height, width)
                      for i in range(n)])
    # The first layer: every (op, sign) and none, each on several images.
    drawn[:, 0, 0], drawn[:, 0, 1] = np.arange(n) % 17, np.arange(n) // 17 % 2
    drawn = tf.constant(drawn)
    got = tf.function(augmenter.distort)(x, drawn)  # as tf.data runs it: a graph
    for i in range(n):
      want = x[i]
      for layer in range(2):
        op, sign, row, column = drawn[i, layer].numpy()
        if op != randaugment_batched.NONE:
          want = model_gardens(want, OPS[op], sign, (row, column), 9.)
      self.assertAllEqual(got[i], want, msg=f"image {i}")

  def test_the_draws_have_model_gardens_distribution(self):
    # Op uniform over the 16 ops and none, sign a fair coin, Cutout's centre uniform
    # over rows and columns: chi-square tests at 1e-3 over 2 x 2000 draws. Their power:
    # drawing from 16 values instead of 17 (no "none") gives a chi-square statistic of
    # about 250 here, far past the 1e-3 critical value (39.3 at 16 df).
    augmenter = randaugment_batched.BatchedRandAugment(2, 9)
    drawn = tf.map_fn(lambda i: augmenter.draws(tf.stack([tf.constant(5, tf.int64), i]),
                                                  7, 5),
                      tf.range(2000, dtype=tf.int64), fn_output_signature=tf.int32)
    drawn = drawn.numpy().reshape(-1, randaugment_batched.DRAWS)
    for column, values in ((0, 17), (1, 2), (2, 7), (3, 5)):
      counts = np.bincount(drawn[:, column], minlength=values)
      self.assertLen(counts, values)
      self.assertGreater(stats.chisquare(counts).pvalue, 1e-3, msg=f"draw {column}")
    self.assertEqual(stats.chisquare(np.bincount(drawn[:, 0] % 16)).pvalue < 1e-3, True)
    again = augmenter.draws(tf.constant([5, 0], tf.int64), 7, 5)
    self.assertAllEqual(again, drawn[:2])  # stateless: the seed's draws again
    other = augmenter.draws(tf.constant([6, 0], tf.int64), 7, 5)
    self.assertNotAllEqual(other, drawn[:2])

  def test_prob_to_apply_draws_none_as_model_garden_does(self):
    # Model Garden keeps the image where uniform() >= prob_to_apply: P(none) = 1 - p +
    # p / 17. Binomial test at 1e-3 over 4000 draws.
    augmenter = randaugment_batched.BatchedRandAugment(1, 9, prob_to_apply=0.3)
    drawn = tf.map_fn(lambda i: augmenter.draws(tf.stack([tf.constant(1, tf.int64), i]),
                                                  8, 8),
                      tf.range(4000, dtype=tf.int64), fn_output_signature=tf.int32)
    none = int(np.sum(drawn.numpy()[:, 0, 0] == randaugment_batched.NONE))
    self.assertGreater(stats.binomtest(none, 4000, 0.7 + 0.3 / 17).pvalue, 1e-3)

  @parameterized.parameters(
      (dict(num_layers=-1), "num_layers"), (dict(num_layers=2.0), "num_layers"),
      (dict(magnitude="9"), "magnitude"), (dict(magnitude=-1), "magnitude"),
      (dict(magnitude=float("nan")), "magnitude"), (dict(magnitude=float("inf")), "magnitude"))
  def test_bad_settings_are_one_line(self, kwargs, field):
    with self.assertRaisesRegex(ValueError, field):
      randaugment_batched.BatchedRandAugment(**kwargs)

  def test_a_batch_of_no_static_size_is_refused(self):
    augmenter = randaugment_batched.BatchedRandAugment(2, 9)
    spec = tf.TensorSpec([None, None, None, 3], tf.uint8)
    with self.assertRaisesRegex(ValueError, "static size"):
      tf.function(augmenter.distort).get_concrete_function(
          spec, tf.TensorSpec([None, 2, 4], tf.int32))


def toy_source(n_train=16, size=12):
  rng = np.random.default_rng(0)
  pixels = rng.integers(0, 256, [n_train, size, size, 3], dtype=np.uint8)
  labels = np.arange(n_train, dtype=np.int32) % 2

  def make_dataset(split, indices=None):
    idx = np.arange(n_train) if indices is None else indices
    return tf.data.Dataset.from_tensor_slices((pixels[idx], labels[idx]))

  return source_lib.Source("toy", ["a", "b"], labels, labels[:4], make_dataset)


class PipelineTest(tf.test.TestCase, parameterized.TestCase):

  def settings(self, **fields):
    fields = {**dict(batch_size=4, image_size=12, eval_image_size=12,
                     uint8_batches=False), **fields}
    return pipeline.InputPipeline(
        eval_crop_fraction=1.0, eval_resize_method="bilinear", random_flip=True,
        mean=(0,) * 3, std=(1 / 255,) * 3, randaugment=(2, 9), **fields)

  @parameterized.parameters(False, True)
  def test_the_pipeline_runs_randaugment_over_its_batches(self, uint8_batches):
    # Its batches are the same pipeline's without RandAugment (whole pixels), each
    # image then given its draws from its (seed, epoch, position) key: one call of
    # BatchedRandAugment on the batch (float32 or uint8 batches). A rebuilt epoch is
    # the same.
    source = toy_source()
    p = self.settings(uint8_batches=uint8_batches)
    plain = p.replace(randaugment=())
    augmenter = randaugment_batched.BatchedRandAugment(2, 9)
    epoch_seed = np.array([7, 2], np.int64)
    got = [x.numpy() for x, _ in p.train_dataset(source, np.arange(16), 2, 7)]
    again = [x.numpy() for x, _ in p.train_dataset(source, np.arange(16), 2, 7)]
    position = 0
    for batch, (x, _), rebuilt in zip(got, plain.train_dataset(source, np.arange(16), 2, 7),
                                      again):
      keys = [tf.random.experimental.stateless_fold_in(  # enumerate's int64 positions
          epoch_seed, tf.constant(position + i, tf.int64)) for i in range(4)]
      drawn = tf.stack([augmenter.draws(key, 12, 12) for key in keys])
      want = augmenter.distort(tf.cast(tf.round(x), tf.uint8), drawn)
      self.assertEqual(batch.dtype, np.uint8 if uint8_batches else np.float32)
      self.assertAllEqual(batch, tf.cast(want, batch.dtype))
      self.assertAllEqual(batch, rebuilt)
      position += 4
    self.assertEqual(position, 16)
    self.assertNotAllEqual(np.stack(got), np.stack([x for x, _ in plain.train_dataset(
        source, np.arange(16), 2, 7)]))

  def test_a_rebuilt_epoch_is_the_same_from_any_batch(self):
    # As a resumed run rebuilds it, skipping the batches it has trained on. Per image,
    # the parallel map's op-level random draws race: rebuilt, the same epoch's batches
    # differ (seen on 3 rebuilds of 3 at these sizes, 2026-11-29; not asserted).
    source = toy_source(n_train=256, size=24)
    p = self.settings(image_size=24, eval_image_size=24, batch_size=16)
    epoch = lambda: p.train_dataset(source, np.arange(256), 1, 3)
    first = np.stack([x for x, _ in epoch()])
    self.assertAllEqual(np.stack([x for x, _ in epoch()]), first)
    self.assertAllEqual(np.stack([x for x, _ in epoch().skip(5)]), first[5:])

  def test_per_image_where_it_must_be(self):
    # Off, with Cutout (which follows RandAugment) or with echoes of augmented images,
    # the per-image op runs (its op-level draws, not the batched ones).
    source = toy_source()
    batched = [x.numpy() for x, _ in self.settings().train_dataset(source, np.arange(16), 0, 1)]
    for fields in (dict(randaugment_batched=False), dict(cutout=4),
                   dict(echo_factor=2.0, echo_placement="after_augmentation")):
      with mock.patch.object(randaugment.RandAugment, "distort",
                             autospec=True, side_effect=randaugment.RandAugment.distort) as op:
        got = [x.numpy() for x, _ in self.settings(**fields).train_dataset(
            source, np.arange(16), 0, 1)]
      self.assertTrue(op.called, msg=str(fields))
      self.assertEqual(got[0].shape, (4, 12, 12, 3))
      if "echo_factor" not in fields:
        self.assertNotAllEqual(np.stack(got), np.stack(batched))
    with mock.patch.object(randaugment.RandAugment, "distort", autospec=True) as op:
      list(self.settings().train_dataset(source, np.arange(16), 0, 1))
    self.assertFalse(op.called)

  def test_only_static_rgb_images_of_3_px_or_more_go_over_batches(self):
    spec = lambda shape, dtype=tf.uint8: tf.TensorSpec(shape, dtype)
    self.assertTrue(augment.batchable(spec([12, 9, 3])))
    for other in (spec([None, None, 3]), spec([12, None, 3]), spec([12, 12, 1]),
                  spec([12, 12, 3], tf.float32), spec([2, 12, 3]), spec([12, 12])):
      self.assertFalse(augment.batchable(other), msg=str(other))

  def test_uint8_batches_are_the_float_batches_rounded(self):
    source = toy_source()
    floats = [x.numpy() for x, _ in self.settings(uint8_batches=False).train_dataset(
        source, np.arange(16), 1, 3)]
    whole = [x.numpy() for x, _ in self.settings(uint8_batches=True).train_dataset(
        source, np.arange(16), 1, 3)]
    self.assertEqual(whole[0].dtype, np.uint8)
    self.assertEqual(floats[0].dtype, np.float32)
    self.assertAllEqual(np.stack(whole).astype(np.float32), np.stack(floats))

  def test_a_bad_switch_is_one_line(self):
    with self.assertRaisesRegex(ValueError, "randaugment_batched='yes' must be True or False"):
      self.settings(randaugment_batched="yes").check()


if __name__ == "__main__":
  tf.test.main()
