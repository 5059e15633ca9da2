"""DeepMind's NFNet parameters (Haiku naming) into the zoo's Keras NFNet, exactly.

DeepMind's nfnets code names parameters "<module>/<param>" with Haiku's module paths:

    NFNet/~/stem_conv0/{w,b,gain}                       -> stem_conv0/{kernel,bias,gain}
    NFNet/~/nf_block_3/~/conv1b/{w,b,gain}              -> nf_block_3/conv1b/...
    NFNet/~/nf_block_3/~/squeeze_excite/~/linear/{w,b}  -> nf_block_3/squeeze_excite/fc0
    NFNet/~/nf_block_3/~/squeeze_excite/~/linear_1/...  -> nf_block_3/squeeze_excite/fc1
    NFNet/~/nf_block_3/skip_gain                        -> nf_block_3/skip_gain/skip_gain
    NFNet/~/final_conv/{w,b,gain}                       -> final_conv/...
    NFNet/~/linear/{w,b}                                -> logits/{kernel,bias}

Layouts already agree: convolutions are HWIO in both, Haiku's Linear `w` is
(in, out) like a Dense kernel, gains and biases are per output channel, skip_gain a
scalar. The input is a NumPy .npz archive holding those keys, read with
allow_pickle=False: DeepMind's download (`F0_haiku.npz`) is a dill pickle of the
nested dict, which this module will not unpickle; flatten it once, where you trust
the file, with `np.savez(out, **{f"{m}/{p}": v for m, d in params.items()
for p, v in d.items()})`.
"""

import os
import re
import zipfile

import numpy as np

_PARAMS = {"w": "kernel", "b": "bias", "gain": "gain", "skip_gain": "skip_gain"}
_SE = {"linear": "fc0", "linear_1": "fc1"}


class ConversionError(ValueError):
  """A file that cannot be converted: the message says why and what to do."""


def keras_weight_name(key):
  """The zoo layer/weight name of DeepMind parameter `key`."""
  module, _, param = key.rpartition("/")
  if param not in _PARAMS or not module.startswith("NFNet/~/"):
    raise ConversionError(f"{key!r} is not an NFNet parameter name of DeepMind's code")
  parts = module[len("NFNet/~/"):].split("/~/")
  if parts == ["linear"]:
    parts = ["logits"]
  elif len(parts) == 3 and parts[1] == "squeeze_excite":
    parts[2] = _SE.get(parts[2], parts[2])
  if param == "skip_gain":
    parts.append("skip_gain")
  return "/".join(parts + [_PARAMS[param]])


_KERAS_PARAMS = {v: k for k, v in _PARAMS.items()}
_KERAS_SE = {v: k for k, v in _SE.items()}


def deepmind_key(name):
  """The DeepMind parameter key of zoo weight `name` (the inverse of keras_weight_name)."""
  parts = re.sub(r":\d+$", "", name).split("/")
  param = _KERAS_PARAMS.get(parts.pop())
  if param is None or not parts:
    raise ConversionError(f"{name!r} is not an NFNet weight of the zoo")
  if param == "skip_gain":
    parts.pop()  # nf_block_k/skip_gain/skip_gain -> nf_block_k/skip_gain
  if parts == ["logits"]:
    parts = ["linear"]
  elif len(parts) == 3 and parts[1] == "squeeze_excite":
    parts[2] = _KERAS_SE.get(parts[2], parts[2])
  key = "NFNet/~/" + "/~/".join(parts) + "/" + param
  if keras_weight_name(key) != re.sub(r":\d+$", "", name):
    raise ConversionError(f"{name!r} is not an NFNet weight of the zoo")
  return key


def save_npz(model, path, head=True):
  """Writes the zoo NFNet `model`'s weights as DeepMind's flattened .npz (the format
  `load_npz` reads; the head's only when `head`), through a temporary file."""
  params = {deepmind_key(w.name): np.asarray(w.numpy(), np.float32) for w in model.weights
            if head or not w.name.startswith("logits/")}
  tmp = path + ".tmp.npz"
  np.savez(tmp, **params)
  os.replace(tmp, path)
  return path


def load_npz(path):
  """{key: array} from an .npz archive, never unpickling anything."""
  if not zipfile.is_zipfile(path):
    raise ConversionError(
        f"{path} is not an .npz (zip) archive; DeepMind's F*_haiku.npz download is a "
        "pickle, which is not loaded here: flatten it to an .npz first (see "
        "zoo/nfnet_checkpoint.py)")
  try:
    with np.load(path, allow_pickle=False) as archive:
      return {key: archive[key] for key in archive.files}
  except (ValueError, OSError, zipfile.BadZipFile, EOFError) as e:
    raise ConversionError(f"{path} cannot be read as an .npz archive "
                          f"({type(e).__name__}: {str(e)[:200]}); download it again") from None


def convert(params, model, head=True):
  """Assigns DeepMind `params` ({key: array}) to the zoo NFNet `model`.

  Every weight of `model` (the head's only when `head`) must get exactly one
  parameter of the right shape, and every parameter must find a weight.
  """
  weights = {re.sub(r":\d+$", "", w.name): w for w in model.weights}
  wanted = {name for name in weights if head or not name.startswith("logits/")}
  seen = set()
  for key, value in params.items():
    name = keras_weight_name(key)
    if name.startswith("logits/") and not head:
      continue
    if name not in weights:
      raise ConversionError(f"{key} (as {name}) has no place in model {model.name!r}: "
                            "the checkpoint is of another NFNet variant")
    if tuple(weights[name].shape) != tuple(value.shape):
      raise ConversionError(
          f"{key} has shape {tuple(value.shape)} but {name} is "
          f"{tuple(weights[name].shape)}: the checkpoint is of another NFNet variant "
          "or class count")
    weights[name].assign(np.asarray(value, dtype=np.float32))
    seen.add(name)
  missing = sorted(wanted - seen)
  if missing:
    raise ConversionError(f"the checkpoint lacks {len(missing)} of the model's weights, "
                          f"e.g. {missing[:3]}: it is of another NFNet variant")
  return model


def load_deepmind_weights(model, path, head=None):
  """Loads DeepMind's flattened NFNet .npz at `path` into `model`. `head`: whether
  their classifier is loaded too; None: when it has the model's class count (else the
  model's fresh head stays)."""
  params = load_npz(path)
  if head is None:
    classes = model.output_shape[-1]
    head = params.get("NFNet/~/linear/b", np.zeros(0)).shape == (classes,)
  return convert(params, model, head=head)
