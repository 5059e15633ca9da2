"""Deterministic weights in timm's layout, made alike by NumPy alone (the tests, no
torch) and by tests/zoo/data/make_timm_fixtures.py (which loads them into timm's own
models, in a torch + timm environment, to record timm's logits).

Each tensor of a timm `state_dict` is drawn from NumPy's PCG64 seeded by the SHA-256
of its key, by what its key names: convolutions and linear layers He-scaled normal
(std sqrt(2 / fan_in); 1 / fan_in for linear), BatchNorm gamma in [0.5, 1.5], beta
and biases normal(0, 0.1), running means normal(0, 0.2), running variances in
[0.5, 2], NFNet conv gains in [0.5, 1.5] and skipinit gains in [0.5, 1.5] (so every
residual branch counts), BatchNorm's num_batches_tracked 0.

data/timm_manifests.json.gz: {architecture: {"classes": C, "tensors": [[key, dtype,
shape], ...]}}, timm's state_dict in order; data/timm_logits.json: {architecture:
{"image": [H, W], "logits": timm's float64 logits of `images(...)`, "float32_error":
max |timm's float32 logits - its float64 logits|, "digest": `digest` of the weights}};
data/timm_configs.json: {architecture: the config.json timm writes to the hub for the
FORWARD tag, "tags": {architecture: timm's pretrained tags}}.
"""

import gzip
import hashlib
import json
import os

import numpy as np

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
MANIFESTS = os.path.join(DATA, "timm_manifests.json.gz")
LOGITS = os.path.join(DATA, "timm_logits.json")
CONFIGS = os.path.join(DATA, "timm_configs.json")
# Architectures whose logits are recorded (a forward pass each), their class count and
# input (H, W): even and odd sides, not square, so that transposed kernels, PyTorch's
# symmetric and TensorFlow's SAME padding, and partial pooling windows all show.
# The tag is the pretrained configuration whose hub config.json the test writes.
FORWARD = {
    "resnet50": dict(classes=7, image=(64, 81), tag="a1_in1k"),
    "resnext50_32x4d": dict(classes=7, image=(64, 81), tag="a1h_in1k"),
    "inception_v3": dict(classes=7, image=(80, 97), tag="tf_in1k"),
    "dm_nfnet_f0": dict(classes=7, image=(64, 81), tag="dm_in1k"),
}
# Architectures checked by their tensors' names and shapes alone (as the hub serves
# them: 1000 classes).
NAMES_ONLY = ("resnext101_32x8d",) + tuple(f"dm_nfnet_f{i}" for i in range(1, 7))
IMAGES = 2


def _seed(key):
  return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "little")


def tensor(key, dtype, shape):
  """The tensor `key` of `shape` ("float32" or "int64")."""
  shape = tuple(shape)
  if dtype == "int64":
    return np.zeros(shape, np.int64)  # BatchNorm's num_batches_tracked
  rng = np.random.Generator(np.random.PCG64(_seed(key)))
  name = key.rsplit(".", 1)[-1]
  if name == "running_var":
    value = rng.uniform(0.5, 2.0, shape)
  elif name == "running_mean":
    value = rng.normal(0.0, 0.2, shape)
  elif name in ("gain", "skipinit_gain") or (name == "weight" and len(shape) == 1):
    value = rng.uniform(0.5, 1.5, shape)  # NFNet gains, BatchNorm gamma
  elif name == "bias":
    value = rng.normal(0.0, 0.1, shape)
  elif name == "weight" and len(shape) in (2, 4):
    fan_in = int(np.prod(shape[1:]))
    value = rng.normal(0.0, np.sqrt((2.0 if len(shape) == 4 else 1.0) / fan_in), shape)
  else:
    raise ValueError(f"no rule for timm tensor {key} {shape}")
  return value.astype(np.float32)


def state(tensors):
  """{key: array} of a manifest's [[key, dtype, shape], ...]."""
  return {key: tensor(key, dtype, shape) for key, dtype, shape in tensors}


def digest(weights):
  """SHA-256 over the keys and bytes of `weights` ({key: array}), in key order."""
  h = hashlib.sha256()
  for key in sorted(weights):
    h.update(key.encode())
    h.update(np.ascontiguousarray(weights[key]).tobytes())
  return h.hexdigest()


def images(architecture):
  """IMAGES pipeline-normalised inputs, NHWC float32."""
  height, width = FORWARD[architecture]["image"]
  rng = np.random.Generator(np.random.PCG64(7))
  return rng.normal(0.0, 1.0, (IMAGES, height, width, 3)).astype(np.float32)


def load(path):
  """A fixture file's JSON (gzip-compressed when its name ends .gz)."""
  opener = gzip.open if path.endswith(".gz") else open
  with opener(path, "rt", encoding="utf-8") as f:
    return json.load(f)
