"""@cifar_python: the original CIFAR python pickles (an archive, its unpacked folder or
the directory holding either), checked by MD5 before anything is unpickled, on fake
pickles of their format."""

import hashlib
import os
import pickle
import shutil

import tensorflow as tf

from recipes.data import cifar_python
from recipes.errors import ConfigError
from tests.recipes.data.cifar_lt_test import fake_files
from tests.recipes.data.cifar_lt_test import write_archive


class CifarPythonTest(tf.test.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.files = {"cifar10": fake_files("cifar10", 10)}
    cls.archives = {"cifar10": write_archive(tf.compat.v1.test.get_temp_dir(), "cifar10",
                                             cls.files["cifar10"])}

  def test_directory_and_md5(self):
    name, files = "cifar10", self.files["cifar10"]
    folder = os.path.join(self.get_temp_dir(), "cifar-10-batches-py")
    os.makedirs(folder)
    for f, data in files.items():
      with open(os.path.join(folder, f), "wb") as handle:
        handle.write(data)
    sums = {f: hashlib.md5(data).hexdigest() for f, data in files.items()}
    source = cifar_python.cifar_python(path=folder, md5=sums)
    self.assertEqual(source.name, name)
    self.assertEqual(source.class_names, [f"c{i}" for i in range(10)])
    with open(os.path.join(folder, "data_batch_3"), "ab") as handle:
      handle.write(b"x")
    with self.assertRaisesRegex(ConfigError, "^CIFAR file 'data_batch_3' in .* has MD5 "):
      cifar_python.cifar_python(path=folder, md5=sums)
    # A table that leaves a file out is refused, not skipped (issue 56): {} included.
    for partial in ({}, {f: v for f, v in sums.items() if f != "test_batch"}):
      with self.assertRaisesRegex(ConfigError, r"^cifar_python.md5 gives no MD5 for "
                                  r"'(data_batch_1|test_batch)' \(of .*\); give every "
                                  r"file's, 'official', or None to skip the check"):
        cifar_python.cifar_python(path=folder, md5=partial)
    # The official sums reject the fake archive before unpickling anything.
    with self.assertRaisesRegex(ConfigError, "^CIFAR archive '.*' has MD5 [0-9a-f]{32}, "
                                "not c58f30108f718f92721af3b95e74349a"):
      cifar_python.cifar_python(path=self.archives[name])

  def test_a_crafted_pickle_runs_nothing(self):
    """md5=None skips the sums, not the allow-list: a batch naming os.system is refused
    in one line and its command never runs."""
    marker = os.path.join(self.get_temp_dir(), "ran")

    class Payload:

      def __reduce__(self):
        return (os.system, (f"touch {marker}",))

    files = dict(self.files["cifar10"], data_batch_2=pickle.dumps(Payload(), protocol=2))
    folder = os.path.join(self.get_temp_dir(), "crafted", "cifar-10-batches-py")
    os.makedirs(folder)
    for f, data in files.items():
      with open(os.path.join(folder, f), "wb") as handle:
        handle.write(data)
    with self.assertRaises(ConfigError) as raised:
      cifar_python.cifar_python(path=folder, md5=None)
    self.assertRegex(str(raised.exception).splitlines()[0],
                     r"data_batch_2.*(posix|os)\.system.*; download the data set again$")
    self.assertFalse(os.path.exists(marker))

  def test_errors(self):
    with self.assertRaisesRegex(ConfigError, "^CIFAR file '/no/such.tar.gz' does not exist"):
      cifar_python.cifar_python(path="/no/such.tar.gz")
    odd = os.path.join(self.get_temp_dir(), "mine.tar.gz")
    shutil.copy(self.archives["cifar10"], odd)
    with self.assertRaisesRegex(ConfigError, "bind cifar_python.name"):
      cifar_python.cifar_python(path=odd, md5=None)
    self.assertEqual(cifar_python.cifar_python(path=odd, name="cifar10", md5=None).name,
                     "cifar10")
    with self.assertRaisesRegex(ConfigError, "has no cifar-100-python/train"):
      cifar_python.cifar_python(path=odd, name="cifar100", md5=None)

  def test_the_directory_holding_them(self):
    # torchvision's root (recipes' CIFAR_DIR): the archive, or the unpacked folder, inside.
    root = os.path.join(self.get_temp_dir(), "root")
    os.makedirs(root)
    shutil.copy(self.archives["cifar10"], root)
    from_archive = cifar_python.cifar_python(path=root, md5=None)
    self.assertEqual(from_archive.name, "cifar10")
    folder = os.path.join(root, "cifar-10-batches-py")
    os.makedirs(folder)
    for f, data in self.files["cifar10"].items():
      with open(os.path.join(folder, f), "wb") as handle:
        handle.write(data)
    with open(os.path.join(root, "cifar-10-python.tar.gz"), "wb") as handle:
      handle.write(b"not an archive")  # the folder is read first: this is never opened
    self.assertEqual(cifar_python.located(root, cifar_python.CIFAR["cifar10"]), folder)
    self.assertEqual(cifar_python.located(root, cifar_python.CIFAR["cifar100"]), root)
    self.assertEqual(cifar_python.which(root, None), "cifar10")
    _, _, train_x, train_y, _, _ = cifar_python.load(root, md5=None)
    _, _, want_x, want_y, _, _ = cifar_python.load(self.archives["cifar10"], md5=None)
    self.assertAllEqual(train_x, want_x)
    self.assertAllEqual(train_y, want_y)
    with self.assertRaisesRegex(ConfigError, "has no 'data_batch_1'; point .* or at the "
                                "directory holding either"):
      cifar_python.cifar_python(path=self.get_temp_dir() + "/root/..", num_classes=10,
                                md5=None)

  def test_num_classes_names_the_data_set(self):
    odd = os.path.join(self.get_temp_dir(), "yours.tar.gz")
    shutil.copy(self.archives["cifar10"], odd)
    self.assertEqual(cifar_python.cifar_python(path=odd, num_classes=10, md5=None).name,
                     "cifar10")
    with self.assertRaisesRegex(ConfigError, "has no cifar-100-python/train"):
      cifar_python.cifar_python(path=odd, num_classes=100, md5=None)
    self.assertEqual(cifar_python.named("cifar100", 100), "cifar100")
    self.assertIsNone(cifar_python.named(None, None))
    for wrong in (20, 10.0, True, "10"):
      with self.assertRaisesRegex(ConfigError, "num_classes=.* must be 10 .* or 100"):
        cifar_python.named(None, wrong)
    with self.assertRaisesRegex(ConfigError, "name='cifar10' contradicts .*num_classes=100"):
      cifar_python.named("cifar10", 100)


if __name__ == "__main__":
  tf.test.main()
