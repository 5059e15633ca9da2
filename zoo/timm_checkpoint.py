"""timm checkpoints into zoo models: `zoo.build(name, weights='.../model.safetensors')`.

The file is the one the Hugging Face hub serves for a timm model (e.g.
`timm/resnet50.a1_in1k`: `model.safetensors`, its `state_dict`), read with the
`safetensors` package into NumPy (no torch). Each zoo model takes one timm
architecture (`ARCHITECTURES`) and is built for it in the checkpoint's conventions:

    zoo model            timm architecture    built as
    resnet50_v1_5        resnet50             zoo/resnext.py's torchvision layout, 1 group
    resnext50_32x4d      resnext50_32x4d      zoo/resnext.py (already torchvision's)
    resnext101_32x8d     resnext101_32x8d     zoo/resnext.py
    inception_v3         inception_v3         zoo/inception_torchvision.py
    nfnet_f0 ... f6      dm_nfnet_f0 ... f6   zoo/nfnet.py with the erf GELU and timm's
                                              weight standardisation (var + 1e-5)
    efficientnet_lite0   tf_efficientnet_     zoo/efficientnet_lite.py (as Google's
    ... lite2            lite0 ... lite2      checkpoints: TensorFlow's SAME padding)

(PyTorch pads symmetrically before strided convolutions, BatchNorm epsilon 1e-5, the
Inception pools count their padding: the layouts above do the same; timm's dm_nfnet
and tf_efficientnet_lite pad as TensorFlow, Conv2dSame.) Every tensor is mapped by
name (`timm_name`), transposed to tf_keras's layout (convolutions OIHW -> HWIO,
depthwise ones (C, 1, k, k) -> (k, k, C, 1), linear layers (out, in) -> (in, out),
NFNet gains (O, 1, 1, 1) -> (O,)), and its shape and dtype (float32) checked. Every
tensor of the file is used, or loading stops naming the unused and the missing ones;
only BatchNorm's `num_batches_tracked` counters and Inception's auxiliary classifier
(`AuxLogits.*`, in timm's tv_in1k file; the zoo model has no auxiliary head) are read
past. A head (the classifier) with another class count is replaced by a fresh one.

The checkpoint's timm configuration is the hub's `config.json` beside the file (its
`pretrained_cfg`): its mean and std, input size, test input size, crop fraction and
interpolation make the card that `zoo.build` attaches (`card_from_config`), which
the run's pipeline reads where the user binds nothing else, and records.
"""

import dataclasses
import json
import os
import re

from absl import logging
import numpy as np
from safetensors import safe_open
from safetensors import SafetensorError

from zoo import card as card_lib
from zoo import efficientnet_lite
from zoo import inception_torchvision
from zoo import nfnet
from zoo import pretrained
from zoo import resnext

# zoo model -> the timm architecture whose checkpoints it takes.
ARCHITECTURES = {
    "resnet50_v1_5": "resnet50",
    "resnext50_32x4d": "resnext50_32x4d",
    "resnext101_32x8d": "resnext101_32x8d",
    "inception_v3": "inception_v3",
    **{f"nfnet_f{i}": f"dm_nfnet_f{i}" for i in range(7)},
    **{f"efficientnet_{v}": f"tf_efficientnet_{v}" for v in efficientnet_lite.VARIANTS},
}
SUFFIX = ".safetensors"
CONFIG = "config.json"  # beside the weights, as the hub serves it
# timm's DeepMind-compatible NFNets (timm/models/nfnet.py, _dm_nfnet_cfg): erf GELU,
# gamma in the activation, ScaledStdConv2dSame with NfCfg.std_conv_eps.
NFNET_KNOBS = {"activation": "gelu_exact", "ws_variance_eps": 1e-5}
CIFAR_RESNET_BLOCKS = r"^(stage[0-9]/block[0-9]+)/"
NFNET_BLOCKS = r"^(nf_block_[0-9]+)/"
_KERAS_PARAM = {"kernel": "weight", "depthwise_kernel": "weight", "bias": "bias",
                "gamma": "weight", "beta": "bias", "moving_mean": "running_mean",
                "moving_variance": "running_var", "gain": "gain"}


