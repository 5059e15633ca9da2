"""@cifar, the source the CIFAR-LT recipes bind: the installed npm copy when CIFAR_DIR
is None, a folder of those PNGs, or the python archive; CIFAR-100 only from an archive,
and one line saying so otherwise. On copies and archives the test writes."""

import os

import gin
import numpy as np
import tensorflow as tf

from recipes import configurables  # pylint: disable=unused-import
from recipes.data import cifar
from recipes.errors import ConfigError
from tests.recipes.data.cifar_lt_test import fake_files
from tests.recipes.data.cifar_lt_test import write_archive
from tests.recipes.data.cifar_png_test import write_copy

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))


class CifarTest(tf.test.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    tmp = tf.compat.v1.test.get_temp_dir()
    cls.pngs = os.path.join(tmp, "pngs")
    write_copy(cls.pngs)
    cls.archive = write_archive(tmp, "cifar10", fake_files("cifar10", 10))
    cls.archive100 = write_archive(tmp, "cifar100", fake_files("cifar100", 10))

  def setUp(self):
    super().setUp()
    gin.clear_config()
    gin.bind_parameter("cifar_png.sha256", None)  # the test's own files
    gin.bind_parameter("cifar_python.md5", None)

  def tearDown(self):
    gin.clear_config()
    super().tearDown()

  def test_none_is_the_installed_copy(self):
    old = os.environ.get("CIFAR_DIR")
    os.environ["CIFAR_DIR"] = self.pngs  # where recipes/data/cifar10_npm.py installs
    try:
      source = cifar.cifar(directory=None, num_classes=10)
    finally:
      if old is None:
        del os.environ["CIFAR_DIR"]
      else:
        os.environ["CIFAR_DIR"] = old
    self.assertEqual(source.name, "cifar10")
    self.assertLen(source.train_labels, 50000)

  def test_each_copy(self):
    from_pngs = cifar.cifar(directory=self.pngs, num_classes=10)
    self.assertAllEqual(from_pngs.train_labels, np.arange(50000) % 10)
    from_archive = cifar.cifar(directory=self.archive, num_classes=10)
    self.assertLen(from_archive.train_labels, 100)
    self.assertEqual(from_archive.name, "cifar10")
    from_folder = cifar.cifar(directory=os.path.dirname(self.archive100), num_classes=100)
    self.assertEqual(from_folder.name, "cifar100")

  def test_errors(self):
    with self.assertRaisesRegex(ConfigError, r"^CIFAR_DIR is not bound; CIFAR-100 has no "
                                r"offline copy: download cifar-100-python.tar.gz .* bind "
                                r"its folder: --gin_bindings=\"CIFAR_DIR = '/path'\""):
      cifar.cifar(directory=None, num_classes=100)
    with self.assertRaisesRegex(ConfigError, r"holds the CIFAR-10 PNGs, not CIFAR-100"):
      cifar.cifar(directory=self.pngs, num_classes=100)
    with self.assertRaisesRegex(ConfigError, r"cifar.num_classes=1000 must be 10 "
                                r"\(cifar10\) or 100 \(cifar100\)"):
      cifar.cifar(directory=None, num_classes=1000)
    with self.assertRaisesRegex(ConfigError, r"cifar.directory=5 \(CIFAR_DIR\) must be a "
                                r"path or None"):
      cifar.cifar(directory=5)

  def test_gin_default_reads_no_binding(self):
    """cifar_lt_cao.gin's CIFAR_DIR is None: the recipes need no data binding."""
    gin.clear_config()
    gin.add_config_file_search_path(ROOT)
    gin.parse_config_files_and_bindings(
        [os.path.join(ROOT, "recipes", "configs", "data", "cifar_lt_cao.gin")],
        ["SEED = 0", "IMAGE_SIZE = 32", "NUM_CLASSES = 10"], skip_unknown=False)
    self.assertIsNone(gin.query_parameter("%CIFAR_DIR"))
    self.assertEqual(gin.query_parameter("%NUM_CLASSES"), 10)
    self.assertEqual(gin.query_parameter("Task.data").selector, "cifar")


if __name__ == "__main__":
  tf.test.main()
