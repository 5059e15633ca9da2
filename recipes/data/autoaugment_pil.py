"""AutoAugment's CIFAR-10 policy as the widely copied PIL port defines it (DeepVoltaire/
AutoAugment autoaugment.py; the copy Ren et al. 2020 train with:
jiawei-ren/BalancedMetaSoftmax-Classification@34a61e4 data/autoaugment.py,
`CIFAR10Policy`), for `InputPipeline.autoaugment = 'cifar10_pil'`.

Each image: one of the 25 sub-policies, uniformly; each of its two ops applied with its
probability at magnitude index m (0-9) of the op's range:

    shearX/Y  linspace(0, 0.3, 10)        translateX/Y  linspace(0, 150/331, 10) x side
    rotate    linspace(0, 30, 10) degrees  color, contrast, sharpness, brightness:
    posterize round(linspace(8, 4, 10))       factor 1 +- linspace(0, 0.9, 10)
              bits kept                    solarize  threshold linspace(256, 0, 10)
    autocontrast, equalize, invert: no magnitude

Shears, translations and the four enhancements take a random sign; rotate does not (in
their copy it turns counter-clockwise only: the sign was added upstream in 2021). The
fill is grey 128. Model Garden's 'reduced_cifar10' has the same sub-policies at level /
10 of each op's own maximum; here the magnitudes are theirs.

The ops are Model Garden's TF ports of PIL's (`official.vision.ops.augment`), except
solarize (PIL's `i < threshold` kept for fractional thresholds), contrast (PIL's
degenerate image is the mean of the image's L-mode grey levels; Model Garden's uses
tf.image.adjust_contrast, a per-channel mean) and autocontrast (PIL's table in float64:
Model Garden's float32 turns PIL's 254 at the maximum into 255). Not matched: PIL
shears with bicubic resampling and translates by fractional pixels with its own
nearest-pixel rule (Model Garden's transform samples the nearest pixel); Model
Garden's colour op takes TF's grey levels (float weights, not PIL's integer L).
"""

import math

import numpy as np
import tensorflow as tf

from official.vision.ops import augment as mg_augment

FILL = 128

RANGES = {
    "shearX": np.linspace(0, 0.3, 10),
    "shearY": np.linspace(0, 0.3, 10),
    "translateX": np.linspace(0, 150 / 331, 10),
    "translateY": np.linspace(0, 150 / 331, 10),
    "rotate": np.linspace(0, 30, 10),
    "color": np.linspace(0.0, 0.9, 10),
    "posterize": np.round(np.linspace(8, 4, 10), 0).astype(int),
    "solarize": np.linspace(256, 0, 10),
    "contrast": np.linspace(0.0, 0.9, 10),
    "sharpness": np.linspace(0.0, 0.9, 10),
    "brightness": np.linspace(0.0, 0.9, 10),
    "autocontrast": [0] * 10,
    "equalize": [0] * 10,
    "invert": [0] * 10,
}

# (p1, op1, magnitude index 1, p2, op2, magnitude index 2), CIFAR10Policy's order.
CIFAR10_POLICY = (
    (0.1, "invert", 7, 0.2, "contrast", 6),
    (0.7, "rotate", 2, 0.3, "translateX", 9),
    (0.8, "sharpness", 1, 0.9, "sharpness", 3),
    (0.5, "shearY", 8, 0.7, "translateY", 9),
    (0.5, "autocontrast", 8, 0.9, "equalize", 2),
    (0.2, "shearY", 7, 0.3, "posterize", 7),
    (0.4, "color", 3, 0.6, "brightness", 7),
    (0.3, "sharpness", 9, 0.7, "brightness", 9),
    (0.6, "equalize", 5, 0.5, "equalize", 1),
    (0.6, "contrast", 7, 0.6, "sharpness", 5),
    (0.7, "color", 7, 0.5, "translateX", 8),
    (0.3, "equalize", 7, 0.4, "autocontrast", 8),
    (0.4, "translateY", 3, 0.2, "sharpness", 6),
    (0.9, "brightness", 6, 0.2, "color", 8),
    (0.5, "solarize", 2, 0.0, "invert", 3),
    (0.2, "equalize", 0, 0.6, "autocontrast", 0),
    (0.2, "equalize", 8, 0.6, "equalize", 4),
    (0.9, "color", 9, 0.6, "equalize", 6),
    (0.8, "autocontrast", 4, 0.2, "solarize", 8),
    (0.1, "brightness", 3, 0.7, "color", 0),
    (0.4, "solarize", 5, 0.9, "autocontrast", 3),
    (0.9, "translateY", 9, 0.7, "translateY", 9),
    (0.9, "autocontrast", 2, 0.8, "solarize", 3),
    (0.8, "equalize", 8, 0.1, "invert", 3),
    (0.7, "translateY", 9, 0.9, "autocontrast", 1),
)


def solarize(image, threshold):
  """PIL's ImageOps.solarize: pixels i >= threshold become 255 - i."""
  below = tf.cast(image, tf.int32) < int(math.ceil(threshold))  # i < t for any real t
  return tf.where(below, image, 255 - image)


