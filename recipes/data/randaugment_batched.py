"""RandAugment (Cubuk et al. 2020) over a batch: each image draws its layers' ops as
Model Garden's RandAugment does, and each op runs once on the images that drew it.

Per image, `randaugment.RandAugment` runs a graph for each image: the draws, a switch
over the 16 ops a layer, the chosen op on one image. Here each image draws its layers
(`draws`: an op uniform over the 16 and none, as Model Garden's
`tf.random.uniform([], maxval=len(ops) + 1)`; a sign, its `_randomly_negate_tensor`
of the level for Rotate, ShearX/Y and TranslateX/Y; Cutout's centre), and a layer over
a batch of one image size splits the batch by (op, sign) (`tf.dynamic_partition`), runs
each part's op once on the part at its one argument, and stitches the parts back
(`tf.dynamic_stitch`). Each op gives the pixels of `randaugment.REIMPLEMENTED` or of
Model Garden's op on each image (tested image by image):

- Rotate, ShearX/Y, and translations other than a whole shift within the side: one
  gather of the part's pixels by the warp's index map for the sign (`warp_map`: the
  warp's own output on an image of pixel indices, made once);
- TranslateX/Y by a whole shift within the side: the window between the mirrors;
- AutoContrast, Equalize: per image and channel (Equalize's n x 3 histograms one
  bincount, its tables one gather); Cutout: each image's block one scatter;
- Sharpness: the same depthwise convolution over the part; Invert, Posterize,
  Solarize, SolarizeAdd, Color, Contrast (TensorFlow's `adjust_contrast`, per image of
  a batch), Brightness: Model Garden's element-wise ops, or ours, on the part.

The draws are stateless, from a seed an image (the pipeline's (seed, epoch, position)
key): a rebuilt (resumed) epoch draws them again alike, which the per-image op
(TensorFlow's op-level seeds, raced for by the parallel map's calls) does not. They are not Model Garden's random stream: the
same distribution, other draws. At a fixed magnitude every op has one argument (a sign
aside); Model Garden's random magnitude (`magnitude_std`) is not batched here.
"""
import functools

import numpy as np
import tensorflow as tf

from official.vision.ops import augment as mg_augment
from recipes.data import randaugment

OPS = ("AutoContrast", "Equalize", "Invert", "Rotate", "Posterize", "Solarize", "Color",
       "Contrast", "Brightness", "Sharpness", "ShearX", "ShearY", "TranslateX",
       "TranslateY", "Cutout", "SolarizeAdd")  # Model Garden's RandAugment, its order
SIGNED = ("Rotate", "ShearX", "ShearY", "TranslateX", "TranslateY")


def _rows(images):
  """[n, height, width, channels] as [n, height, width * channels]."""
  shape = tf.shape(images)
  return tf.reshape(images, [shape[0], shape[1], -1])


def _per_channel(values, images):
  """[n, channels] values as [n, 1, width * channels], matching `_rows(images)`."""
  return tf.tile(values, [1, tf.shape(images)[2]])[:, None]


def autocontrast(images):
  """`randaugment.autocontrast` of each image ([n, height, width, 3] uint8)."""
  lo = tf.cast(tf.reduce_min(images, axis=[1, 2]), tf.float32)
  hi = tf.cast(tf.reduce_max(images, axis=[1, 2]), tf.float32)
  scale, offset = randaugment.stretch(lo, hi)
  stretched = (tf.cast(_rows(images), tf.float32) * _per_channel(scale, images) +
               _per_channel(offset, images))
  stretched = tf.cast(tf.clip_by_value(stretched, 0.0, 255.0), tf.uint8)
  return tf.reshape(stretched, tf.shape(images))


def equalize(images):
  """`randaugment.equalize` (Model Garden's `equalize`) of each image: the n x 3
  histograms one bincount, the n x 3 tables one gather."""
  n = tf.shape(images)[0]
  offsets = tf.reshape(tf.range(n * 3) * 256, [n, 3])
  index = tf.cast(_rows(images), tf.int32) + _per_channel(offsets, images)
  histogram = tf.reshape(tf.math.bincount(tf.reshape(index, [-1]), minlength=n * 768,
                                          maxlength=n * 768), [n * 3, 256])
  tables = randaugment.equalize_tables(histogram)
  equalized = tf.gather(tf.reshape(tables, [-1]), index)
  return tf.reshape(equalized, tf.shape(images))