class TimmError(pretrained.WeightsError):
  """A timm checkpoint that cannot be read or does not fit: one line saying why."""


def is_timm_weights(weights):
  """Whether `weights` names a timm .safetensors file."""
  return isinstance(weights, str) and weights.lower().endswith(SUFFIX)


# Tensor layouts, PyTorch -> tf_keras: (the PyTorch shape of a Keras shape, convert).
LAYOUTS = {
    "conv": (lambda s: (s[3], s[2], s[0], s[1]), lambda a: a.transpose(2, 3, 1, 0)),
    "linear": (lambda s: (s[1], s[0]), lambda a: a.T),
    "depthwise": (lambda s: (s[2], s[3], s[0], s[1]), lambda a: a.transpose(2, 3, 0, 1)),
    "conv1x1_as_dense": (lambda s: (s[1], s[0], 1, 1), lambda a: a[:, :, 0, 0].T),
    "gain": (lambda s: (s[0], 1, 1, 1), lambda a: a.reshape(-1)),
    "same": (tuple, lambda a: a),
}


def _resnet_module(layer):
  """zoo/resnext.py layer -> timm ResNet module (timm/models/resnet.py)."""
  fixed = {"stem/conv": "conv1", "stem/bn": "bn1", "logits": "fc"}
  if layer in fixed:
    return fixed[layer]
  m = re.fullmatch(r"stage([1-4])/block([0-9]+)/([0-3])_(conv|bn)", layer)
  if not m:
    return None
  stage, block, index, kind = m.groups()
  if index == "0":
    return f"layer{stage}.{block}.downsample.{0 if kind == 'conv' else 1}"
  return f"layer{stage}.{block}.{kind}{index}"


def _inception_module(layer):
  """zoo/inception_torchvision.py layer -> timm module: its path with dots."""
  return "fc" if layer == "logits" else layer.replace("/", ".")


_NF_BLOCK_PARTS = {"conv0": "conv1", "conv1": "conv2", "conv1b": "conv2b", "conv2": "conv3",
                   "conv_shortcut": "downsample.conv", "squeeze_excite/fc0": "attn_last.fc1",
                   "squeeze_excite/fc1": "attn_last.fc2", "skip_gain": "skipinit_gain"}


def _nfnet_module(layer, variant):
  """zoo/nfnet.py layer (DeepMind's names) -> timm NormFreeNet module."""
  fixed = {"final_conv": "final_conv", "logits": "head.fc"}
  if layer in fixed:
    return fixed[layer]
  m = re.fullmatch(r"stem_conv([0-3])", layer)
  if m:
    return f"stem.conv{int(m.group(1)) + 1}"
  m = re.fullmatch(r"nf_block_([0-9]+)/(.+)", layer)
  if not m or m.group(2) not in _NF_BLOCK_PARTS:
    return None
  index = int(m.group(1))
  for stage, depth in enumerate(nfnet.VARIANTS[variant].depths):
    if index < depth:
      return f"stages.{stage}.{index}.{_NF_BLOCK_PARTS[m.group(2)]}"
    index -= depth
  return None


def timm_name(zoo_name, layer, weight, shape):
  """(timm key, layout) of the zoo weight `weight` ("kernel", "gamma", ...) of `layer`
  in zoo model `zoo_name`, `shape` its Keras shape."""
  arch = ARCHITECTURES[zoo_name]
  if arch.startswith("dm_nfnet"):
    module = _nfnet_module(layer, zoo_name.split("_")[1].upper())
  elif arch.startswith("tf_efficientnet_lite"):
    module = efficientnet_lite.module_name(zoo_name, layer, "timm")
  elif arch == "inception_v3":
    module = _inception_module(layer)
  else:
    module = _resnet_module(layer)
  if module is None or (weight not in _KERAS_PARAM and weight != "skip_gain"):
    raise TimmError(f"zoo model {zoo_name} has a weight {layer}/{weight} with no timm "
                    f"{arch} name")
  if weight == "skip_gain":
    return module, "same"
  key = f"{module}.{_KERAS_PARAM[weight]}"
  if weight == "depthwise_kernel":
    return key, "depthwise"
  if len(shape) == 4:
    return key, "conv"
  if weight == "kernel" and len(shape) == 2:
    return key, "conv1x1_as_dense" if "squeeze_excite" in layer else "linear"
  if weight == "gain":
    return key, "gain"
  return key, "same"


