"""Images named by published list files: `<relative path> <label>` a line, over a root.

The long-tailed benchmarks are defined by such lists: ImageNet-LT and Places-LT (Liu et
al. 2019, OLTR: `ImageNet_LT_train.txt`, `_val.txt`, `_test.txt`; `Places_LT_*.txt`)
and iNaturalist 2018 (`iNaturalist18_train.txt`, `_val.txt`, as Kang et al. 2020 and
Ren et al. 2020 ship them). The lists are the split: no long-tail draw is needed
(`Task.long_tail = None`).

    Task.data = @list_file
    list_file.root = '/data/imagenet'          # the paths in the lists are under it
    list_file.list_dir = '/data/lists'         # where the list files are (or give paths)
    list_file.train_list = 'ImageNet_LT_train.txt'
    list_file.test_list = 'ImageNet_LT_test.txt'
    list_file.val_list = 'ImageNet_LT_val.txt' # optional: the given validation split

Labels are whole numbers in [0, num_classes); `num_classes` is inferred (the largest
label in the lists + 1) or given. Every list is checked when the source is built: a
missing list, a malformed line (file and line number), a label out of range, a
missing image file (existence only; `check_files = False` skips it) each stop with
one line. The validation list, when given, is the source's `validation` split
(`make_dataset('validation', indices)`, `validation_labels`); the trainer's hold-out
(`Task.validation_per_class`) draws from the training list instead.
"""

import os
import re

import gin
import numpy as np
import tensorflow as tf

from recipes.data import image_folder
from recipes.data import source as source_lib
from recipes.errors import ConfigError


def resolve(path, list_dir, setting):
  """`path`, under `list_dir` when relative; a missing file is one ConfigError line."""
  if not path:
    raise ConfigError(f"list_file.{setting} is empty; bind it to a list file "
                      "('<relative path> <label>' a line)")
  full = path if os.path.isabs(path) or not list_dir else os.path.join(list_dir, path)
  if not os.path.isfile(full):
    where = f" (list_file.list_dir = {list_dir!r})" if list_dir and not os.path.isabs(
        path) else ""
    raise ConfigError(f"list file {full!r} does not exist{where}; bind list_file.{setting} "
                      "to an existing list")
  return full


def parse(path):
  """(relative paths, labels, line numbers) of the list at `path`; blank lines are
  skipped, any other line must be '<relative path> <label>'."""
  paths, labels, lines = [], [], []
  with open(path, encoding="utf-8") as f:
    for number, line in enumerate(f, start=1):
      text = line.strip()
      if not text:
        continue
      parts = text.rsplit(None, 1)
      if (len(parts) != 2 or not re.fullmatch(r"-?[0-9]{1,18}", parts[1])):  # int64
        shown = text if len(text) <= 80 else text[:77] + "..."
        raise ConfigError(f"{path}:{number}: expected '<relative path> <label>' (a whole "
                          f"number), got {shown!r}")
      paths.append(parts[0])
      labels.append(int(parts[1]))
      lines.append(number)
  if not paths:
    raise ConfigError(f"list file {path!r} names no images; expected "
                      "'<relative path> <label>' a line")
  return paths, np.asarray(labels, np.int64), lines


def missing_files(paths):
  """The paths among `paths` that are not files."""
  return [p for p in paths if not os.path.isfile(p)]


def _checked_classes(lists, num_classes, max_classes):
  """`num_classes` (inferred as the largest label + 1 when None, at most `max_classes`),
  checked against every list's labels and the training list's classes."""
  inferred = num_classes is None
  if inferred:
    for full, _, labels, lines in lists.values():
      i = int(np.argmax(labels))
      if labels[i] >= max_classes:  # before the class count allocates that many
        raise ConfigError(
            f"{full}:{lines[i]}: label {labels[i]} is more classes than "
            f"list_file.max_classes ({max_classes}) allows; fix the list, or bind "
            "list_file.num_classes (or max_classes)")
    num_classes = max(int(labels.max()) for _, _, labels, _ in lists.values()) + 1
  elif (isinstance(num_classes, bool) or not isinstance(num_classes, int)
        or not 2 <= num_classes <= max_classes):
    raise ConfigError(f"list_file.num_classes={num_classes!r} must be a whole number in "
                      f"[2, list_file.max_classes = {max_classes}] or None (inferred from "
                      "the labels)")
  for full, _, labels, lines in lists.values():
    bad = np.flatnonzero((labels < 0) | (labels >= num_classes))
    if len(bad):
      i = bad[0]
      raise ConfigError(
          f"{full}:{lines[i]}: label {labels[i]} is outside [0, {num_classes}) "
          f"(list_file.num_classes = {num_classes}"
          f"{', inferred' if inferred else ''}); fix the list or "
          "num_classes")
  absent = np.flatnonzero(np.bincount(lists["train"][2], minlength=num_classes) == 0)
  if len(absent):
    raise ConfigError(
        f"training list {lists['train'][0]!r} has no image of class {absent[0]}"
        f"{f' (and {len(absent) - 1} more classes)' if len(absent) > 1 else ''}; every "
        f"class of [0, {num_classes}) needs one")
  return num_classes


