"""The PyTorch reference of zoo/efficientnet_lite.py, run in the torch peer's Python, and
the inputs both see: scikit-learn's two sample photos, made alike by PIL and NumPy.

`reference_logits(python, variant, weights, images)` runs efficientnet-lite-pytorch
0.1.0 (third_party/py/requirements_torch_lock.txt) in `python` (ZOO_TORCH_PYTHON,
tests/torch_python.py): `EfficientNet.from_pretrained('efficientnet-<variant>',
weights_path=weights, image_size=(H, W))`, in eval mode (float32, as it runs, or
float64), on NHWC pipeline-normalised `images`. Its Conv2dStaticSamePadding pads for
the `image_size` it is given: TensorFlow's SAME at that size (left at the variant's
resolution, it would pad a 225-pixel side as a 224-pixel one).

`timm_key` renames the reference's tensors to timm's tf_efficientnet_lite names.

`photos(height, width)`: china.jpg and flower.jpg (sklearn.datasets.load_sample_images,
427 x 640) resized bicubically by PIL so that the larger of height and width is 87.5%
of the resized shorter side (224 -> 256, 240 -> 274, 260 -> 297), the centred height x
width crop, (x / 255 - 0.5) / 0.5: float32 NHWC. `digest` is the SHA-256 of an array's
bytes, recorded with the fixtures so that a test knows it fed the same pixels.
"""

import hashlib
import json
import os
import re
import subprocess
import tempfile

import numpy as np

CROP = 0.875
DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
FIXTURES = os.path.join(DATA, "efficientnet_lite_photos.json")
TIMM = os.path.join(DATA, "timm_efficientnet_lite.json")

# The reference's state dict keys -> timm's tf_efficientnet_lite (written apart from
# zoo.efficientnet_lite.module_name, so that a test of one checks the other): blocks a
# stage (Tan & Le's table 1 repeats; Lite1 and Lite2 scale all but the first and last
# by ceil(1.1 r) and ceil(1.2 r)), MBConvBlock's modules as timm's InvertedResidual's,
# and the first stage's (no expansion) as its DepthwiseSeparableConv's.
REPEATS = {"lite0": (1, 2, 2, 3, 3, 4, 1), "lite1": (1, 3, 3, 4, 4, 5, 1),
           "lite2": (1, 3, 3, 4, 4, 5, 1)}
_TIMM_IR = {"_expand_conv": "conv_pw", "_bn0": "bn1", "_depthwise_conv": "conv_dw",
            "_bn1": "bn2", "_project_conv": "conv_pwl", "_bn2": "bn3"}
_TIMM_DS = {"_depthwise_conv": "conv_dw", "_bn1": "bn1", "_project_conv": "conv_pw",
            "_bn2": "bn2"}
_TIMM_FIXED = {"_conv_stem": "conv_stem", "_bn0": "bn1", "_conv_head": "conv_head",
               "_bn1": "bn2", "_fc": "classifier"}

# Run by the torch interpreter: argv = variant, weights, dtype, then (inputs .npy,
# output .npy) pairs.
_SCRIPT = """
import sys
import numpy as np
import torch
from efficientnet_lite_pytorch import EfficientNet

variant, weights, dtype, *files = sys.argv[1:]
torch.set_num_threads(2)
for inputs, output in zip(files[::2], files[1::2]):
  images = np.load(inputs)
  model = EfficientNet.from_pretrained(f"efficientnet-{variant}", weights_path=weights,
                                       image_size=tuple(images.shape[1:3]))
  model = model.to(getattr(torch, dtype)).eval()
  with torch.no_grad():
    x = torch.from_numpy(images.transpose(0, 3, 1, 2).astype(dtype))
    np.save(output, model(x).numpy().astype(np.float64))
"""


def photos(height, width):
  """The two sample photos at height x width, pipeline-normalised (module docstring)."""
  from PIL import Image  # pylint: disable=g-import-not-at-top
  from sklearn.datasets import load_sample_images  # pylint: disable=g-import-not-at-top
  batch = []
  for image in load_sample_images().images:
    rows, cols = image.shape[:2]
    scale = max(height, width) / CROP / min(rows, cols)
    size = (round(cols * scale), round(rows * scale))
    resized = np.asarray(Image.fromarray(image).resize(size, Image.BICUBIC), np.float32)
    top, left = (resized.shape[0] - height) // 2, (resized.shape[1] - width) // 2
    batch.append(resized[top:top + height, left:left + width])
  return ((np.stack(batch) / 255.0 - 0.5) / 0.5).astype(np.float32)


def random_images(height, width, count=2, seed=7):
  """`count` normal(0, 1) inputs (pipeline-normalised scale), float32 NHWC."""
  rng = np.random.Generator(np.random.PCG64(seed))
  return rng.normal(0.0, 1.0, (count, height, width, 3)).astype(np.float32)


def digest(array):
  return hashlib.sha256(np.ascontiguousarray(array).tobytes()).hexdigest()


def reference_logits(python, variant, weights, images, dtype="float32", timeout=240):
  """The reference's logits of `images` (NHWC), or of each batch of a list of them,
  in `dtype` (module docstring); one process."""
  batches = [images] if isinstance(images, np.ndarray) else list(images)
  with tempfile.TemporaryDirectory() as folder:
    files = []
    for number, batch in enumerate(batches):
      inputs = os.path.join(folder, f"x{number}.npy")
      np.save(inputs, batch)
      files += [inputs, os.path.join(folder, f"y{number}.npy")]
    done = subprocess.run([python, "-c", _SCRIPT, variant, weights, dtype, *files],
                          capture_output=True, text=True, timeout=timeout, check=False)
    if done.returncode:
      raise RuntimeError(f"the reference failed in {python}: {done.stderr[-2000:]}")
    logits = [np.load(y) for y in files[1::2]]
  return logits[0] if isinstance(images, np.ndarray) else logits


def timm_key(key, variant):
  """timm's name for the reference's state dict key `key` of `variant`."""
  match = re.fullmatch(r"_blocks\.([0-9]+)\.(\w+)\.(\w+)", key)
  if not match:
    module, param = key.split(".")
    return f"{_TIMM_FIXED[module]}.{param}"
  number, module, param = int(match.group(1)), match.group(2), match.group(3)
  for stage, count in enumerate(REPEATS[variant]):
    if number < count:
      parts = _TIMM_DS if stage == 0 else _TIMM_IR
      return f"blocks.{stage}.{number}.{parts[module]}.{param}"
    number -= count
  raise KeyError(key)


def softmax(logits):
  z = np.exp(logits - logits.max(axis=-1, keepdims=True))
  return z / z.sum(axis=-1, keepdims=True)


def load_fixtures(path=FIXTURES):
  with open(path, encoding="utf-8") as f:
    return json.load(f)