def expected_tensors(model, zoo_name):
  """{timm key: (Keras variable, layout, PyTorch shape)} for every weight of `model`."""
  tensors = {}
  for layer in model.layers:
    for variable in layer.weights:
      weight = variable.name.rsplit("/", 1)[-1].split(":")[0]
      key, layout = timm_name(zoo_name, layer.name, weight, tuple(variable.shape))
      if key in tensors:
        raise TimmError(f"two weights of {zoo_name} map to timm's {key}")
      tensors[key] = (variable, layout, LAYOUTS[layout][0](tuple(variable.shape)))
  return tensors


def _head_keys(zoo_name):
  if zoo_name.startswith("efficientnet_lite"):
    return {"classifier.weight", "classifier.bias"}
  return {"fc.weight", "fc.bias"} if not zoo_name.startswith("nfnet") else {
      "head.fc.weight", "head.fc.bias"}


def _listing(keys, first=3):
  keys = sorted(keys)
  more = f", ... ({len(keys)} in all)" if len(keys) > first else ""
  return ", ".join(keys[:first]) + more


def read_header(path):
  """{key: (dtype, shape)} of the safetensors file at `path`, its data not read; a
  missing, truncated or foreign file is one TimmError line."""
  if not os.path.isfile(path):
    raise TimmError(f"weights file {path} does not exist; give the path of timm's "
                    "model.safetensors (docs/zoo.md: fine-tune from timm)")
  try:
    with safe_open(path, framework="numpy") as f:
      return {key: (f.get_slice(key).get_dtype(), tuple(f.get_slice(key).get_shape()))
              for key in f.keys()}
  except SafetensorError as e:
    with open(path, "rb") as f:
      starts_as_one = f.read(9)[8:] == b"{"  # a u64 header length, then its JSON
    if starts_as_one and ("incomplete metadata" in str(e)
                          or "invalid header length" in str(e)):
      raise TimmError(f"{path} is truncated: its safetensors header describes more "
                      f"than the file's {os.path.getsize(path)} bytes; download "
                      "model.safetensors again") from None
    raise TimmError(f"{path} is not a safetensors file ({str(e).split(': ')[-1]}); give "
                    "timm's model.safetensors from the Hugging Face hub, not a "
                    "PyTorch .pth or .bin") from None


def read_config(path, zoo_name):
  """The hub's config.json beside `path`: {"architecture", "pretrained_cfg", ...}."""
  arch = ARCHITECTURES[zoo_name]
  where = os.path.join(os.path.dirname(os.path.abspath(path)), CONFIG)
  fetch = (f"download it with the weights: hf download timm/{arch}.<tag> "
           f"model.safetensors {CONFIG} --local-dir <dir>")
  if not os.path.isfile(where):
    raise TimmError(f"no {CONFIG} beside {path}: the timm configuration (mean, std, "
                    f"input size, crop) is read from it; {fetch}")
  try:
    with open(where, encoding="utf-8") as f:
      config = json.load(f)
  except (OSError, UnicodeDecodeError, ValueError) as e:
    raise TimmError(f"{where} is not readable JSON ({type(e).__name__}); {fetch}") from None
  if not isinstance(config, dict) or not isinstance(config.get("pretrained_cfg"), dict):
    raise TimmError(f"{where} has no pretrained_cfg: it is not a timm model's "
                    f"{CONFIG}; {fetch}")
  if config.get("architecture") != arch:
    raise TimmError(f"{where} describes timm's {config.get('architecture')!r}, but zoo "
                    f"model {zoo_name} takes timm's {arch} checkpoints; use the zoo model "
                    f"for {config.get('architecture')!r} (docs/zoo.md), or timm's {arch}")
  return config


