"""List-file sources (ImageNet-LT, Places-LT, iNaturalist 2018 style), on small lists and
images the test writes: splits, decoding, the Gin configs, and the errors users meet."""

import os
import re

from absl.testing import parameterized
import gin
import numpy as np
import tensorflow as tf

from recipes import configurables  # pylint: disable=unused-import
from recipes import experiment
from recipes import build
from recipes.data import list_file
from recipes.data import pipeline
from recipes.errors import ConfigError

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))


def write_image(path, label, size=10):
  os.makedirs(os.path.dirname(path), exist_ok=True)
  image = np.full([size, size + 1, 3], 20 * label, np.uint8)
  data = (tf.io.encode_png(image) if path.endswith(".png")
          else tf.io.encode_jpeg(image, quality=100))
  tf.io.write_file(path, data)


def write_split(root, list_path, folder, counts, ext="png"):
  """Writes counts[c] images of class c under root/folder/<c>/ and their list; returns
  the (relative path, label) pairs in list order (classes interleaved)."""
  entries = [(f"{folder}/n{c:03d}/img_{i}.{ext}", c)
             for i in range(max(counts)) for c, n in enumerate(counts) if i < n]
  for relative, label in entries:
    write_image(os.path.join(root, relative), label)
  os.makedirs(os.path.dirname(list_path), exist_ok=True)
  with open(list_path, "w") as f:
    f.writelines(f"{relative} {label}\n" for relative, label in entries)
  return entries


def one_line(error):
  return str(error).split("\n  In call to configurable")[0]  # gin's note, if any


