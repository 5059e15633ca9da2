"""@fashion_mnist: Zalando's IDX release files, on small IDX files written here from the
format's definition (big-endian magic 0x00000803 / 0x00000801, big-endian uint32
dimensions, uint8 values), and on the real files where Debian's package put them."""

import gzip
import os

import numpy as np
import tensorflow as tf

from recipes.data import fashion_mnist
from recipes.errors import ConfigError
from tests import real_parts

REAL = fashion_mnist.DEFAULT_DIRECTORY


def idx_bytes(array, magic):
  header = magic.to_bytes(4, "big") + b"".join(d.to_bytes(4, "big") for d in array.shape)
  return header + array.astype(np.uint8).tobytes()


def write_release(directory, n_train=20, n_test=10, seed=0):
  """Four gzipped IDX files of random 28x28 images, labels cycling 0..9; returns the
  arrays written."""
  rng = np.random.default_rng(seed)
  os.makedirs(directory, exist_ok=True)
  written = {}
  for split, n in (("train", n_train), ("test", n_test)):
    images = rng.integers(0, 256, size=(n, 28, 28), dtype=np.uint8)
    labels = (np.arange(n) * 3) % 10
    written[split] = (images, labels)
    for kind, array, magic in (("images", images, 0x803), ("labels", labels, 0x801)):
      name = fashion_mnist.FILES[(split, kind)][0]
      with gzip.open(os.path.join(directory, name), "wb") as f:
        f.write(idx_bytes(array, magic))
  return written


class FashionMnistTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    self.directory = os.path.join(self.get_temp_dir(), self._testMethodName)
    self.written = write_release(self.directory)

  def test_reads_the_splits_in_file_order(self):
    source = fashion_mnist.fashion_mnist(directory=self.directory, md5=None)
    self.assertEqual(source.name, "fashion_mnist")
    self.assertEqual(source.class_names[0], "T-shirt/top")
    self.assertEqual(source.class_names[9], "Ankle boot")
    images, labels = self.written["train"]
    self.assertAllEqual(source.train_labels, labels)
    self.assertAllEqual(source.test_labels, self.written["test"][1])
    got = list(source.make_dataset("train", np.array([3, 7])))
    self.assertLen(got, 2)
    for (image, label), i in zip(got, (3, 7)):
      self.assertEqual(image.shape, (28, 28, 3))
      self.assertEqual(image.dtype, tf.uint8)
      for channel in range(3):  # grey, repeated
        self.assertAllEqual(image[..., channel], images[i])
      self.assertEqual(int(label), labels[i])

  def test_classes_keeps_those_examples_labelled_by_position(self):
    source = fashion_mnist.fashion_mnist(directory=self.directory, md5=None,
                                         classes=(9, 3, 6))
    self.assertEqual(source.class_names, ["Ankle boot", "Dress", "Shirt"])
    images, labels = self.written["train"]
    kept = [i for i, label in enumerate(labels) if label in (9, 3, 6)]
    # Labels cycle 0, 3, 6, 9, 2, ...: training examples 1, 2, 3, 11, 12, 13 (20 of them).
    self.assertEqual(kept, [1, 2, 3, 11, 12, 13])
    self.assertAllEqual(source.train_labels, [{9: 0, 3: 1, 6: 2}[labels[i]] for i in kept])
    got = list(source.make_dataset("train", np.array([2, 3])))
    self.assertAllEqual(got[0][0][..., 0], images[kept[2]])
    self.assertAllEqual(got[1][0][..., 0], images[kept[3]])
    self.assertEqual([int(label) for _, label in got], [0, 1])  # 9 -> 0, 3 -> 1
    test_labels = self.written["test"][1]
    self.assertAllEqual(source.test_labels, [{9: 0, 3: 1, 6: 2}[label] for label in
                                             test_labels if label in (9, 3, 6)])

  def test_bad_classes_are_one_line_errors(self):
    for bad in ((3,), (1, 1), (0, 10), (-1, 2), (True, 2), (1.0, 2), "13", 5, ()):
      with self.subTest(classes=bad), self.assertRaisesRegex(
          ConfigError, r"^fashion_mnist\.classes=.*give distinct class indices 0-9"):
        fashion_mnist.fashion_mnist(directory=self.directory, md5=None, classes=bad)

  def test_official_checksums_refuse_other_files(self):
    with self.assertRaisesRegex(ConfigError, r"^Fashion-MNIST file .*train-images-idx3-ubyte"
                                r"\.gz is not the release's \(MD5 [0-9a-f]{32}, not "
                                "8d4fb7e6c68d591d4c3dfef9ec88bf0d\\); install Debian's "
                                "dataset-fashion-mnist"):
      fashion_mnist.fashion_mnist(directory=self.directory)

  def test_bad_files_name_the_file_and_the_fix(self):
    name = os.path.join(self.directory, "train-labels-idx1-ubyte.gz")
    cases = {
        "missing": (lambda: os.remove(name), "does not exist"),
        "truncated gzip": (lambda: truncate(name, 20), "is not a whole gzip file"),
        "wrong magic": (lambda: rewrite(name, idx_bytes(np.zeros([4, 2, 2]), 0x803)),
                        "is not an IDX labels file"),
        "short data": (lambda: rewrite(name, idx_bytes(np.zeros([20]), 0x801)[:-3]),
                       "holds 17 values, not the 20"),
        "count mismatch": (lambda: rewrite(name, idx_bytes(np.zeros([19]), 0x801)),
                           "holds 19 labels for 20 train images"),
        "label out of range": (lambda: rewrite(name, idx_bytes(np.full([20], 10), 0x801)),
                               "a train label is 10, past the 10 classes"),
    }
    for case, (damage, message) in cases.items():
      write_release(self.directory)
      damage()
      with self.assertRaisesRegex(ConfigError, message, msg=case) as caught:
        fashion_mnist.fashion_mnist(directory=self.directory, md5=None)
      first = str(caught.exception).splitlines()[0]  # Gin appends its call's line
      self.assertIn("dataset-fashion-mnist", first, msg=case)
      self.assertIn("train-labels-idx1-ubyte.gz", first, msg=case)
    with self.assertRaisesRegex(ConfigError, r"^no Fashion-MNIST at .*nowhere.*: not a directory; "
                                r"install Debian.s dataset-fashion-mnist.*FASHION_MNIST_DIR"
                                r".*nfnet_long_tail_digits"):
      fashion_mnist.fashion_mnist(directory=os.path.join(self.directory, "nowhere"))
    with self.assertRaisesRegex(ConfigError, "fashion_mnist.md5='sha1'"):
      fashion_mnist.fashion_mnist(directory=self.directory, md5="sha1")

  def test_a_regzipped_copy_passes_on_its_idx_bytes(self):
    """Debian's files: the release's IDX bytes under another gzip header. A copy of
    the real files re-gzipped here (another header again) passes the official check."""
    if not os.path.isdir(REAL):
      real_parts.missing(REAL, "apt-get install dataset-fashion-mnist")
    copy = os.path.join(self.get_temp_dir(), "regzipped")
    os.makedirs(copy)
    name = "t10k-labels-idx1-ubyte.gz"
    with gzip.open(os.path.join(REAL, name)) as f:
      idx = f.read()
    with open(os.path.join(copy, name), "wb") as f:
      f.write(gzip.compress(idx, compresslevel=1, mtime=0))
    labels = fashion_mnist.read_idx(os.path.join(copy, name), "labels",
                                    fashion_mnist.FILES[("test", "labels")][1:])
    self.assertAllEqual(np.bincount(labels), [1000] * 10)
    with open(os.path.join(copy, name), "wb") as f:
      f.write(gzip.compress(idx[:-1] + b"\x00", mtime=0))  # one label changed
    with self.assertRaisesRegex(ConfigError, "is not the release's"):
      fashion_mnist.read_idx(os.path.join(copy, name), "labels",
                             fashion_mnist.FILES[("test", "labels")][1:])

  def test_the_real_release(self):
    """The published facts: 60,000 training images (6,000 a class), 10,000 test
    (1,000 a class), 28x28."""
    if not os.path.isdir(REAL):
      real_parts.missing(REAL, "apt-get install dataset-fashion-mnist")
    source = fashion_mnist.fashion_mnist()
    self.assertAllEqual(np.bincount(source.train_labels), [6000] * 10)
    self.assertAllEqual(np.bincount(source.test_labels), [1000] * 10)
    image, label = next(iter(source.make_dataset("test", np.array([0]))))
    self.assertEqual(image.shape, (28, 28, 3))
    self.assertEqual(int(label), 9)  # the first test image is an ankle boot


def truncate(path, size):
  with open(path, "rb") as f:
    data = f.read()
  with open(path, "wb") as f:
    f.write(data[:size])


def rewrite(path, data):
  with gzip.open(path, "wb") as f:
    f.write(data)


if __name__ == "__main__":
  tf.test.main()
