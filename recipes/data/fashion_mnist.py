"""Fashion-MNIST (Xiao, Rasul & Vollgraf 2017, arXiv:1708.07747) from its release files.

`fashion_mnist(directory=...)` reads Zalando's four files, the format of LeCun's MNIST
(IDX: a big-endian magic number 0x00000803 for images or 0x00000801 for labels, the
dimensions as big-endian uint32, then uint8 values row-major), gzipped:

    train-images-idx3-ubyte.gz  train-labels-idx1-ubyte.gz   60,000 training images
    t10k-images-idx3-ubyte.gz   t10k-labels-idx1-ubyte.gz    10,000 test, 1,000 a class

28x28 grey images (repeated to 3 channels, as every source yields), 10 classes, in the
files' order. The same files are what the dataset's repository and TFDS's
`fashion_mnist` serve; Debian's `dataset-fashion-mnist` installs them under
/usr/share/datasets/fashion-mnist, the default directory.

Each file is checked before it is read: the MD5 the dataset's README publishes for
the release file, or, for a copy whose gzip header was rewritten (Debian's package
drops the stored file name and resets the header's time, so its .gz bytes differ), the
MD5 of the decompressed IDX bytes. `md5=None` skips the check (a test's own files).
"""

import gzip
import hashlib
import os
import struct
import zlib

import gin
import numpy as np

from recipes.data import source as source_lib
from recipes.errors import ConfigError

DEFAULT_DIRECTORY = "/usr/share/datasets/fashion-mnist"
URL = "https://github.com/zalandoresearch/fashion-mnist (data/fashion/)"
CLASS_NAMES = ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt",
               "Sneaker", "Bag", "Ankle boot")

# file: (MD5 of the release .gz, as the dataset's README publishes it; MD5 of the
# decompressed IDX bytes, computed from Debian's dataset-fashion-mnist
# 0.0~git20200523.55506a9-1, whose .gz files hold the release's 7,840,016 /
# 10,008 / 47,040,016 / 60,008 IDX bytes under a rewritten gzip header).
FILES = {
    ("train", "images"): ("train-images-idx3-ubyte.gz", "8d4fb7e6c68d591d4c3dfef9ec88bf0d",
                          "f4a8712d7a061bf5bd6d2ca38dc4d50a"),
    ("train", "labels"): ("train-labels-idx1-ubyte.gz", "25c81989df183df01b3e8a0aad5dffbe",
                          "9018921c3c673c538a1fc5bad174d6f9"),
    ("test", "images"): ("t10k-images-idx3-ubyte.gz", "bef4ecab320f06d8554ea6380940ec79",
                         "8181f5470baa50b63fa0f6fddb340f0a"),
    ("test", "labels"): ("t10k-labels-idx1-ubyte.gz", "bb300cfdad3c16e7a12a480ee83cd310",
                         "15d484375f8d13e6eb1aabb0c3f46965"),
}
MAGIC = {"images": 0x00000803, "labels": 0x00000801}
FIX = ("install Debian's dataset-fashion-mnist (apt-get install dataset-fashion-mnist; "
       "./bazelw does it when it may), or download the four files from "
       f"{URL} and bind their folder: --gin_bindings=\"FASHION_MNIST_DIR = '/path'\"; "
       "offline, the 8x8-digits demo needs no download: "
       "./bazelw run //recipes:nfnet_long_tail_digits")


def read_idx(path, kind, md5=None):
  """The uint8 array in the gzipped IDX file `path` (`kind`: 'images' [N, H, W] or
  'labels' [N]); `md5`: (release .gz MD5, IDX MD5) to check, or None."""
  try:
    with open(path, "rb") as f:
      packed = f.read()
    data = gzip.decompress(packed)
  except FileNotFoundError:
    raise ConfigError(f"Fashion-MNIST file {path} does not exist; {FIX}") from None
  except (OSError, EOFError, zlib.error) as e:
    raise ConfigError(f"Fashion-MNIST file {path} is not a whole gzip file ({e}); "
                      f"{FIX}") from None
  if md5 is not None and hashlib.md5(packed).hexdigest() != md5[0] and (
      hashlib.md5(data).hexdigest() != md5[1]):
    raise ConfigError(f"Fashion-MNIST file {path} is not the release's (MD5 "
                      f"{hashlib.md5(packed).hexdigest()}, not {md5[0]}); {FIX}")
  rank = 3 if kind == "images" else 1
  header = 4 + 4 * rank
  if len(data) < header or struct.unpack(">I", data[:4])[0] != MAGIC[kind]:
    raise ConfigError(f"{path} is not an IDX {kind} file (magic number "
                      f"{data[:4].hex() or 'missing'}, not {MAGIC[kind]:08x}); {FIX}")
  shape = struct.unpack(f">{rank}I", data[4:header])
  if len(data) != header + int(np.prod(shape)):
    raise ConfigError(f"{path} holds {len(data) - header} values, not the "
                      f"{int(np.prod(shape))} its header declares {shape}; {FIX}")
  return np.frombuffer(data, np.uint8, offset=header).reshape(shape)