def sharpness(images, factor):
  """`randaugment.sharpness` of each image: the depthwise convolution over the batch,
  the blend inside the one-pixel border."""
  kernel = tf.constant([[1, 1, 1], [1, 5, 1], [1, 1, 1]], dtype=tf.float32,
                       shape=[3, 3, 1, 1]) / 13.
  smooth = tf.nn.depthwise_conv2d(tf.cast(images, tf.float32),
                                  tf.tile(kernel, [1, 1, 3, 1]), [1, 1, 1, 1],
                                  padding="VALID", dilations=[1, 1])
  # Cut to its shape: of no images, the convolution returns its input's shape.
  height, width = images.shape[1], images.shape[2]
  smooth = tf.cast(tf.clip_by_value(smooth, 0.0, 255.0), tf.uint8)[:, :height - 2, :width - 2]
  inside = mg_augment.blend(smooth, images[:, 1:-1, 1:-1], factor)
  middle = tf.concat([images[:, 1:-1, :1], inside, images[:, 1:-1, -1:]], 2)
  return tf.concat([images[:, :1], middle, images[:, -1:]], 1)


def shift_reflect(images, shift, axis):
  """`randaugment.shift_reflect` of each image by a whole `shift` (a Python int, |shift|
  <= the side) along image axis `axis` (0: y, 1: x)."""
  axis += 1
  mirror = tf.reverse(images, [axis])
  extended = tf.concat([mirror, images, mirror], axis)
  side = images.shape[axis]
  begin, size = [0, 0, 0, 0], [-1, -1, -1, -1]
  begin[axis], size[axis] = side + shift, side
  return tf.slice(extended, begin, size)


def cutout(images, pad_size, centres, replace=0):
  """Model Garden's `cutout` of each image: the rows and columns within `pad_size` (a
  Python int) of its centre (`centres` [n, 2]: row, column) set to `replace` (a value,
  or one a channel), written as one scatter of the blocks' pixels (a block cut by the
  border repeats its edge pixels' indices, which take the same value), not a select
  over every pixel."""
  n, height, width = tf.shape(images)[0], images.shape[1], images.shape[2]
  if pad_size <= 0:
    return images

  def block(centre, side):  # [n, 2 * pad_size] indices within [max(0, c - p), min(side, c + p))
    lo, hi = tf.maximum(0, centre - pad_size), tf.minimum(side, centre + pad_size)
    return tf.clip_by_value(centre[:, None] - pad_size + tf.range(2 * pad_size)[None],
                            lo[:, None], hi[:, None] - 1)

  rows, columns = block(centres[:, 0], height), block(centres[:, 1], width)
  pixel = ((tf.range(n) * height * width)[:, None, None] + rows[:, :, None] * width +
           columns[:, None, :])
  pixel = tf.reshape(pixel, [-1, 1])
  flat = tf.reshape(images, [-1, images.shape[3]])
  fill = tf.broadcast_to(tf.cast(replace, images.dtype), [tf.shape(pixel)[0], images.shape[3]])
  return tf.reshape(tf.tensor_scatter_nd_update(flat, pixel, fill), tf.shape(images))


NONE = len(OPS)  # the draw of no op (Model Garden draws from len(ops) + 1)
DRAWS = 4  # a layer's draws an image: op, sign, Cutout's centre row and column
SALT = 0x5a17  # the draws' own stream of an image's (seed, epoch, position) key


def argument(name, sign, magnitude, translate_const):
  """Model Garden's argument of signed op `name` at `magnitude`: its level as a Python
  float, made a float32 tensor by its `_randomly_negate_tensor`, negated for sign 1."""
  if name in randaugment.LEVELS:
    level = randaugment.LEVELS[name](magnitude)
  else:  # its _translate_level_to_arg
    level = (magnitude / mg_augment._MAX_LEVEL) * translate_const  # pylint: disable=protected-access
  level = np.float32(level)
  return -level if sign else level


