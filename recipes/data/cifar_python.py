"""CIFAR-10 / CIFAR-100 from the original python pickles, in their original order.

`cifar_python(path=...)` reads `cifar-10-python.tar.gz` / `cifar-100-python.tar.gz`
(from https://www.cs.toronto.edu/~kriz/cifar.html, downloaded by the user), the
directory it unpacks to (`cifar-10-batches-py/`, `cifar-100-python/`), or the directory
holding either (torchvision's `root`: recipes bind it as CIFAR_DIR). The training
split is `data_batch_1` .. `data_batch_5` concatenated (CIFAR-100: `train`), the test
split `test_batch` (`test`): the order torchvision's CIFAR10 / CIFAR100 read, which
Cao et al.'s CIFAR-LT draw (recipes/data/cifar_lt.py) indexes. TFDS's cifar10 /
cifar100 store their records in another order (a hash of the key), so this source is
the one to use for the exact published CIFAR-LT splits.

Files are checked against the MD5 sums torchvision checks (the archive's, or each
pickle's in a directory) before they are unpickled; `md5=None` skips the check (a
test's fake archive), a dict replaces the table and must name every file read (a
partial one is refused, not skipped). The pickles are read by
zoo/safe_pickle.py with its NumPy allow-list: a global other than the array
reconstruction CIFAR's batches need (e.g. `os.system`) is refused in one line before
anything runs, whatever the MD5 setting.
"""

import hashlib
import os
import tarfile

import gin
import numpy as np

from recipes.data import source as source_lib
from recipes.errors import ConfigError
from zoo import safe_pickle

# torchvision.datasets.CIFAR10 / CIFAR100: the archive's MD5, then each member's.
CIFAR = {
    "cifar10": {
        "archive": ("cifar-10-python.tar.gz", "c58f30108f718f92721af3b95e74349a"),
        "folder": "cifar-10-batches-py",
        "train": [("data_batch_1", "c99cafc152244af753f735de768cd75f"),
                  ("data_batch_2", "d4bba439e000b95fd0a9bffe97cbabec"),
                  ("data_batch_3", "54ebc095f3ab1f0389bbae665268c751"),
                  ("data_batch_4", "634d18415352ddfa80567beed471001a"),
                  ("data_batch_5", "482c414d41f54cd18b22e5b47cb7c3cb")],
        "test": [("test_batch", "40351d587109b95175f43aff81a1287e")],
        "meta": ("batches.meta", "5ff9c542aee3614f3951f8cda6e48888"),
        "label_key": "labels",
        "names_key": "label_names",
    },
    "cifar100": {
        "archive": ("cifar-100-python.tar.gz", "eb9058c3a382ffc7106e4002c42a8d85"),
        "folder": "cifar-100-python",
        "train": [("train", "16019d7e3df5f24257cddd939b257f8d")],
        "test": [("test", "f0ef6b0ae62326f3e7ffdfab6717acfc")],
        "meta": ("meta", "7973b15100ade9c7d40fb424638fde48"),
        "label_key": "fine_labels",
        "names_key": "fine_label_names",
    },
}


# The data set of each class count (cifar_python.num_classes: recipes bind NUM_CLASSES).
BY_CLASS_COUNT = {10: "cifar10", 100: "cifar100"}


def official_md5(name):
  """{file name: MD5} of data set `name`, the archive's included."""
  info = CIFAR[name]
  return dict([info["archive"], info["meta"]] + info["train"] + info["test"])


def md5_of(data):
  return hashlib.md5(data).hexdigest()


def which(path, name):
  """The data set ('cifar10' / 'cifar100') at `path`: `name` if given, else from the
  file or directory name, or from the one data set a directory holds."""
  if name is not None:
    if name not in CIFAR:
      raise ConfigError(f"cifar_python.name={name!r} is not 'cifar10' or 'cifar100'")
    return name
  base = os.path.basename(os.path.normpath(path))
  for key, info in CIFAR.items():
    if base in (info["archive"][0], info["folder"]):
      return key
  held = [key for key, info in CIFAR.items() if located(path, info) != path]
  if len(held) == 1:
    return held[0]
  raise ConfigError(
      f"cannot tell CIFAR-10 from CIFAR-100 by the name {base!r}; bind cifar_python.name "
      "to 'cifar10' or 'cifar100'")


def located(path, info):
  """`path`, or inside a directory holding the unpacked folder or the archive
  (torchvision's `root`), that folder (preferred) or archive."""
  if not os.path.isdir(path):
    return path
  for inside in (info["folder"], info["archive"][0]):
    if os.path.exists(os.path.join(path, inside)):
      return os.path.join(path, inside)
  return path


