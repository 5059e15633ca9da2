"""Pretrained weights for the Keras-provided zoo models, through Keras's own files.

`weights_file(application, weights, cache_dir, sha256)` gives the path of the
no-top ImageNet weights a tf_keras application loads:
- weights="imagenet": Keras's file, fetched by `tf_keras.utils.get_file` into
  `cache_dir/models/` (default ~/.keras, or $KERAS_HOME) and checked against the
  MD5 Keras publishes; a copy already there is used without a download, so a
  machine behind a firewall only needs the file put in place;
- weights=<path>: that local file, as it is.
Either way the file's SHA-256 is computed, compared with `sha256` when one is given,
and logged, so a run records exactly which weights it started from.
"""

import hashlib
import os

from absl import logging
from tf_keras.src.applications import inception_v3 as keras_inception_v3
from tf_keras.src.applications import resnet as keras_resnet
from tf_keras.src.utils import data_utils

_RESNET_NOTOP = "{}_weights_tf_dim_ordering_tf_kernels_notop.h5"

# application -> (file name, origin, Keras's MD5) of its no-top ImageNet weights.
KERAS_FILES = {
    **{f"ResNet{d}": (_RESNET_NOTOP.format(f"resnet{d}"),
                      keras_resnet.BASE_WEIGHTS_PATH + _RESNET_NOTOP.format(f"resnet{d}"),
                      keras_resnet.WEIGHTS_HASHES[f"resnet{d}"][1])
       for d in (50, 101, 152)},
    "InceptionV3": ("inception_v3_weights_tf_dim_ordering_tf_kernels_notop.h5",
                    keras_inception_v3.WEIGHTS_PATH_NO_TOP,
                    "bcbd6486424b2319ff4ef7d526e38f63"),
}


class WeightsError(ValueError):
  """Weights that cannot be had or do not fit: the message says what to do."""


def sha256_of(path, chunk=1 << 20):
  digest = hashlib.sha256()
  with open(path, "rb") as f:
    for block in iter(lambda: f.read(chunk), b""):
      digest.update(block)
  return digest.hexdigest()


def weights_file(application, weights, cache_dir=None, sha256=None):
  """The local path of `application`'s weights ("imagenet" or a file path)."""
  if weights == "imagenet":
    if application not in KERAS_FILES:
      raise WeightsError(f"no Keras ImageNet weights for {application}; pass a weights "
                         "file path instead")
    name, origin, md5 = KERAS_FILES[application]
    cache_dir = os.path.expanduser(cache_dir) if cache_dir else None
    where = os.path.join(cache_dir or os.environ.get(
        "KERAS_HOME", os.path.expanduser("~/.keras")), "models", name)
    try:
      path = data_utils.get_file(name, origin, cache_subdir="models", file_hash=md5,
                                 cache_dir=cache_dir)
    except Exception as e:  # pylint: disable=broad-except  (Keras raises bare Exception)
      raise WeightsError(
          f"ImageNet weights for {application} are not at {where} and could not be "
          f"downloaded from {origin} ({type(e).__name__}); copy that file to {where} "
          f"or pass its path as the weights") from None
  else:
    path = os.path.expanduser(weights)
    if not os.path.isfile(path):
      raise WeightsError(f"weights file {path} does not exist; give the path of a "
                         ".h5 weights file, or 'imagenet'")
  digest = sha256_of(path)
  if sha256 and digest != sha256.lower():
    raise WeightsError(f"weights file {path} has SHA-256 {digest}, not the expected "
                       f"{sha256}; the file is corrupt or another release")
  logging.info("weights %s sha256 %s", path, digest)
  return path


def load_h5(model, path):
  """Loads a Keras .h5 weights file into `model`; a file that is not one, is cut
  short, or does not fit the model is one WeightsError line."""
  import h5py  # pylint: disable=g-import-not-at-top
  try:
    with h5py.File(path, "r"):
      pass
  except OSError:
    raise WeightsError(f"{path} is not a readable HDF5 (.h5) weights file (truncated or "
                       "another format); download it again") from None
  try:
    model.load_weights(path)
  except (ValueError, KeyError, OSError) as e:
    first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    raise WeightsError(f"weights in {path} do not fit {model.name}: {first[:300]}; use "
                       f"the no-top weights of the same architecture") from None
