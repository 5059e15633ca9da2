"""Model cards: what a zoo model's weights expect of its input, in one place.

A `ModelCard` holds a model's training and test resolutions, its evaluation crop and
resize method, the pipeline normalisation (x / 255 - mean) / std, its RandAugment
setting and the regex naming its blocks (for `tricks.recompute`). `eval_preprocess`
is the one evaluation preprocessing: the trainer's evaluation and the exported
SavedModel (`zoo/export.py`) both call it (on encoded images, through
`eval_preprocess_encoded`, which decodes a JPEG only inside its crop).

NFNets test on a centred square crop of S / (S + 32) of the shorter side, resized
bicubically to S (Brock et al. 2021, arXiv:2102.06171; DeepMind's
nfnets/dataset.py, `_decode_and_center_crop`): `deepmind_eval_crop(S)`.

The card of the zoo model `name` is `zoo.model_card(name)` (`zoo.registry.card`).

A model with a grey input (`zoo.build(input_channels=1)`) takes each image's luma,
Y = 0.299 R + 0.587 G + 0.114 B (ITU-R BT.601, as PIL's convert("L"); the weights sum
to 1, so a grey image stored as RGB gives its grey value back), normalised with the
card's mean and std reduced the same way (`grey_statistics`). The RGB model on the grey
image replicated to three channels sees each channel normalised with its own
statistics, so the two pipelines agree exactly only where the card's three means and
stds are equal (Inception's 0.5); elsewhere (g - m_c) / s_c - (g - m) / s, over grey
values g in [0, 1], is at most 0.24 with ImageNet's statistics (0.054 of the pixel
range) and 13.4 levels of 255 with Keras's caffe means. The model itself is exact: the
grey model on an input equals the RGB model on that input replicated (zoo/grey.py).
"""

import dataclasses
import math
from typing import Optional

import tensorflow as tf

IMAGENET_MEAN = (0.485, 0.456, 0.406)
# The largest side a card may name: a 4096 x 4096 float32 batch of one is 200 MB; a
# larger side is a typo (100000 would be 10^10 pixels an image).
MAX_SIZE = 4096
IMAGENET_STD = (0.229, 0.224, 0.225)
LUMA = (0.299, 0.587, 0.114)  # ITU-R BT.601: R, G, B weights of grey
RESIZE_METHODS = ("bilinear", "bicubic")
_CARD_ATTR = "_zoo_card"


@dataclasses.dataclass(frozen=True)
class ModelCard:
  """What a model's weights expect.

  train_size, test_size: square training and test resolutions.
  test_crop: the centred square kept before resizing test images, as a fraction of
    the shorter side (1.0 keeps the whole image, squashed to a square).
  resize_method: "bilinear" (antialiased) or "bicubic" (as DeepMind's NFNets).
  mean, std: the normalisation (x / 255 - mean) / std, per RGB channel.
  randaugment: (layers, magnitude) of the recipe that trained it, or None.
  block_pattern: a regex whose first group names a block in layer names (for
    recompute), or None when the layer names do not allow one.
  test_crop_padding: when set, the crop is S / (S + padding) at whatever test size S
    is used (DeepMind's NFNets: 32), so it follows a rescaled test resolution.
  """
  train_size: int
  test_size: int
  test_crop: float
  resize_method: str
  mean: tuple
  std: tuple
  randaugment: Optional[tuple] = None
  block_pattern: Optional[str] = None
  test_crop_padding: Optional[int] = None

  def crop_for(self, size):
    """The test crop at test resolution `size`."""
    if self.test_crop_padding:
      return size / (size + self.test_crop_padding)
    return self.test_crop

  def __post_init__(self):
    for field in ("train_size", "test_size"):
      value = getattr(self, field)
      if not isinstance(value, int) or not 1 <= value <= MAX_SIZE:
        raise ValueError(f"ModelCard.{field}={value!r}: use a positive integer up to "
                         f"{MAX_SIZE}")
    if not 0 < self.test_crop <= 1:
      raise ValueError(f"ModelCard.test_crop={self.test_crop!r}: use a fraction in (0, 1]")
    if self.resize_method not in RESIZE_METHODS:
      raise ValueError(f"ModelCard.resize_method={self.resize_method!r}: use one of "
                       f"{RESIZE_METHODS}")
    for field in ("mean", "std"):
      value = getattr(self, field)
      if len(tuple(value)) != 3:
        raise ValueError(f"ModelCard.{field}={value!r}: use 3 values (R, G, B)")
      object.__setattr__(self, field, tuple(float(v) for v in value))
      if not all(math.isfinite(v) for v in getattr(self, field)):
        raise ValueError(f"ModelCard.{field}={getattr(self, field)!r}: every value must "
                         "be finite")
    if min(self.std) <= 0:
      raise ValueError(f"ModelCard.std={self.std!r}: every value must be positive")
    if self.randaugment is not None:
      if len(tuple(self.randaugment)) != 2:
        raise ValueError(f"ModelCard.randaugment={self.randaugment!r}: use (layers, "
                         "magnitude) or None")
      object.__setattr__(self, "randaugment", tuple(self.randaugment))


DEEPMIND_CROP_PADDING = 32


def deepmind_eval_crop(test_size):
  """DeepMind's NFNet evaluation crop: S / (S + 32) of the shorter side."""
  return test_size / (test_size + DEEPMIND_CROP_PADDING)


