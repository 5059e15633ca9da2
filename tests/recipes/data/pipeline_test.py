"""The input pipeline: normalisation, per-epoch determinism, padded evaluation."""

import numpy as np
import tensorflow as tf

from recipes.data import pipeline
from recipes.data import source as source_lib


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


class PipelineTest(tf.test.TestCase):

  def test_normalisation_without_augmentation(self):
    source, images = toy_source()
    p = pipeline.InputPipeline(batch_size=4, image_size=6, mean=(0.5, 0.4, 0.3),
                               std=(0.2, 0.25, 0.5))
    got, _ = next(iter(p.eval_dataset(source)))
    want = (images["test"][:4] / 255.0 - [0.5, 0.4, 0.3]) / [0.2, 0.25, 0.5]
    self.assertAllClose(got, want, atol=1e-5)

  def test_epochs_are_reproducible_and_differ(self):
    source, _ = toy_source()
    p = pipeline.InputPipeline(batch_size=4, image_size=8, random_crop_padding=2,
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
    p = pipeline.InputPipeline(batch_size=4, image_size=6)
    labels = np.concatenate([y.numpy() for _, y in p.eval_dataset(source)])
    self.assertLen(labels, 8)
    self.assertEqual(labels.tolist().count(pipeline.PAD_LABEL), 1)
    self.assertAllEqual(labels[:7], source.test_labels)

  def test_echo_placements(self):
    source, _ = toy_source(n_train=16)
    kwargs = dict(batch_size=4, image_size=8, random_crop_padding=2, random_flip=True,
                  echo_factor=2, echo_shuffle_buffer=1)  # no shuffle: copies adjacent

    def batches(placement):
      p = pipeline.InputPipeline(echo_placement=placement, **kwargs)
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
    with self.assertRaisesRegex(ValueError, "unknown echo_placement"):
      pipeline.InputPipeline(echo_placement="late")

  def test_fractional_echo_gives_the_expected_epoch(self):
    source, _ = toy_source(n_train=20)
    p = pipeline.InputPipeline(batch_size=4, image_size=6, echo_factor=1.5)
    self.assertEqual(p.steps_per_epoch(20), 7)   # floor(30 / 4)
    self.assertLen(list(p.train_dataset(source, np.arange(20), 3, 1)), 7)

  def test_randaugment_from_model_garden(self):
    source, _ = toy_source(size=16)
    p = pipeline.InputPipeline(batch_size=4, image_size=16, randaugment=(2, 5), mean=(0,) * 3,
                               std=(1,) * 3)
    x, _ = next(iter(p.train_dataset(source, np.arange(8), 0, 0)))
    self.assertEqual(x.shape, (4, 16, 16, 3))
    self.assertAllInRange(x, 0.0, 1.0)


if __name__ == "__main__":
  tf.test.main()
