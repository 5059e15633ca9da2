"""TFDS by name, on a tiny data set the test builds and prepares on disk (offline)."""

import os
import tempfile

import numpy as np
import tensorflow as tf
import tensorflow_datasets as tfds

from recipes.data import long_tail
from recipes.data import tfds_source
from recipes.errors import ConfigError


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