@functools.lru_cache(maxsize=64)
def warp_map(name, level, height, width):
  """The index map [height * width] of Model Garden's warp for op `name` (Rotate,
  ShearX/Y, TranslateX/Y) at float32 `level` on a height x width image, made once."""
  with tf.init_scope():
    level = tf.constant(level, tf.float32)
    if name in randaugment.MATRICES:
      matrix = randaugment.MATRICES[name](level, height, width)
    else:  # Model Garden's translate: output[i] = input[i + level] along the axis
      matrix = (tf.stack([1., 0., level, 0., 1., 0., 0., 0.]) if name == "TranslateX" else
                tf.stack([1., 0., 0., 0., 1., level, 0., 0.]))
    if not np.all(np.abs(matrix.numpy()) <= randaugment.SAFE_ENTRY):
      raise ValueError(f"RandAugment's {name} at {level} warps beyond the finite "
                       "coordinates; use the per-image op")
    indices = randaugment.index_map(matrix, height, width).numpy()
  indices.flags.writeable = False  # cached: shared
  return indices


class BatchedRandAugment:
  """RandAugment(num_layers, magnitude, cutout_const, translate_const, prob_to_apply)
  as Model Garden's, on [n, height, width, 3] uint8 batches of one static size: each
  image's draws from its own stateless seed (`draws`), the ops by part (`distort`)."""

  def __init__(self, num_layers=2, magnitude=10., cutout_const=40., translate_const=100.,
               prob_to_apply=None):
    if isinstance(num_layers, bool) or not isinstance(num_layers, int) or num_layers < 0:
      raise ValueError(f"RandAugment's num_layers={num_layers!r} must be an int >= 0")
    # Above Model Garden's 10 its levels extrapolate (DeepMind's NFNet-F2+ use 15).
    if isinstance(magnitude, bool) or not isinstance(magnitude, (int, float)) or not (
        0 <= magnitude < float("inf")):
      raise ValueError(f"RandAugment's magnitude={magnitude!r} must be a finite number >= 0")
    self.num_layers = num_layers
    self.magnitude = float(magnitude)
    self.cutout_const = float(cutout_const)
    self.translate_const = float(translate_const)
    self.prob_to_apply = None if prob_to_apply is None else float(prob_to_apply)

  def draws(self, seed, height, width):
    """One image's draws [num_layers, DRAWS] int32 from its stateless `seed` [2]: each
    layer's op (NONE for none: uniform over the ops and none, as Model Garden's; NONE
    also where `prob_to_apply` says not to apply), sign (0 or 1, each half the time,
    as its `_randomly_negate_tensor`), and Cutout's centre (row in [0, height), column
    in [0, width), as its `cutout`)."""
    u = tf.random.stateless_uniform([self.num_layers, DRAWS + 1],
                                    tf.random.experimental.stateless_fold_in(seed, SALT))
    counts = tf.stack([NONE + 1, 2, height, width])
    drawn = tf.minimum(tf.cast(tf.floor(u[:, :DRAWS] * tf.cast(counts, tf.float32)),
                               tf.int32), counts - 1)  # floor(u * count) < count
    if self.prob_to_apply is not None:
      applied = u[:, DRAWS] < self.prob_to_apply
      drawn = tf.concat([tf.where(applied, drawn[:, 0], NONE)[:, None], drawn[:, 1:]], 1)
    return drawn

  def branches(self, height, width):
    """[((op, sign), function of a part [k, height, width, 3] and its draws [k,
    DRAWS])], one an op and, for Rotate, ShearX/Y and TranslateX/Y, a sign."""
    args = mg_augment.level_to_arg(self.cutout_const, self.translate_const)
    fixed = {  # Model Garden's arguments at a fixed magnitude (Python values)
        name: args[name](self.magnitude) for name in OPS
        if name not in SIGNED + ("AutoContrast", "Equalize", "Invert")}
    ops = {
        "AutoContrast": lambda x, d: autocontrast(x),
        "Equalize": lambda x, d: equalize(x),
        "Invert": lambda x, d: 255 - x,
        "Posterize": lambda x, d: mg_augment.posterize(x, *fixed["Posterize"]),
        "Solarize": lambda x, d: randaugment.solarize(x, *fixed["Solarize"]),
        "SolarizeAdd": lambda x, d: randaugment.solarize_add(x, *fixed["SolarizeAdd"]),
        "Color": lambda x, d: mg_augment.color(x, *fixed["Color"]),
        "Contrast": lambda x, d: mg_augment.contrast(x, *fixed["Contrast"]),
        "Brightness": lambda x, d: mg_augment.brightness(x, *fixed["Brightness"]),
        "Sharpness": lambda x, d: sharpness(x, *fixed["Sharpness"]),
        # Grey, as Model Garden's RandAugment passes its replace value to Cutout.
        "Cutout": lambda x, d: cutout(x, *fixed["Cutout"], centres=d[:, 2:4],
                                      replace=randaugment.REPLACE),
    }
    out = []
    for name in OPS:
      if name not in SIGNED:
        out.append(((name, 0), ops[name]))
        continue
      for sign in (0, 1):
        level = argument(name, sign, self.magnitude, self.translate_const)
        out.append(((name, sign), self._warp(name, level, height, width)))
    return out

  @staticmethod
  def _warp(name, level, height, width):
    """Op `name` at float32 `level` on a part: a translation by a whole number of pixels
    within the side as the window between the mirrors; else a gather by the warp's
    index map."""
    if name in ("TranslateX", "TranslateY"):
      axis = 1 if name == "TranslateX" else 0
      if float(level).is_integer() and abs(level) <= (height, width)[axis]:
        return lambda x, d: shift_reflect(x, int(level), axis)
    indices = tf.constant(warp_map(name, float(level), height, width))
    return lambda x, d: tf.reshape(
        tf.gather(tf.reshape(x, [tf.shape(x)[0], -1, 3]), indices, axis=1), tf.shape(x))

  def apply_layer(self, images, drawn, branches=None):
    """One layer on `images` [n, height, width, 3] uint8 with that layer's `drawn` [n,
    DRAWS]: the images are split by (op, sign), each part takes its op (`branches`,
    made here if not given), and the parts are put back in place."""
    if branches is None:
      branches = self.branches(images.shape[1], images.shape[2])
    keys = {key: i for i, (key, _) in enumerate(branches)}
    # The part of each draw: op's first key, plus the sign for the signed ops.
    first = tf.constant([keys[(name, 0)] for name in OPS] + [len(branches)])
    signed = tf.constant([name in SIGNED for name in OPS] + [False])
    op, sign = drawn[:, 0], drawn[:, 1]
    part = tf.gather(first, op) + tf.where(tf.gather(signed, op), sign, 0)
    parts = len(branches) + 1  # the last: no op
    positions = tf.dynamic_partition(tf.range(tf.shape(images)[0]), part, parts)
    pixels = tf.dynamic_partition(images, part, parts)
    draws = tf.dynamic_partition(drawn, part, parts)
    outputs = [fn(x, d) for (_, fn), x, d in zip(branches, pixels, draws)] + [pixels[-1]]
    return tf.ensure_shape(tf.dynamic_stitch(positions, outputs), images.shape)

  def distort(self, images, drawn):
    """The policy on uint8 `images` [n, height, width, 3] (static height, width and
    channels) with each image's `drawn` [n, num_layers, DRAWS] (`draws`)."""
    shape = images.shape
    if (shape.rank != 4 or shape[1] is None or shape[2] is None or shape[3] != 3
        or images.dtype != tf.uint8):
      raise ValueError("BatchedRandAugment takes uint8 batches [n, height, width, 3] of "
                       f"one static size, not {images.dtype.name} {shape}")
    branches = self.branches(shape[1], shape[2])  # the index maps: one constant each
    for layer in range(self.num_layers):
      images = self.apply_layer(images, drawn[:, layer], branches)
    return images