def contrast(image, factor):
  """PIL's ImageEnhance.Contrast: a blend with the grey image of the rounded mean of
  the L-mode grey levels (L = (19595 R + 38470 G + 7471 B + 2^15) >> 16)."""
  rgb = tf.cast(image, tf.int32)
  grey = (rgb[..., 0] * 19595 + rgb[..., 1] * 38470 + rgb[..., 2] * 7471 + 0x8000) // 65536
  mean = tf.floor(tf.reduce_mean(tf.cast(grey, tf.float32)) + 0.5)
  degenerate = tf.cast(tf.fill(tf.shape(image), mean), tf.uint8)
  return mg_augment.blend(degenerate, image, factor)


def autocontrast(image):
  """PIL's ImageOps.autocontrast (cutoff 0): per channel, int(i * scale + offset) with
  scale = 255 / (hi - lo), offset = -lo * scale in float64; unchanged where hi <= lo."""
  x = tf.cast(image, tf.float64)
  lo = tf.reduce_min(x, axis=[0, 1], keepdims=True)
  hi = tf.reduce_max(x, axis=[0, 1], keepdims=True)
  scale = 255.0 / tf.where(hi > lo, hi - lo, 1.0)
  out = tf.clip_by_value(tf.floor(x * scale + (-lo * scale)), 0, 255)
  return tf.cast(tf.where(hi > lo, out, x), tf.uint8)


def _transform(image, matrix):
  """Model Garden's projective transform, nearest pixel, grey outside (its shear,
  translate and rotate ops reflect the image there instead of filling)."""
  return mg_augment.transform(image, matrix, interpolation="nearest", fill_mode="constant",
                              fill_value=float(FILL))


SIGNED = ("shearX", "shearY", "translateX", "translateY", "color", "contrast",
          "sharpness", "brightness")


def apply_op(name, image, magnitude, sign=1.0):
  """Op `name` of their SubPolicy on a uint8 HxWx3 image at `magnitude` (a value of
  RANGES[name]); `sign` (+1.0 or -1.0) for the ops in SIGNED, which draw one."""
  magnitude = float(magnitude)
  # PIL's affine (a, b, c, d, e, f) reads input (a x + b y + c, d x + e y + f) for
  # output (x, y), as Model Garden's projective transform; outside: grey FILL.
  affine = {"shearX": lambda: [1.0, magnitude * sign, 0.0, 0.0, 1.0, 0.0],
            "shearY": lambda: [1.0, 0.0, 0.0, magnitude * sign, 1.0, 0.0],
            "translateX": lambda: [1.0, 0.0, magnitude * image.shape[1] * sign,
                                   0.0, 1.0, 0.0],
            "translateY": lambda: [1.0, 0.0, 0.0, 0.0, 1.0,
                                   magnitude * image.shape[0] * sign]}
  if name in affine:
    return _transform(image, tf.constant(affine[name]() + [0.0, 0.0], tf.float32))
  if name == "rotate":  # PIL's and Model Garden's positive angles: counter-clockwise
    height, width = float(image.shape[0]), float(image.shape[1])
    matrix = mg_augment._convert_angles_to_transform(  # pylint: disable=protected-access
        angles=tf.constant(math.radians(magnitude), tf.float32), image_width=width,
        image_height=height)
    return _transform(image, matrix)
  enhance = {"color": mg_augment.color, "contrast": contrast,
             "sharpness": mg_augment.sharpness, "brightness": mg_augment.brightness}
  if name in enhance:
    return enhance[name](image, 1.0 + magnitude * sign)
  if name == "posterize":
    return mg_augment.posterize(image, int(magnitude))
  if name == "solarize":
    return solarize(image, float(magnitude))
  if name == "autocontrast":
    return autocontrast(image)
  if name == "equalize":
    return mg_augment.equalize(image)
  if name == "invert":
    return mg_augment.invert(image)
  raise ValueError(f"unknown AutoAugment op {name!r}")


def _signed(image, name, magnitude):
  """The op at a random sign (`random.choice([-1, 1])`) where theirs draws one."""
  if name not in SIGNED:
    return apply_op(name, image, magnitude)
  return tf.cond(tf.random.uniform([]) < 0.5,
                 lambda: apply_op(name, image, magnitude, -1.0),
                 lambda: apply_op(name, image, magnitude, 1.0))


def _maybe(image, probability, name, index):
  """`random.random() < p` then the op, as their SubPolicy.__call__."""
  if probability <= 0:
    return image
  magnitude = RANGES[name][index]
  return tf.cond(tf.random.uniform([]) < probability,
                 lambda: _signed(image, name, magnitude), lambda: image)


class CIFAR10Policy:
  """Their CIFAR10Policy: `distort(image)` on a uint8 HxWx3 image (Model Garden's
  AutoAugment interface), drawing with TF's stateful random ops as Model Garden's."""

  def __init__(self, policy=CIFAR10_POLICY):
    self.policy = tuple(policy)

  def sub_policy(self, image, index):
    p1, op1, m1, p2, op2, m2 = self.policy[index]
    return _maybe(_maybe(image, p1, op1, m1), p2, op2, m2)

  def distort(self, image):
    index = tf.random.uniform([], 0, len(self.policy), dtype=tf.int32)
    branches = [lambda i=i: self.sub_policy(image, i) for i in range(len(self.policy))]
    return tf.ensure_shape(tf.switch_case(index, branches), image.shape)