def card_from_config(base, config, block_pattern, where=CONFIG):
  """`base` (the zoo card) with the checkpoint's input statistics: timm's input_size
  (training), test_input_size and test_crop_pct (timm's own evaluation; else
  input_size and crop_pct), interpolation, mean and std."""
  cfg = config["pretrained_cfg"]

  def side(field):
    size = cfg.get(field)
    if (not isinstance(size, (list, tuple)) or len(size) != 3
        or not all(isinstance(s, int) and s > 0 for s in size) or size[1] != size[2]):
      raise TimmError(f"{where}: pretrained_cfg.{field}={size!r} is not (3, S, S); the "
                      "pipeline's sizes are square: bind IMAGE_SIZE and "
                      "InputPipeline.eval_image_size")
    return size[1]

  train_size = side("input_size")
  tested = cfg.get("test_input_size") is not None
  test_size = side("test_input_size") if tested else train_size
  crop = cfg.get("crop_pct", 0.875)  # timm.data's DEFAULT_CROP_PCT
  if tested and cfg.get("test_crop_pct") is not None:
    crop = cfg["test_crop_pct"]
  try:
    card = dataclasses.replace(
        base, train_size=train_size, test_size=test_size, test_crop=crop,
        resize_method=cfg.get("interpolation"), mean=tuple(cfg.get("mean") or ()),
        std=tuple(cfg.get("std") or ()), test_crop_padding=None,
        block_pattern=block_pattern)
  except (TypeError, ValueError) as e:
    raise TimmError(f"{where}: pretrained_cfg does not make a model card ({e})") from None
  if cfg.get("crop_mode", "center") != "center":
    logging.info("timm evaluates this checkpoint with crop_mode=%r; the pipeline takes "
                 "the centred square of %.3f of the shorter side", cfg["crop_mode"], crop)
  return card


def convert(model, zoo_name, path):
  """Assigns timm's tensors in the safetensors file `path` to `model`; returns
  {"head": whether the file's head was loaded, "skipped": keys read past}."""
  arch = ARCHITECTURES[zoo_name]
  header = read_header(path)
  wanted = expected_tensors(model, zoo_name)
  head_keys = _head_keys(zoo_name)
  head = all(k in header and header[k][1] == wanted[k][2] for k in head_keys)
  skipped = {k for k in header if k.endswith(".num_batches_tracked")
             and k[:-len("num_batches_tracked")] + "running_mean" in wanted}
  if arch == "inception_v3":
    skipped |= {k for k in header if k.startswith("AuxLogits.")}
  if not head and head_keys <= set(header):
    skipped |= head_keys  # another class count: the head is replaced
    wanted = {k: v for k, v in wanted.items() if k not in head_keys}
  unused = set(header) - set(wanted) - skipped
  missing = set(wanted) - set(header)
  if unused or missing:
    parts = []
    if unused:
      parts.append(f"{len(unused)} tensors of the file have no place in it "
                   f"({_listing(unused)})")
    if missing:
      parts.append(f"{len(missing)} of its weights are not in the file "
                   f"({_listing(missing)})")
    raise TimmError(f"{path} does not fit zoo model {zoo_name} (timm's {arch}): "
                    f"{'; '.join(parts)}; it is a checkpoint of another architecture "
                    f"(docs/zoo.md lists the timm names each zoo model takes)")
  for key, (_, layout, shape) in sorted(wanted.items()):
    dtype, got = header[key]
    if got != shape:
      raise TimmError(f"{path}: {key} has shape {got}, but zoo model {zoo_name} needs "
                      f"{shape} (timm's layout); it is a checkpoint of another "
                      "architecture or width")
    if dtype != "F32":
      raise TimmError(f"{path}: {key} is {dtype}, not float32 (F32) as timm saves "
                      "its checkpoints; download model.safetensors again")
  with safe_open(path, framework="numpy") as f:
    for key, (variable, layout, _) in wanted.items():
      variable.assign(np.array(LAYOUTS[layout][1](f.get_tensor(key)), order="C"))
  return {"head": head, "skipped": sorted(skipped)}


