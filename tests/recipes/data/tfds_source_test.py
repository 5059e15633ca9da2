"""TFDS by name, on a tiny data set the test builds and prepares on disk (offline)."""

import os
import tempfile

import numpy as np
import tensorflow as tf
import tensorflow_datasets as tfds

from recipes.data import long_tail
from recipes.data import pipeline
from recipes.data import tfds_source
from recipes.errors import ConfigError
from tricks import sampling


class TinyShapes(tfds.core.GeneratorBasedBuilder):
  """Three classes of 10x10 images filled with 40 * label; 12 train, 6 test."""
  VERSION = tfds.core.Version("1.0.0")

  def _info(self):
    return tfds.core.DatasetInfo(
        builder=self,
        features=tfds.features.FeaturesDict({
            "image": tfds.features.Image(shape=(10, 10, 3)),
            "label": tfds.features.ClassLabel(names=["a", "b", "c"]),
        }),
        supervised_keys=("image", "label"))

  def _split_generators(self, dl_manager):
    del dl_manager
    return {"train": self._generate_examples(12), "test": self._generate_examples(6)}

  def _generate_examples(self, n):
    for i in range(n):
      label = i % 3
      yield i, {"image": np.full([10, 10, 3], 40 * label, np.uint8), "label": label}


class TfdsSourceTest(tf.test.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.data_dir = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
    TinyShapes(data_dir=cls.data_dir).download_and_prepare()

  def test_labels_and_selected_examples(self):
    source = tfds_source.tfds_source(name="tiny_shapes", data_dir=self.data_dir)
    self.assertEqual(source.class_names, ["a", "b", "c"])
    self.assertEqual(len(source.train_labels), 12)
    self.assertEqual(np.bincount(source.test_labels).tolist(), [2, 2, 2])
    picked = np.array([1, 5, 9])
    examples = list(source.make_dataset("train", picked))
    self.assertEqual([int(label) for _, label in examples],
                     source.train_labels[picked].tolist())
    for image, label in examples:
      self.assertEqual(image.dtype, tf.uint8)
      self.assertAllEqual(image, np.full([10, 10, 3], 40 * int(label)))

  def test_long_tail_profile_applies(self):
    source = tfds_source.tfds_source(name="tiny_shapes", data_dir=self.data_dir)
    indices = long_tail.LongTail(rho=4).select(source.train_labels, source.num_classes)
    labels = [int(label) for _, label in source.make_dataset("train", indices)]
    self.assertEqual(np.bincount(labels).tolist(), long_tail.profile(4, 3, 4))  # 4, 2, 1

  def test_encoded_bytes_decode_to_the_selected_examples(self):
    source = tfds_source.tfds_source(name="tiny_shapes", data_dir=self.data_dir)
    self.assertTrue(source.sequential)
    picked = np.array([0, 4, 11])
    for (encoded, label), (image, same_label) in zip(
        source.read_encoded("train", picked), source.make_dataset("train", picked)):
      self.assertEqual(encoded.dtype, tf.string)
      self.assertEqual(int(label), int(same_label))
      self.assertAllEqual(tf.io.decode_image(encoded, channels=3), image)

  def test_stored_order_is_not_silently_reordered_or_deduplicated(self):
    source = tfds_source.tfds_source(name="tiny_shapes", data_dir=self.data_dir)
    for indices in ([5, 1], [1, 1, 5]):
      with self.assertRaisesRegex(ValueError, "ascending, distinct indices"):
        source.make_dataset("train", np.array(indices))

  def test_a_sampled_epoch_holds_the_drawn_examples_as_often_as_drawn(self):
    """Class-balanced sampling on a long-tailed subset of a TFDS set: the epoch holds
    each class as many times as the sampler drew it (not each example once)."""
    source = tfds_source.tfds_source(name="tiny_shapes", data_dir=self.data_dir)
    indices = np.array([0, 1, 2, 3, 4, 6, 7, 9, 10, 5])  # class 0: 4, 1: 4, 2: 2
    indices.sort()
    p = pipeline.InputPipeline(batch_size=1, image_size=10, mean=(0.,) * 3,
                               std=(1 / 255,) * 3, sampler=sampling.Sampler("class"))
    order = p.sampler.epoch_order(source.train_labels[indices], 3, 2, 7)
    drawn = indices[order]
    epoch = [(x.numpy(), int(y[0])) for x, y in p.train_dataset(source, indices, 2, 7)]
    labels = [y for _, y in epoch]
    self.assertAllEqual(np.bincount(labels, minlength=3),
                        np.bincount(source.train_labels[drawn], minlength=3))
    self.assertNotEqual(np.bincount(labels, minlength=3).tolist(), [4, 4, 2])
    for image, label in epoch:
      self.assertAllClose(image[0], np.full([10, 10, 3], 40. * label))

  def test_random_resized_crops_and_evaluation_decode_the_encoded_bytes(self):
    source = tfds_source.tfds_source(name="tiny_shapes", data_dir=self.data_dir)
    p = pipeline.InputPipeline(batch_size=2, image_size=4, eval_image_size=4,
                               eval_crop_fraction=0.5, eval_resize_method="bilinear",
                               random_resized_crop=(0.5, 1.0), mean=(0.,) * 3,
                               std=(1 / 255,) * 3, randaugment=())
    self.assertTrue(p.decodes_with_crop(source))
    for x, y in p.train_dataset(source, np.arange(12), 0, 3):
      for image, label in zip(x.numpy(), y.numpy()):  # flat images crop to themselves
        self.assertAllClose(image, np.full([4, 4, 3], 40. * label), atol=1e-3)
    images = np.concatenate([x.numpy() for x, _ in p.eval_dataset(source)])
    whole = np.stack([p.eval_image(image).numpy() for image, _ in source.make_dataset("test")])
    self.assertAllClose(images, whole, atol=1e-4)

  def test_errors(self):
    with self.assertRaisesRegex(ConfigError, "not prepared in data_dir"):
      tfds_source.tfds_source(name="tiny_shapes", data_dir=self.get_temp_dir() + "/none")
    with self.assertRaisesRegex(ConfigError, "no TFDS data set named 'no_such_set_xyz'"):
      tfds_source.tfds_source(name="no_such_set_xyz", data_dir=self.data_dir)
    with self.assertRaisesRegex(ConfigError, "has no split 'validation'"):
      tfds_source.tfds_source(name="tiny_shapes", data_dir=self.data_dir,
                              test_split="validation")


if __name__ == "__main__":
  tf.test.main()
