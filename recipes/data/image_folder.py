"""A tree of images: `root/<class name>/*.{jpg,jpeg,png,bmp,gif}`.

Classes are the sorted sub-directory names. The test split is either a second tree
with the same classes (`test_root`), or `test_per_class` images of every class held
out from `root` with a seeded draw (a balanced test split).

Every file's first bytes are checked at scan time (a text file named .jpg, an empty
file); `on_bad_file = 'skip'` leaves such files out instead, and also those that fail a
full decode (a truncated JPEG passes the header check).
"""

import os
import stat

from absl import logging
import gin
import numpy as np
import tensorflow as tf

from recipes.data import source as source_lib
from recipes.errors import ConfigError

IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".bmp", ".gif")
ON_BAD_FILE = ("error", "skip")
# The leading bytes of the formats tf.io.decode_image reads.
MAGIC = (b"\xff\xd8\xff", b"\x89PNG\r\n\x1a\n", b"GIF87a", b"GIF89a", b"BM")
SKIP_HINT = "bind image_folder.on_bad_file = 'skip'"


def is_webp(head):
  # TF 2.20's decode_image reads WebP too; a WebP file named .jpg is no bad file.
  return head[:4] == b"RIFF" and head[8:12] == b"WEBP"


def describe(head):
  """A short, one-line view of a file's first bytes."""
  if all(32 <= b < 127 or b in b"\t\n\r" for b in head):
    return f"text {head.decode('ascii')!r}"
  return "bytes " + head[:8].hex(" ")


def header_problem(path):
  """Why `path` is no image decode_image reads, judged from its first 16 bytes; None
  when it may be one (a truncated file passes)."""
  try:
    with open(path, "rb") as f:
      head = f.read(16)
  except OSError as e:
    return f"cannot be read ({e.strerror or e})"
  if not head:
    return "is empty (0 bytes)"
  if head.startswith(MAGIC) or is_webp(head):
    return None
  return f"is not a JPEG, PNG, GIF or BMP image (it starts with {describe(head)})"


def undecodable(paths):
  """The sorted paths among `paths` that tf.io.decode_image fails on (all decoded once,
  in parallel)."""
  paths = np.asarray(paths, dtype=str).reshape([-1])
  if not paths.size:
    return []

  def check(index, path):
    image, _ = decode(path, 0)
    # Return something computed from the image: a decode nothing uses is pruned.
    return index, tf.shape(image)

  dataset = tf.data.Dataset.from_tensor_slices((np.arange(paths.size), paths)).map(
      check, num_parallel_calls=tf.data.AUTOTUNE, deterministic=False).ignore_errors()
  decoded = np.zeros([paths.size], dtype=bool)
  for indices, _ in dataset.batch(4096).as_numpy_iterator():
    decoded[indices] = True
  return sorted(paths[~decoded].tolist())


def regular_file(path):
  """Whether `path` is (or links to) a regular file: a FIFO, socket, device or directory
  named like an image is none (opening a FIFO waits for a writer forever)."""
  try:
    return stat.S_ISREG(os.stat(path).st_mode)
  except OSError:
    return False  # a dangling link: no file


def check_inside(path, root, allow_outside_root):
  """Refuses a file whose real path (links followed) lies outside `root`."""
  real, top = os.path.realpath(path), os.path.realpath(root)
  if not allow_outside_root and os.path.commonpath([real, top]) != top:
    raise ConfigError(
        f"image file {path!r} is a link to {real!r}, outside image_folder.root {root!r}; "
        "move the image into the tree, or bind image_folder.allow_outside_root = True to "
        "read it there")


def scan(root, on_bad_file="error", allow_outside_root=False):
  """(class names, file paths, labels, skipped paths) of the tree at `root`; a bad file
  raises, or with `on_bad_file='skip'` is left out along with those that do not decode.
  Only regular files are images; a link out of `root` raises unless allowed."""
  if not root or not os.path.isdir(root):
    raise ConfigError(
        f"image folder {root!r} does not exist; bind image_folder.root to a directory "
        "laid out as <root>/<class>/<image>")
  class_names = sorted(
      d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d)))
  per_class = [
      [os.path.join(root, name, f) for f in sorted(os.listdir(os.path.join(root, name)))
       if f.lower().endswith(IMAGE_EXTENSIONS)
       and regular_file(os.path.join(root, name, f))] for name in class_names]
  for path in (p for files in per_class for p in files):
    check_inside(path, root, allow_outside_root)
  if not any(per_class):
    raise ConfigError(
        f"image folder {root!r} holds no images; expected <root>/<class>/*.jpg "
        f"(or {', '.join(IMAGE_EXTENSIONS[1:])})")
  bad = {}  # path -> what is wrong with it, in scan order
  for path in (p for files in per_class for p in files):
    problem = header_problem(path)
    if problem:
      bad[path] = problem
  if bad and on_bad_file == "error":
    path, problem = next(iter(bad.items()))
    more = f", and {len(bad) - 1} more bad files" if len(bad) > 1 else ""
    raise ConfigError(
        f"image file {path!r} {problem}{more}; remove or replace it, or {SKIP_HINT}")
  if on_bad_file == "skip":
    bad.update((p, "does not decode") for p in undecodable(
        [p for files in per_class for p in files if p not in bad]))
  paths, labels = [], []
  for label, (name, files) in enumerate(zip(class_names, per_class)):
    kept = [p for p in files if p not in bad]
    if not kept:
      what = (f"no images that decode ({len(files)} bad files skipped)" if files else
              f"no images ({', '.join(IMAGE_EXTENSIONS)})")
      raise ConfigError(
          f"image folder class directory {os.path.join(root, name)!r} holds {what}; add "
          "images or remove the directory")
    paths.extend(kept)
    labels.extend([label] * len(kept))
  if len(class_names) < 2:
    raise ConfigError(
        f"image folder {root!r} has {len(class_names)} class directory; a classifier "
        "needs at least 2 (one sub-directory per class)")
  return (class_names, np.asarray(paths), np.asarray(labels, dtype=np.int32),
          sorted(bad))