class ListFileTest(tf.test.TestCase, parameterized.TestCase):

  def setUp(self):
    super().setUp()
    self.tmp = self.create_tempdir().full_path
    self.root = os.path.join(self.tmp, "images")
    self.lists = os.path.join(self.tmp, "lists")
    self.train = write_split(self.root, os.path.join(self.lists, "t_train.txt"), "train",
                             [5, 3, 1])
    self.val = write_split(self.root, os.path.join(self.lists, "t_val.txt"), "train_val",
                           [2, 2, 2], ext="jpg")
    self.test = write_split(self.root, os.path.join(self.lists, "t_test.txt"), "val",
                            [2, 2, 2])

  def tearDown(self):
    gin.clear_config()
    super().tearDown()

  def source(self, **kwargs):
    args = dict(root=self.root, list_dir=self.lists, train_list="t_train.txt",
                val_list="t_val.txt", test_list="t_test.txt")
    args.update(kwargs)
    return list_file.list_file(**args)

  def write_list(self, name, text):
    path = os.path.join(self.lists, name)
    with open(path, "w") as f:
      f.write(text)
    return path

  def test_splits_in_list_order_and_decoded(self):
    source = self.source()
    self.assertEqual(source.name, "t_train")
    self.assertEqual(source.class_names, ["0", "1", "2"])
    self.assertEqual(source.train_labels.tolist(), [label for _, label in self.train])
    self.assertEqual(source.test_labels.tolist(), [label for _, label in self.test])
    self.assertEqual(source.validation_labels.tolist(), [label for _, label in self.val])
    self.assertEqual(np.bincount(source.train_labels).tolist(), [5, 3, 1])
    for split, labels in (("train", source.train_labels), ("test", source.test_labels),
                          ("validation", source.validation_labels)):
      picked = np.array([len(labels) - 1, 0, 2])
      examples = list(source.make_dataset(split, picked))
      self.assertEqual([int(label) for _, label in examples], labels[picked].tolist())
      for image, label in examples:
        self.assertEqual(image.dtype, tf.uint8)
        self.assertEqual(image.shape, (10, 11, 3))
        self.assertAllClose(np.mean(image), 20 * int(label), atol=1.0)
      self.assertLen(list(source.make_dataset(split)), len(labels))
    self.assertEqual(source.find_bad_files("train", None), [])

  def test_absolute_lists_blank_lines_spaces_and_given_classes(self):
    write_image(os.path.join(self.root, "train", "with space", "a b.png"), 1)
    train = self.write_list(
        "spaced.txt", "train/n000/img_0.png 0\n\n  train/with space/a b.png 1  \n"
        "train/n002/img_0.png 2\n\n")
    source = list_file.list_file(root=self.root, train_list=train,
                                 test_list=os.path.join(self.lists, "t_test.txt"),
                                 num_classes=3, name="mine")
    self.assertEqual(source.name, "mine")
    self.assertEqual(source.train_labels.tolist(), [0, 1, 2])
    self.assertIsNone(source.validation_labels)
    self.assertAllClose(np.mean(next(iter(source.make_dataset("train", [1])))[0]), 20)
    with self.assertRaisesRegex(ConfigError, "no 'validation' split; bind list_file.val_list"):
      source.make_dataset("validation", None)

  def test_the_trainer_validates_on_the_given_list(self):
    """Liu et al.'s validation list is the run's validation split (best checkpoint,
    early stopping, post-hoc tau), not a hold-out of the training list."""
    task = experiment.Task(data=self.source, model=None)
    data = build.load_data(task, seed=0)
    self.assertEqual(data.validation_split, "validation")
    self.assertAllEqual(data.validation, np.arange(6))
    self.assertAllEqual(data.counts, [5, 3, 1])
    pipe = pipeline.InputPipeline(batch_size=4, image_size=8, mean=(0, 0, 0),
                                  std=(1, 1, 1))
    labels = np.concatenate([y.numpy() for _, y in pipe.eval_dataset(
        data.source, data.validation_split, data.validation)])
    self.assertAllEqual(labels, [0, 1, 2, 0, 1, 2, -1, -1])  # list order, padded
    with self.assertRaisesRegex(ConfigError, "has its own validation split \\(6 examples\\); "
                                "drop Task.validation_per_class"):
      build.load_data(experiment.Task(data=self.source, model=None,
                                        validation_per_class=1), seed=0)

  def test_missing_list(self):
    with self.assertRaises(ConfigError) as raised:
      self.source(val_list="nope_val.txt")
    self.assertEqual(one_line(raised.exception), (
        f"list file '{self.lists}/nope_val.txt' does not exist (list_file.list_dir = "
        f"'{self.lists}'); bind list_file.val_list to an existing list"))
    with self.assertRaisesRegex(ConfigError, "^image root '.*/none' does not exist"):
      self.source(root=os.path.join(self.tmp, "none"))

  @parameterized.parameters(
      ("train/n000/img_0.png\n", "'train/n000/img_0.png'"),
      ("train/n000/img_0.png zero\n", "'train/n000/img_0.png zero'"),
      ("train/n000/img_0.png 1.5\n", "'train/n000/img_0.png 1.5'"),
      # Issue 56: each was a traceback (ValueError, OverflowError) or worded elsewhere.
      ("train/n000/img_0.png --1\n", "'train/n000/img_0.png --1'"),
      ("train/n000/img_0.png \u00b2\n", "'train/n000/img_0.png \u00b2'"),
      ("train/n000/img_0.png 99999999999999999999\n",
       "'train/n000/img_0.png 99999999999999999999'"))
  def test_malformed_line_names_file_and_line(self, bad, shown):
    path = self.write_list("bad.txt", "train/n000/img_1.png 0\n\n" + bad)
    with self.assertRaises(ConfigError) as raised:
      self.source(train_list="bad.txt")
    message = one_line(raised.exception)
    self.assertNotIn("\n", message)
    self.assertEqual(message, f"{path}:3: expected '<relative path> <label>' (a whole "
                     f"number), got {shown}")

  def test_labels_out_of_range(self):
    with self.assertRaisesRegex(ConfigError, f"^{re.escape(self.lists)}/t_train.txt:3: "
                                r"label 2 is outside \[0, 2\) \(list_file.num_classes = 2\); "):
      self.source(num_classes=2)
    path = self.write_list("negative.txt", "train/n000/img_0.png 0\ntrain/n001/img_0.png -1\n")
    with self.assertRaisesRegex(ConfigError, f"^{re.escape(path)}:2: label -1 is outside "
                                r"\[0, 3\) \(list_file.num_classes = 3, inferred\)"):
      self.source(train_list="negative.txt")
    with self.assertRaisesRegex(ConfigError, "has no image of class 3 \\(and 1 more classes\\)"):
      self.source(num_classes=5)
    with self.assertRaisesRegex(ConfigError, "list_file.num_classes=1 must be"):
      self.source(num_classes=1)
    with self.assertRaisesRegex(ConfigError, r"list_file.num_classes=100000000000 must be "
                                r"a whole number in \[2, list_file.max_classes = 100000\]"):
      self.source(num_classes=10 ** 11)

  def test_a_label_too_large_to_be_a_class_is_refused_before_counting(self):
    """40000000000 would make the class count (np.bincount) allocate 298 GiB."""
    path = self.write_list("huge.txt", "train/n000/img_0.png 0\ntrain/n001/img_0.png "
                           "40000000000\n")
    with self.assertRaises(ConfigError) as raised:
      self.source(train_list="huge.txt")
    self.assertEqual(one_line(raised.exception), (
        f"{path}:2: label 40000000000 is more classes than list_file.max_classes "
        "(100000) allows; fix the list, or bind list_file.num_classes (or max_classes)"))

  @parameterized.parameters("absolute", "climbing", "link")
  def test_an_image_outside_the_root_is_read_only_when_allowed(self, how):
    outside = os.path.join(self.tmp, "elsewhere.png")
    write_image(outside, 0)
    if how == "absolute":
      entry = outside
    elif how == "climbing":
      entry = "train/../../elsewhere.png"
    else:
      os.symlink(outside, os.path.join(self.root, "train", "n000", "link.png"))
      entry = "train/n000/link.png"
    with open(os.path.join(self.lists, "t_train.txt")) as f:
      text = f.read()  # 9 lines
    path = self.write_list("outside.txt", text + f"{entry} 0\n")
    with self.assertRaises(ConfigError) as raised:
      self.source(train_list="outside.txt")
    self.assertRegex(one_line(raised.exception), (
        f"^{re.escape(path)}:10: image '.*' is outside list_file.root "
        f"'{re.escape(self.root)}'( \\(a link to '.*'\\))?; keep the images under the root, "
        "or bind list_file.allow_outside_root = True$"))
    source = self.source(train_list="outside.txt", allow_outside_root=True)
    self.assertLen(source.train_labels, 10)

  def test_missing_image(self):
    os.remove(os.path.join(self.root, "val", "n001", "img_1.png"))
    os.remove(os.path.join(self.root, "val", "n002", "img_1.png"))
    path = os.path.join(self.lists, "t_test.txt")
    lines = open(path).read().splitlines()
    number = lines.index("val/n001/img_1.png 1") + 1
    with self.assertRaises(ConfigError) as raised:
      self.source()
    self.assertEqual(one_line(raised.exception), (
        f"{path}:{number}: image '{self.root}/val/n001/img_1.png' does not exist, and 1 "
        "more missing; check list_file.root (the lists' paths are relative to it)"))
    source = self.source(check_files=False)  # the check is skipped
    self.assertLen(source.test_labels, 6)

  def test_empty_list(self):
    self.write_list("empty.txt", "\n\n")
    with self.assertRaisesRegex(ConfigError, "empty.txt' names no images"):
      self.source(test_list="empty.txt")

  @parameterized.parameters(
      ("imagenet_lt_lists.gin", "IMAGENET_DIR", "ImageNet_LT", True),
      ("places_lt_lists.gin", "PLACES_DIR", "Places_LT", True),
      ("inaturalist2018_lists.gin", "INAT_DIR", "iNaturalist18", False))
  def test_gin_config(self, config, root_knob, prefix, has_val):
    lists = os.path.join(self.tmp, config)
    write_split(self.root, os.path.join(lists, f"{prefix}_train.txt"), "train", [4, 2, 1])
    write_split(self.root, os.path.join(lists, f"{prefix}_val.txt"), "val", [1, 1, 1])
    if has_val:
      write_split(self.root, os.path.join(lists, f"{prefix}_test.txt"), "val", [2, 2, 2])
    gin.add_config_file_search_path(ROOT)
    gin.parse_config_files_and_bindings(
        [os.path.join(ROOT, "recipes", "configs", "data", config)],
        ["SEED = 0", "IMAGE_SIZE = 16", f"{root_knob} = '{self.root}'",
         f"LISTS_DIR = '{lists}'", "NUM_CLASSES = 3"], skip_unknown=False)
    self.assertIsNone(gin.query_parameter("Task.long_tail"))
    source = gin.query_parameter("Task.data").scoped_configurable_fn()
    self.assertEqual(np.bincount(source.train_labels).tolist(), [4, 2, 1])
    self.assertEqual(np.bincount(source.test_labels).tolist(), [2, 2, 2] if has_val
                     else [1, 1, 1])
    if has_val:
      self.assertEqual(np.bincount(source.validation_labels).tolist(), [1, 1, 1])
    else:
      self.assertIsNone(source.validation_labels)


if __name__ == "__main__":
  tf.test.main()