def block_pattern(zoo_name):
  """The block regex of the layout built for zoo model `zoo_name`'s timm checkpoints."""
  arch = ARCHITECTURES[zoo_name]
  if arch.startswith("dm_nfnet"):
    return NFNET_BLOCKS
  if arch.startswith("tf_efficientnet_lite"):
    return efficientnet_lite.BLOCKS
  return inception_torchvision.BLOCKS if arch == "inception_v3" else CIFAR_RESNET_BLOCKS


def _build_model(zoo_name, num_classes, input_shape, overrides):
  """The zoo model in the layout of timm's architecture (module docstring)."""
  arch = ARCHITECTURES[zoo_name]
  if arch.startswith("dm_nfnet"):
    clash = {k: overrides[k] for k in NFNET_KNOBS if k in overrides
             and overrides[k] != NFNET_KNOBS[k]}
    if clash:
      raise TimmError(f"timm's {arch} is built with {NFNET_KNOBS}; drop {clash}")
    return nfnet.nfnet(zoo_name.split("_")[1].upper(), num_classes=num_classes,
                       input_shape=input_shape, **{**overrides, **NFNET_KNOBS})
  if arch == "inception_v3":
    return inception_torchvision.inception_v3(num_classes=num_classes,
                                              input_shape=input_shape, **overrides)
  if arch.startswith("tf_efficientnet_lite"):
    return efficientnet_lite.efficientnet_lite(zoo_name, num_classes=num_classes,
                                               input_shape=input_shape, **overrides)
  return resnext.resnext(arch, num_classes=num_classes, input_shape=input_shape,
                         **overrides)


def not_for_timm(zoo_name):
  """The error for a timm checkpoint given to a zoo model that takes none."""
  takes = ", ".join(f"{z} ({a})" for z, a in ARCHITECTURES.items())
  return TimmError(f"zoo model {zoo_name} takes no timm checkpoint; the zoo models that "
                   f"do, with the timm architecture each takes: {takes}")


def build(zoo_name, weights, base_card, num_classes, input_shape, sha256=None,
          **overrides):
  """Zoo model `zoo_name` built for and loaded from timm's checkpoint `weights` (a
  model.safetensors with the hub's config.json beside it), carrying the checkpoint's
  card. `overrides` go to the builder (e.g. dropout=, bn_momentum=)."""
  if zoo_name not in ARCHITECTURES:
    raise not_for_timm(zoo_name)
  path = os.path.expanduser(weights)
  read_header(path)  # a bad file or configuration fails before anything is built
  config = read_config(path, zoo_name)
  card = card_from_config(base_card, config, block_pattern(zoo_name),
                          os.path.join(os.path.dirname(os.path.abspath(path)), CONFIG))
  digest = pretrained.sha256_of(path)
  if sha256 and digest != sha256.lower():
    raise TimmError(f"weights file {path} has SHA-256 {digest}, not the expected "
                    f"{sha256}; the file is corrupt or another release")
  try:
    model = _build_model(zoo_name, num_classes, input_shape, overrides)
  except TypeError as e:
    raise TimmError(f"zoo.build({zoo_name!r}) for a timm checkpoint: {e}") from None
  done = convert(model, zoo_name, path)
  cfg = config["pretrained_cfg"]
  logging.info("timm %s.%s from %s (sha256 %s): %s; head %s; %d tensors read past%s; "
               "card: train %dpx, test %dpx, crop %.3f, %s, mean %s, std %s",
               ARCHITECTURES[zoo_name], cfg.get("tag", "?"), path, digest,
               "every tensor loaded", "loaded" if done["head"] else
               f"replaced ({num_classes} classes)", len(done["skipped"]),
               f" ({_listing(done['skipped'])})" if done["skipped"] else "",
               card.train_size, card.test_size, card.test_crop, card.resize_method,
               card.mean, card.std)
  return card_lib.attach_card(model, card)