def read(path, label):
  return tf.io.read_file(path), label


def file_datasets(splits):
  """(make_dataset, read_encoded) of a Source over {split: (paths, labels)}: the
  examples at `indices` (all when None), in index order, decoded, or as file bytes."""

  def chosen(split, indices):
    split_paths, split_labels = splits[split]
    if indices is not None:
      indices = np.asarray(indices, dtype=np.int64)
      split_paths, split_labels = split_paths[indices], split_labels[indices]
    return tf.data.Dataset.from_tensor_slices((split_paths, split_labels))

  def make_dataset(split, indices=None):
    return chosen(split, indices).map(
        decode, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)

  def read_encoded(split, indices=None):
    return chosen(split, indices).map(
        read, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)

  return make_dataset, read_encoded


def decode(path, label):
  image = tf.io.decode_image(tf.io.read_file(path), channels=3, expand_animations=False)
  return tf.cast(image, tf.uint8), label


@gin.configurable
def image_folder(root=gin.REQUIRED, test_root=None, test_per_class=None, split_seed=0,
                 on_bad_file="error", allow_outside_root=False):
  """An image-tree `Source`; give `test_root` or `test_per_class` for the test split.
  `on_bad_file`: 'error' stops at a file that is no image; 'skip' leaves out those and
  every file that fails a full decode (which reads the whole data set once).
  `allow_outside_root`: read images that links lead to outside the tree (else refused);
  a FIFO, device or directory named like an image is never read."""
  if on_bad_file not in ON_BAD_FILE:
    raise ConfigError(
        f"image_folder.on_bad_file={on_bad_file!r} is not one of 'error', 'skip'; bind "
        "'error' to stop at a bad image file or 'skip' to leave bad files out")
  class_names, paths, labels, skipped = scan(root, on_bad_file, allow_outside_root)
  if test_root is not None:
    test_names, test_paths, test_labels, test_skipped = scan(test_root, on_bad_file,
                                                             allow_outside_root)
    if test_names != class_names:
      raise ConfigError(
          f"test folder {test_root!r} has classes {test_names}, but {root!r} has "
          f"{class_names}; both trees need the same class directories")
    train_paths, train_labels = paths, labels
    skipped = skipped + test_skipped
  elif test_per_class:
    train_idx, test_idx = source_lib.balanced_holdout(labels, test_per_class, split_seed)
    train_paths, train_labels = paths[train_idx], labels[train_idx]
    test_paths, test_labels = paths[test_idx], labels[test_idx]
  else:
    raise ConfigError(
        "image_folder needs a test split: bind image_folder.test_root to a second "
        "tree or image_folder.test_per_class to a count to hold out")
  if skipped:
    logging.warning(
        "image_folder: skipped %d bad files (of %d) that do not decode as images, the "
        "first %r; all are listed under skipped_files in metrics.json", len(skipped),
        len(skipped) + len(train_paths) + len(test_paths), skipped[0])
  splits = {"train": (train_paths, train_labels), "test": (test_paths, test_labels)}

  make_dataset, read_encoded = file_datasets(splits)

  def find_bad_files(split, indices=None):
    """The paths among the split's examples (those at `indices`) that do not decode."""
    split_paths = splits[split][0]
    if indices is not None:
      split_paths = split_paths[np.asarray(indices, dtype=np.int64)]
    return undecodable(split_paths)

  return source_lib.Source(
      name=os.path.basename(os.path.normpath(root)), class_names=class_names,
      train_labels=train_labels, test_labels=test_labels, make_dataset=make_dataset,
      skipped_files=tuple(skipped), find_bad_files=find_bad_files,
      read_encoded=read_encoded)