def read_files(path, info):
  """{member name: bytes} of the pickles, from the archive or the directory at `path`."""
  wanted = [f for f, _ in info["train"] + info["test"] + [info["meta"]]]
  if os.path.isdir(path):
    files = {}
    for f in wanted:
      member = os.path.join(path, f)
      if not os.path.isfile(member):
        raise ConfigError(f"CIFAR directory {path!r} has no {f!r}; point cifar_python.path "
                          f"at the unpacked {info['folder']}/, at {info['archive'][0]} or "
                          "at the directory holding either")
      with open(member, "rb") as handle:
        files[f] = handle.read()
    return files
  with tarfile.open(path, "r:gz") as tar:
    members = {os.path.basename(m.name): m for m in tar.getmembers() if m.isfile()
               and os.path.dirname(m.name) == info["folder"]}
    missing = [f for f in wanted if f not in members]
    if missing:
      raise ConfigError(f"CIFAR archive {path!r} has no {info['folder']}/{missing[0]}; is it "
                        f"{info['archive'][0]}?")
    return {f: tar.extractfile(members[f]).read() for f in wanted}


def unpickle(data, where="CIFAR pickle"):
  """One CIFAR batch (a dict of lists and NumPy arrays), read as torchvision reads it
  (encoding latin1) but through safe_pickle's NumPy allow-list."""
  try:
    return safe_pickle.loads(data, safe_pickle.NUMPY_ARRAYS, where=where,
                             encoding="latin1")
  except safe_pickle.PickleError as e:
    raise ConfigError(f"{e}; download the data set again") from None


def load(path, name=None, md5="official"):
  """(data set name, class names, train images, train labels, test images, test
  labels): uint8 [N, 32, 32, 3] images and int32 labels, in the files' order."""
  if not path or not os.path.exists(path):
    raise ConfigError(
        f"CIFAR file {path!r} does not exist; download cifar-10-python.tar.gz or "
        "cifar-100-python.tar.gz from https://www.cs.toronto.edu/~kriz/cifar.html and "
        "bind CIFAR_DIR (cifar_python.path) to it or to its directory")
  if not (md5 is None or md5 == "official" or isinstance(md5, dict)):
    raise ConfigError(f"cifar_python.md5={md5!r} must be 'official', None or a dict "
                      "{file name: MD5}")
  name = which(path, name)
  info = CIFAR[name]
  path = located(path, info)
  sums = official_md5(name) if md5 == "official" else md5
  if sums is not None and not os.path.isdir(path):
    archive = info["archive"][0]
    with open(path, "rb") as handle:
      got = md5_of(handle.read())
    if archive in sums and got != sums[archive]:
      raise ConfigError(
          f"CIFAR archive {path!r} has MD5 {got}, not {sums[archive]} (the official "
          f"{archive}); download it again")
  files = read_files(path, info)
  if sums is not None:
    missing = [f for f in files if f not in sums]
    if missing:  # a table that leaves a file out checks nothing of it: refused
      raise ConfigError(f"cifar_python.md5 gives no MD5 for {missing[0]!r} (of "
                        f"{', '.join(missing)}); give every file's, 'official', or None "
                        "to skip the check")
    for f, data in files.items():
      if md5_of(data) != sums[f]:
        raise ConfigError(f"CIFAR file {f!r} in {path!r} has MD5 {md5_of(data)}, not "
                          f"{sums[f]}; download the data set again")

  def split(names):
    images, labels = [], []
    for f, _ in names:
      entry = unpickle(files[f], f)
      images.append(np.asarray(entry["data"], np.uint8).reshape(-1, 3, 32, 32))
      labels.extend(entry[info["label_key"]])
    return (np.concatenate(images).transpose(0, 2, 3, 1).copy(),
            np.asarray(labels, np.int32))

  class_names = list(unpickle(files[info["meta"][0]], info["meta"][0])[info["names_key"]])
  return (name, class_names, *split(info["train"]), *split(info["test"]))


def named(name, num_classes):
  """`name`, or with `num_classes` given (10 or 100) the data set of that class count."""
  return source_lib.by_class_count("cifar_python", name, num_classes, BY_CLASS_COUNT)


@gin.configurable
def cifar_python(path=gin.REQUIRED, name=None, md5="official", num_classes=None):
  """The CIFAR `Source` read from the python pickles at `path` (archive or directory).

  Args:
    path: `cifar-10-python.tar.gz`, `cifar-100-python.tar.gz`, their unpacked
      `cifar-10-batches-py/` / `cifar-100-python/`, or a directory holding one of them
      (the unpacked folder is read first).
    name: 'cifar10' or 'cifar100'; None tells them apart by `num_classes`, else by
      `path`'s name.
    md5: 'official' checks torchvision's MD5 sums; None skips the check; a dict
      {file name: MD5} replaces them.
    num_classes: 10 or 100 names the data set (CIFAR-10 / CIFAR-100) by its class
      count, as recipes/configs/data/cifar_lt_cao.gin binds it (NUM_CLASSES).
  """
  name, class_names, train_x, train_y, test_x, test_y = load(
      path, named(name, num_classes), md5)
  splits = {"train": (train_x, train_y), "test": (test_x, test_y)}

  return source_lib.Source(
      name=name, class_names=class_names, train_labels=train_y,
      test_labels=test_y, make_dataset=source_lib.in_memory(splits))