def centre_crop_box(shape, crop):
  """(top, left, side) of the centred square of side int(crop * min(H, W)) (at least
  1) of an image of `shape` ([H, W, ...]), offsets ((H - side) + 1) // 2 and
  ((W - side) + 1) // 2 as DeepMind's `_decode_and_center_crop`."""
  height, width = shape[0], shape[1]
  short = tf.cast(tf.minimum(height, width), tf.float64)
  side = tf.maximum(tf.cast(short * float(crop), tf.int32), 1)
  return (height - side + 1) // 2, (width - side + 1) // 2, side


def eval_preprocess_encoded(encoded, size, crop=1.0, mean=IMAGENET_MEAN,
                            std=IMAGENET_STD, method="bilinear"):
  """`eval_preprocess` of one encoded image (JPEG, PNG, GIF, BMP bytes): the pixels of
  `eval_crop_resize_encoded`, normalised (`normalize_pixels`)."""
  return normalize_pixels(eval_crop_resize_encoded(encoded, size, crop, method), mean, std)


def eval_crop_resize_encoded(encoded, size, crop=1.0, method="bilinear"):
  """`eval_crop_resize` of one encoded image. A JPEG is decoded only inside its centred
  crop (libjpeg-turbo's cropped decode, the box from the header's shape): the same
  pixels as decoding it whole, but the box's first and last columns of 4:2:0-subsampled
  JPEGs, whose chroma is upsampled from the box's edge (a few levels)."""

  def jpeg():
    top, left, side = centre_crop_box(tf.image.extract_jpeg_shape(encoded), crop)
    image = tf.image.decode_and_crop_jpeg(encoded, tf.stack([top, left, side, side]),
                                          channels=3)
    return eval_crop_resize(image, size, 1.0, method)

  def other():
    image = tf.io.decode_image(encoded, channels=3, expand_animations=False)
    return eval_crop_resize(image, size, crop, method)

  if crop == 1:
    return other()
  return tf.cond(tf.io.is_jpeg(encoded), jpeg, other)


def eval_preprocess(image, size, crop=1.0, mean=IMAGENET_MEAN, std=IMAGENET_STD,
                    method="bilinear"):
  """One H x W x 3 image (uint8, or float in [0, 255]) to float32 size x size x C:
  `eval_crop_resize`, then `normalize_pixels`. Works on symbolic shapes (tf.data,
  tf.function)."""
  return normalize_pixels(eval_crop_resize(image, size, crop, method), mean, std)


def eval_crop_resize(image, size, crop=1.0, method="bilinear"):
  """A centred square of side int(crop * min(H, W)), offsets ((H - side) + 1) // 2 and
  ((W - side) + 1) // 2 as DeepMind's `_decode_and_center_crop` (skipped when crop is
  1), resized to `size` ("bilinear": antialiased; "bicubic": DeepMind's plain
  bicubic): float32 RGB pixels on the [0, 255] scale (bicubic may overshoot it)."""
  if not 0 < crop <= 1:
    raise ValueError(f"eval_preprocess crop={crop!r}: use a fraction in (0, 1]")
  if method not in RESIZE_METHODS:
    raise ValueError(f"eval_preprocess method={method!r}: use one of {RESIZE_METHODS}")
  if crop < 1:
    top, left, side = centre_crop_box(tf.shape(image), crop)
    image = image[top:top + side, left:left + side]
  if method == "bilinear":
    image = tf.image.resize(image, [size, size], antialias=True)
  else:
    image = tf.image.resize(image, [size, size], method=tf.image.ResizeMethod.BICUBIC)
  return tf.cast(image, tf.float32)


def normalize_pixels(image, mean, std):
  """Pixels on the [0, 255] scale [..., 3] to (x / 255 - mean) / std, of their luma
  (`to_grey`: [..., 1], a grey model's input) when `mean` and `std` have one value."""
  mean = tf.convert_to_tensor(mean, tf.float32)
  std = tf.convert_to_tensor(std, tf.float32)
  image = tf.cast(image, tf.float32)
  if mean.shape[-1] == 1:
    image = to_grey(image)
  return (image / 255.0 - mean) / std


def whole_pixels(image):
  """Float pixels rounded to whole levels (half to even), clipped to [0, 255], as uint8:
  what uint8 batches hold (and an export for them serves)."""
  return tf.cast(tf.clip_by_value(tf.round(image), 0, 255), tf.uint8)


def to_grey(image):
  """The luma (`LUMA`) of float RGB pixels [..., 3] as [..., 1]."""
  return tf.tensordot(tf.cast(image, tf.float32), tf.constant(LUMA, tf.float32),
                      axes=[[-1], [0]])[..., None]


def grey_statistics(mean, std):
  """A card's RGB normalisation reduced to one channel: ((LUMA . mean,), (LUMA . std,))."""
  return ((sum(w * m for w, m in zip(LUMA, mean)),),
          (sum(w * s for w, s in zip(LUMA, std)),))


def card_of(model):
  """The `ModelCard` attached to `model` (by `zoo.build`), or None."""
  return getattr(model, _CARD_ATTR, None)


def attach_card(model, card):
  """Attaches `card` to `model` (not saved with it); returns `model`."""
  if not isinstance(card, ModelCard):
    raise TypeError(f"attach_card needs a ModelCard, got {type(card).__name__}")
  object.__setattr__(model, _CARD_ATTR, card)  # past Keras's attribute tracking
  return model
