"""A tree of images: `root/<class name>/*.{jpg,jpeg,png,bmp,gif}`.

Classes are the sorted sub-directory names. The test split is either a second tree
with the same classes (`test_root`), or `test_per_class` images of every class held
out from `root` with a seeded draw (a balanced test split).
"""

import os

import gin
import numpy as np
import tensorflow as tf

from recipes.data import source as source_lib
from recipes.errors import ConfigError

IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".bmp", ".gif")


def scan(root):
  """(class names, file paths, labels) of the tree at `root`."""
  if not root or not os.path.isdir(root):
    raise ConfigError(
        f"image folder {root!r} does not exist; bind image_folder.root to a directory "
        "laid out as <root>/<class>/<image>")
  class_names = sorted(
      d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d)))
  paths, labels = [], []
  for label, name in enumerate(class_names):
    files = sorted(
        f for f in os.listdir(os.path.join(root, name))
        if f.lower().endswith(IMAGE_EXTENSIONS))
    paths.extend(os.path.join(root, name, f) for f in files)
    labels.extend([label] * len(files))
  if not paths:
    raise ConfigError(
        f"image folder {root!r} holds no images; expected <root>/<class>/*.jpg "
        f"(or {', '.join(IMAGE_EXTENSIONS[1:])})")
  if len(class_names) < 2:
    raise ConfigError(
        f"image folder {root!r} has {len(class_names)} class directory; a classifier "
        "needs at least 2 (one sub-directory per class)")
  return class_names, np.asarray(paths), np.asarray(labels, dtype=np.int32)


def decode(path, label):
  image = tf.io.decode_image(tf.io.read_file(path), channels=3, expand_animations=False)
  return tf.cast(image, tf.uint8), label


@gin.configurable
def image_folder(root=gin.REQUIRED, test_root=None, test_per_class=None, split_seed=0):
  """An image-tree `Source`; give `test_root` or `test_per_class` for the test split."""
  class_names, paths, labels = scan(root)
  if test_root is not None:
    test_names, test_paths, test_labels = scan(test_root)
    if test_names != class_names:
      raise ConfigError(
          f"test folder {test_root!r} has classes {test_names}, but {root!r} has "
          f"{class_names}; both trees need the same class directories")
    train_paths, train_labels = paths, labels
  elif test_per_class:
    train_idx, test_idx = source_lib.balanced_holdout(labels, test_per_class, split_seed)
    train_paths, train_labels = paths[train_idx], labels[train_idx]
    test_paths, test_labels = paths[test_idx], labels[test_idx]
  else:
    raise ConfigError(
        "image_folder needs a test split: bind image_folder.test_root to a second "
        "tree or image_folder.test_per_class to a count to hold out")
  splits = {"train": (train_paths, train_labels), "test": (test_paths, test_labels)}

  def make_dataset(split, indices=None):
    split_paths, split_labels = splits[split]
    if indices is not None:
      split_paths, split_labels = split_paths[indices], split_labels[indices]
    return tf.data.Dataset.from_tensor_slices((split_paths, split_labels)).map(
        decode, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)

  return source_lib.Source(
      name=os.path.basename(os.path.normpath(root)), class_names=class_names,
      train_labels=train_labels, test_labels=test_labels, make_dataset=make_dataset)