def load(directory, md5="official"):
  """{split: (images uint8 [N, 28, 28, 3], labels int32 [N])} from `directory`."""
  if not os.path.isdir(directory):
    raise ConfigError(f"no Fashion-MNIST at {directory!r} (fashion_mnist.directory, "
                      f"FASHION_MNIST_DIR in the recipes): not a directory; {FIX}")
  splits = {}
  for split in ("train", "test"):
    arrays = {}
    for kind in ("images", "labels"):
      name, packed_md5, idx_md5 = FILES[(split, kind)]
      arrays[kind] = read_idx(os.path.join(directory, name), kind,
                              (packed_md5, idx_md5) if md5 == "official" else None)
    images, labels = arrays["images"], arrays["labels"]
    labels_file = os.path.join(directory, FILES[(split, "labels")][0])
    if len(images) != len(labels):
      raise ConfigError(f"{labels_file} holds {len(labels)} labels for {len(images)} "
                        f"{split} images; {FIX}")
    if labels.size and labels.max() >= len(CLASS_NAMES):
      raise ConfigError(f"{labels_file}: a {split} label is {labels.max()}, past the "
                        f"{len(CLASS_NAMES)} classes; {FIX}")
    splits[split] = (np.repeat(images[..., None], 3, axis=-1), labels.astype(np.int32))
  return splits


def checked_classes(classes):
  """`classes` as a tuple of distinct class indices of Fashion-MNIST, or None (all)."""
  if classes is None:
    return None
  fix = ("give distinct class indices 0-9, e.g. fashion_mnist.classes = (1, 3, 5, 7, 9) "
         f"({', '.join(f'{i} {n}' for i, n in enumerate(CLASS_NAMES))})")
  if isinstance(classes, (str, bytes)) or not isinstance(classes, (list, tuple)):
    raise ConfigError(f"fashion_mnist.classes={classes!r} is not a list; {fix}")
  if (len(classes) < 2 or len(set(classes)) != len(classes) or any(
      isinstance(c, bool) or not isinstance(c, int) or not 0 <= c < len(CLASS_NAMES)
      for c in classes)):
    raise ConfigError(f"fashion_mnist.classes={classes!r}: {fix}, at least two")
  return tuple(classes)


def keep_classes(splits, classes):
  """`splits` with only the examples of `classes`, labelled by their position there."""
  relabel = np.full(len(CLASS_NAMES), -1, np.int32)
  relabel[list(classes)] = np.arange(len(classes), dtype=np.int32)
  kept = {}
  for split, (images, labels) in splits.items():
    chosen = np.flatnonzero(relabel[labels] >= 0)
    kept[split] = (images[chosen], relabel[labels[chosen]])
  return kept


@gin.configurable
def fashion_mnist(directory=DEFAULT_DIRECTORY, md5="official", classes=None):
  """The Fashion-MNIST `Source`: the release's training and test splits.

  Args:
    directory: the folder holding the four .gz files (default: Debian's).
    md5: 'official' checks each file (see the module docstring); None skips it.
    classes: None (all ten), or the class indices to keep, in the order of their new
      labels 0, 1, ...: e.g. (0, 2, 4, 6, 8) for a transfer source and (1, 3, 5, 7, 9)
      for its unseen target (every image of those classes, in the files' order).
  """
  if md5 not in ("official", None):
    raise ConfigError(f"fashion_mnist.md5={md5!r} must be 'official' or None")
  classes = checked_classes(classes)
  splits = load(directory, md5)
  names = list(CLASS_NAMES)
  if classes is not None:
    splits = keep_classes(splits, classes)
    names = [CLASS_NAMES[c] for c in classes]

  return source_lib.Source(
      name="fashion_mnist", class_names=names,
      train_labels=splits["train"][1], test_labels=splits["test"][1],
      make_dataset=source_lib.in_memory(splits))
