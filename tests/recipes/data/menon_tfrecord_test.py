"""Menon et al.'s released CIFAR-LT TFRecords, on small files of their format written here."""

import os

import gin
import numpy as np
import tensorflow as tf

from recipes import configurables  # pylint: disable=unused-import
from recipes.data import menon_tfrecord
from recipes.errors import ConfigError

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))


def write_records(path, labels, offset=0):
  """Their format: raw 32x32x3 uint8 bytes as image/encoded, image/class/label int64;
  image k holds the value (offset + k) % 256 with a gradient along the width."""
  with tf.io.TFRecordWriter(path) as writer:
    for k, label in enumerate(labels):
      image = np.full([32, 32, 3], (offset + k) % 256, np.uint8)
      image[:, :, 1] = np.arange(32, dtype=np.uint8)[None, :]
      example = tf.train.Example(features=tf.train.Features(feature={
          "image/encoded": tf.train.Feature(bytes_list=tf.train.BytesList(
              value=[image.tobytes()])),
          "image/class/label": tf.train.Feature(int64_list=tf.train.Int64List(
              value=[int(label)]))}))
      writer.write(example.SerializeToString())


class MenonTfrecordTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    self.dir = self.create_tempdir().full_path
    self.train = [0, 0, 0, 1, 1, 2, 0, 3, 4, 5, 6, 7, 8, 9]
    self.test = list(range(10)) * 2
    write_records(os.path.join(self.dir, "cifar10-lt_train.tfrecord"), self.train)
    write_records(os.path.join(self.dir, "cifar10_test.tfrecord"), self.test, offset=100)

  def tearDown(self):
    gin.clear_config()
    super().tearDown()

  def test_reads_their_records_in_order(self):
    source = menon_tfrecord.menon_tfrecord(data_dir=self.dir, check_sizes=False)
    self.assertEqual(source.num_classes, 10)
    self.assertEqual(source.train_labels.tolist(), self.train)
    self.assertEqual(source.test_labels.tolist(), self.test)
    examples = list(source.make_dataset("train", np.array([2, 7])))
    self.assertEqual([int(label) for _, label in examples], [0, 3])
    for (image, _), k in zip(examples, (2, 7)):
      self.assertEqual(image.dtype, tf.uint8)
      self.assertAllEqual(image[..., 0], np.full([32, 32], k))
      self.assertAllEqual(image[0, :, 1], np.arange(32))  # HWC: width runs along axis 1
    self.assertLen(list(source.make_dataset("test")), 20)

  def test_errors(self):
    with self.assertRaisesRegex(ConfigError, "cifar10-lt_train.tfrecord holds 14 images, "
                                "not 12406 as Menon et al.'s; download it again"):
      menon_tfrecord.menon_tfrecord(data_dir=self.dir)
    with self.assertRaisesRegex(ConfigError, "cifar100-lt_train.tfrecord' does not exist; "
                                "download cifar100-lt_train.tfrecord from http://storage"):
      menon_tfrecord.menon_tfrecord(data_dir=self.dir, name="cifar100-lt")
    with self.assertRaisesRegex(ConfigError, "menon_tfrecord.name='cifar10' is not one of"):
      menon_tfrecord.menon_tfrecord(data_dir=self.dir, name="cifar10")
    with open(os.path.join(self.dir, "cifar10_test.tfrecord"), "wb") as f:
      f.write(b"not a tfrecord file at all")
    with self.assertRaisesRegex(ConfigError, "cifar10_test.tfrecord is not a TFRecord file"):
      menon_tfrecord.menon_tfrecord(data_dir=self.dir, check_sizes=False)

  def test_labels_out_of_range(self):
    write_records(os.path.join(self.dir, "cifar10-lt_train.tfrecord"), [0, 10])
    with self.assertRaisesRegex(ConfigError, r"has labels outside \[0, 10\)"):
      menon_tfrecord.menon_tfrecord(data_dir=self.dir, check_sizes=False)

  def test_gin_config(self):
    gin.add_config_file_search_path(ROOT)
    gin.parse_config_files_and_bindings(
        [os.path.join(ROOT, "recipes", "configs", "data", "cifar_lt_menon.gin")],
        ["SEED = 0", "IMAGE_SIZE = 32", f"MENON_DATA_DIR = '{self.dir}'",
         "NUM_CLASSES = 10", "menon_tfrecord.check_sizes = False"], skip_unknown=False)
    self.assertIsNone(gin.query_parameter("Task.long_tail"))
    source = gin.query_parameter("Task.data").scoped_configurable_fn()
    self.assertEqual(source.name, "cifar10-lt")
    self.assertEqual(source.train_labels.tolist(), self.train)
    with gin.unlock_config():
      gin.bind_parameter("%NUM_CLASSES", 100)  # CIFAR-100-LT: its files are not here
    with self.assertRaisesRegex(ConfigError, "cifar100-lt_train.tfrecord' does not exist"):
      gin.query_parameter("Task.data").scoped_configurable_fn()

  def test_num_classes_names_the_files(self):
    self.assertEqual(menon_tfrecord.named(None, None), "cifar10-lt")
    self.assertEqual(menon_tfrecord.named(None, 100), "cifar100-lt")
    self.assertEqual(menon_tfrecord.named("cifar10-lt", 10), "cifar10-lt")
    source = menon_tfrecord.menon_tfrecord(data_dir=self.dir, num_classes=10,
                                           check_sizes=False)
    self.assertEqual(source.name, "cifar10-lt")
    for wrong in (20, 10.0, True):
      with self.assertRaisesRegex(ConfigError, "num_classes=.* must be 10 .* or 100"):
        menon_tfrecord.named(None, wrong)
    with self.assertRaisesRegex(ConfigError, "name='cifar10-lt' contradicts .*=100"):
      menon_tfrecord.named("cifar10-lt", 100)


if __name__ == "__main__":
  tf.test.main()