def _outside(path, root):
  """Why `path` is not under `root` (None when it is): absolute or climbing out, or a
  link whose target is elsewhere."""
  top = os.path.realpath(root)
  if os.path.commonpath([os.path.abspath(path), os.path.abspath(root)]) != \
      os.path.abspath(root):
    return ""
  real = os.path.realpath(path)
  if os.path.commonpath([real, top]) != top:
    return f" (a link to {real!r})"
  return None


def _image_paths(root, entry, check_files, allow_outside_root):
  """(image paths under `root`, int32 labels) of one parsed list, its images checked."""
  full, relative, labels, lines = entry
  paths = [os.path.normpath(os.path.join(root, p)) for p in relative]
  if not allow_outside_root:
    for path, line in zip(paths, lines):
      why = _outside(path, root)
      if why is not None:
        raise ConfigError(
            f"{full}:{line}: image {path!r} is outside list_file.root {root!r}{why}; keep "
            "the images under the root, or bind list_file.allow_outside_root = True")
  if check_files:
    missing = missing_files(paths)
    if missing:
      line = lines[paths.index(missing[0])]
      more = f", and {len(missing) - 1} more missing" if len(missing) > 1 else ""
      raise ConfigError(
          f"{full}:{line}: image {missing[0]!r} does not exist{more}; check "
          "list_file.root (the lists' paths are relative to it)")
  return np.asarray(paths), labels.astype(np.int32)


@gin.configurable
def list_file(root=gin.REQUIRED, train_list=gin.REQUIRED, test_list=gin.REQUIRED,
              val_list=None, list_dir=None, num_classes=None, check_files=True,
              name=None, allow_outside_root=False, max_classes=100_000):
  """A `Source` from list files over an image root (see the module).

  Args:
    root: the directory the lists' relative paths are under.
    train_list, test_list, val_list: list files, relative to `list_dir` unless
      absolute; `val_list` is optional.
    list_dir: where relative list names are looked up (None: as given).
    num_classes: the number of classes; None infers the largest label + 1.
    check_files: check that every listed image exists when the source is built.
    name: the data set's name in reports (default: the training list's, without .txt).
    allow_outside_root: read listed images outside `root` (absolute, climbing out with
      '..', or links to elsewhere); else each is refused naming its line.
    max_classes: the most classes `num_classes=None` may infer (a label beyond it is a
      typo, not a class: counting that many would take the memory of that many).
  """
  if not root or not os.path.isdir(root):
    raise ConfigError(f"image root {root!r} does not exist; bind list_file.root to the "
                      "directory the list files' paths are relative to")
  given = {"train": (train_list, "train_list"), "test": (test_list, "test_list")}
  if val_list is not None:
    given["validation"] = (val_list, "val_list")
  lists = {}
  for split, (path, setting) in given.items():
    full = resolve(path, list_dir, setting)
    lists[split] = (full, *parse(full))
  num_classes = _checked_classes(lists, num_classes, max_classes)
  splits = {split: _image_paths(root, entry, check_files, allow_outside_root)
            for split, entry in lists.items()}

  decoded, encoded = image_folder.file_datasets(splits)

  def make_dataset(split, indices=None):
    if split not in splits:
      raise ConfigError(f"this list source has no {split!r} split; bind list_file.val_list")
    return decoded(split, indices)

  def find_bad_files(split, indices=None):
    """The paths among the split's examples (those at `indices`) that do not decode."""
    split_paths = splits[split][0]
    if indices is not None:
      split_paths = split_paths[np.asarray(indices, dtype=np.int64)]
    return image_folder.undecodable(split_paths)

  if name is None:
    name = os.path.splitext(os.path.basename(lists["train"][0]))[0]
  return source_lib.Source(
      name=name, class_names=[str(c) for c in range(num_classes)],
      train_labels=splits["train"][1], test_labels=splits["test"][1],
      make_dataset=make_dataset, find_bad_files=find_bad_files, read_encoded=encoded,
      validation_labels=splits["validation"][1] if "validation" in splits else None)
