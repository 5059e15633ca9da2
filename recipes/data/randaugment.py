"""RandAugment (Cubuk et al. 2020) as Model Garden's: its draws, its ops and its pixels,
at a fraction of the cost.

Model Garden's Rotate, ShearX/Y and TranslateX/Y (`official.vision.ops.augment`) add a
fourth channel of ones to the image (`wrap`), warp the four channels with
`ImageProjectiveTransformV3` (nearest neighbour, `fill_mode` "reflect", the default of
its `transform`) and then grey (128) the pixels whose fourth channel came out 0
(`unwrap`). Under reflection every output pixel samples some input pixel (where the
source coordinates are finite: SAFE_ENTRY), so that channel is 1 everywhere and
`unwrap` greys nothing: the op is the warp of the three channels alone. Here
(REIMPLEMENTED, each tested equal to Model Garden's op):

- TranslateX/Y by a whole number of pixels no larger than the side (Model Garden's
  default: magnitude / 10 x 100 px): no warp at all, the window of the image between
  its two mirror images at the shift (`shift_reflect`); the warp's source coordinate is
  whole there, so its rounding does nothing. Other shifts take the warp.
- Rotate, ShearX/Y: at a fixed magnitude each takes one of two matrices (Model Garden
  negates its level half the time), so on images of a static shape the warp's own
  output on an image of pixel indices is made once per matrix (`known_warps`) and the
  op is one gather of the pixels by it, chosen where the op's matrix equals that one
  (`warp`); any other matrix (a random magnitude, another shape) takes the warp.
- Solarize and SolarizeAdd: the same values in 8-bit arithmetic, without Model
  Garden's select (and SolarizeAdd's int64 copy).
- AutoContrast and Equalize on the three channels at once (Model Garden slices each
  channel out and stacks them back, which costs more than the op): the per-channel
  values as a row of the image's [height, width * 3] view (`per_channel`); Equalize's
  three histograms one bincount and its three tables one gather.
- Sharpness: the same depthwise convolution, its blend only inside the one-pixel border
  (on the border it blends the image with itself), without the mask and select.
- Cutout: its two draws of the centre, then the image's slices around a filled block,
  without the image-sized mask and select.
- The fallbacks of the translations and gathered warps (the warp for another shift or
  matrix, Model Garden's op where the warp would fill) are one unlowered node each
  (`rarely`), not hundreds the executor visits dead in every image not taking them.

The other ops, the choice of ops, their magnitudes and the random draws are Model
Garden's, in its order: under the same draws, the same pixels for the whole policy.

Not done: composing two chosen geometric ops into one warp of the composed matrix.
Two nearest-neighbour warps round twice and the second reflects what the first
reflected; one warp of the composed matrix does neither, so it would not give Model
Garden's pixels. The exact composition is the second op's gather of the first op's
index map, which would save one pixel gather for the images that draw two geometric
ops (one in 12 under RandAugment(2, m): 5 of 17 choices a layer).
"""
import functools
import math

import tensorflow as tf
# For `rarely`: tf.switch_case without its lowering to switch and merge nodes; the
# lock pins TensorFlow (2.20), whose tf.switch_case calls this same helper.
from tensorflow.python.ops import control_flow_switch_case

from official.vision.ops import augment as mg_augment


REPLACE = [128] * 3  # Model Garden's grey for the pixels an op empties
# The largest matrix entry warped here: with sides under a million, every source
# coordinate is finite and far inside int64, so the reflecting fill maps each output
# pixel onto an input pixel. Beyond it (or NaN) the kernel fills, and Model Garden's
# `unwrap` greys what it filled: such matrices take Model Garden's own op.
SAFE_ENTRY = 1e6


def rarely(fn):
  """`fn()` as one node of the graph: a one-branch Case op left unlowered. A lowered
  branch (tf.cond, tf.switch_case) is a subgraph whose every node the executor visits,
  dead, each time the branch is not taken. Five of RandAugment's 16 ops (the
  translations, the shears and the rotation) carry a fallback of about 250 such nodes
  for the rare shift or matrix, visited dead in every image and layer (docs/input.md).
  Only for paths seldom run: a function call costs more than a lowered branch where it
  is taken."""
  return control_flow_switch_case._indexed_case_helper(  # pylint: disable=protected-access
      [fn], None, tf.constant(0), None, lower_using_switch_merge=False)


def shift_reflect(image, shift, axis, replace=REPLACE):
  """`image` [height, width, channels] shifted by `shift` pixels along `axis` (0: y, 1:
  x) as Model Garden's `translate_x` / `translate_y` do it (output[i] = input[i +
  shift], reflecting fill: [dcba|abcd|dcba]): for a whole shift with |shift| <= the
  side, the window of the image and its mirrors at the shift; otherwise the warp."""
  shift = tf.convert_to_tensor(shift, tf.float32)
  side = tf.shape(image)[axis]
  whole = tf.cast(tf.round(shift), tf.int32)

  def window():
    mirror = tf.reverse(image, [axis])
    extended = tf.concat([mirror, image, mirror], axis)
    begin = tf.one_hot(axis, 3, on_value=side + whole, off_value=0)
    return tf.slice(extended, begin, tf.shape(image))

  def by_warp():
    matrix = tf.stack([1., 0., shift, 0., 1., 0., 0., 0.] if axis == 1 else
                      [1., 0., 0., 0., 1., shift, 0., 0.])
    their_op = mg_augment.translate_x if axis == 1 else mg_augment.translate_y
    return warp(image, matrix, their_op=lambda: their_op(image, shift, replace))

  fits = tf.logical_and(tf.equal(tf.round(shift), shift),
                        tf.abs(shift) <= tf.cast(side, tf.float32))
  return tf.cond(fits, window, lambda: rarely(by_warp))


def rotation(degrees, height, width):
  """Model Garden's `rotate` matrix [8] for `degrees` on a height x width image, by its
  own steps (`_convert_angles_to_transform`)."""
  radians = tf.cast(degrees * (math.pi / 180.0), tf.float32)
  return mg_augment._convert_angles_to_transform(  # pylint: disable=protected-access
      radians, tf.cast(width, tf.float32), tf.cast(height, tf.float32))[0]


def shear_x(level, height, width):
  """Model Garden's `shear_x` matrix [8] (any image size)."""
  del height, width
  return tf.convert_to_tensor([1., level, 0., 0., 1., 0., 0., 0.], tf.float32)


def shear_y(level, height, width):
  """Model Garden's `shear_y` matrix [8] (any image size)."""
  del height, width
  return tf.convert_to_tensor([1., 0., 0., level, 1., 0., 0., 0.], tf.float32)


MATRICES = {"Rotate": rotation, "ShearX": shear_x, "ShearY": shear_y}
# Model Garden's level of each of them (`_rotate_level_to_arg`, `_shear_level_to_arg`),
# which it then negates half the time.
_MAX_LEVEL = mg_augment._MAX_LEVEL  # pylint: disable=protected-access
LEVELS = {"Rotate": lambda magnitude: (magnitude / _MAX_LEVEL) * 30.,
          "ShearX": lambda magnitude: (magnitude / _MAX_LEVEL) * 0.3,
          "ShearY": lambda magnitude: (magnitude / _MAX_LEVEL) * 0.3}
THEIR_OPS = {"Rotate": mg_augment.wrapped_rotate, "ShearX": mg_augment.shear_x,
             "ShearY": mg_augment.shear_y}


def index_map(matrix, height, width):
  """Which input pixel each output pixel of Model Garden's warp by `matrix` reads, as
  flat indices [height * width]: that warp of an image of pixel indices."""
  index = tf.reshape(tf.range(height * width), [height, width, 1])
  return tf.reshape(mg_augment.transform(index, matrix), [-1])


@functools.lru_cache(maxsize=32)
def known_warps(name, magnitude, height, width):
  """(matrix, index map) of op `name` at `magnitude` on a height x width image, for
  each sign of Model Garden's level, made once (eagerly) when the graph is built. The
  level reaches the op as a float32 tensor in a graph and as a Python float in eager
  mode (its `tf.cond` hands back the branch's value), whose matrices differ in the last
  bits: both are kept."""
  level = LEVELS[name](magnitude)
  pairs = {}
  with tf.init_scope():
    for signed in (level, -level, tf.constant(level, tf.float32),
                   -tf.constant(level, tf.float32)):
      matrix = MATRICES[name](signed, height, width).numpy()
      if matrix.tobytes() not in pairs:
        indices = index_map(matrix, height, width).numpy()
        matrix.flags.writeable = indices.flags.writeable = False  # cached: shared
        pairs[matrix.tobytes()] = (matrix, indices)
  return tuple(pairs.values())


def warp(image, matrix, their_op, known=()):
  """Model Garden's warp of `image` [height, width, channels] by the affine `matrix` [8]
  (the op `their_op` computes): where `matrix` equals one of `known` (`known_warps` for
  this shape), one gather of the pixels by its index map (the warp's own); else the
  warp of the three channels alone; for entries beyond SAFE_ENTRY, `their_op`."""
  def gather(indices):
    pixels = tf.reshape(image, [-1, tf.shape(image)[-1]])
    return tf.reshape(tf.gather(pixels, indices), tf.shape(image))

  def by_warp():
    safe = tf.reduce_all(tf.abs(matrix) <= SAFE_ENTRY)  # False for NaN
    return tf.cond(safe, lambda: mg_augment.transform(image, matrix), their_op)

  cases = [(tf.reduce_all(tf.equal(matrix, m)), lambda i=i: gather(i)) for m, i in known]
  return tf.case(cases, default=lambda: rarely(by_warp)) if cases else by_warp()


def geometric(name, image, level, replace=REPLACE, known=()):
  """Model Garden's op `name` (Rotate, ShearX, ShearY) at its argument `level`."""
  shape = tf.shape(image)
  return warp(image, MATRICES[name](level, shape[0], shape[1]),
              their_op=lambda: THEIR_OPS[name](image, level, replace), known=known)


def solarize(image, threshold):
  """Model Garden's `solarize` (x below `threshold`, else 255 - x) of uint8 pixels as
  x XOR 255 where not below: on 8 bits 255 - x is x ^ 255."""
  flip = tf.cast(tf.logical_not(image < threshold), tf.uint8) * 255
  return tf.bitwise.bitwise_xor(image, flip)


def solarize_add(image, addition, threshold=128):
  """Model Garden's `solarize_add` (x + `addition` clipped to [0, 255] where x is below
  `threshold`) of uint8 pixels, for a whole addition in [0, 255], in 8-bit arithmetic:
  min(x, 255 - a) + a saturates, and x + below * (that - x) wraps back to it exactly.
  Other additions: Model Garden's."""
  if not isinstance(addition, int) or not 0 <= addition <= 255:
    return mg_augment.solarize_add(image, addition, threshold)
  saturated = tf.minimum(image, 255 - addition) + addition
  below = tf.cast(image < threshold, tf.uint8)
  return image + below * (saturated - image)


def rows(image):
  """`image` [height, width, channels] as [height, width * channels] (a reshape)."""
  return tf.reshape(image, [tf.shape(image)[0], -1])


def per_channel(values, image):
  """`values` [channels], one for each channel, as a row [1, width * channels] matching
  `rows(image)`: per-channel arithmetic then broadcasts a row, which TensorFlow's CPU
  kernels do several times faster than a broadcast along the last axis."""
  return tf.tile(values, [tf.shape(image)[1]])[None]


def autocontrast(image):
  """Model Garden's `autocontrast` (each channel stretched from [lo, hi] to [0, 255]
  where hi > lo: x * (255 / (hi - lo)) + -lo * that, in float32, clipped, truncated;
  unchanged elsewhere, here x * 1 + 0) on the three channels at once."""
  if image.shape[-1] != 3:
    return mg_augment.autocontrast(image)
  lo = tf.cast(tf.reduce_min(image, axis=[0, 1]), tf.float32)
  hi = tf.cast(tf.reduce_max(image, axis=[0, 1]), tf.float32)
  scale, offset = stretch(lo, hi)
  stretched = (tf.cast(rows(image), tf.float32) * per_channel(scale, image) +
               per_channel(offset, image))
  stretched = tf.cast(tf.clip_by_value(stretched, 0.0, 255.0), tf.uint8)
  return tf.reshape(stretched, tf.shape(image))


def stretch(lo, hi):
  """Model Garden's `autocontrast` scale and offset of channels from float32 [lo, hi]
  to [0, 255]: 255 / (hi - lo) and -lo * that where hi > lo; else 1 and 0."""
  stretches = hi > lo
  scale = tf.where(stretches, 255.0 / (hi - lo), 1.0)
  return scale, tf.where(stretches, -lo * scale, 0.0)


def equalize(image):
  """Model Garden's `equalize` (PIL's: each channel through the table (cumsum(histogram)
  + step // 2) // step, shifted one value up, step = (pixels - the count of the largest
  value) // 255; unchanged where step is 0) with the three histograms as one bincount
  and the three tables as one gather."""
  if image.shape[-1] != 3:
    return mg_augment.equalize(image)
  index = tf.cast(rows(image), tf.int32) + per_channel(tf.range(0, 768, 256), image)
  histogram = tf.reshape(tf.math.bincount(tf.reshape(index, [-1]), minlength=768,
                                          maxlength=768), [3, 256])
  equalized = tf.gather(tf.reshape(equalize_tables(histogram), [-1]), index)
  return tf.reshape(equalized, tf.shape(image))


def equalize_tables(histogram):
  """PIL's equalize tables, Model Garden's `equalize` of one channel a row: uint8
  [rows, 256] of int32 histograms [rows, 256]."""
  present = tf.cast(histogram > 0, tf.int32)
  largest = 255 - tf.argmax(tf.reverse(present, [1]), axis=1, output_type=tf.int32)
  last = tf.gather(histogram, largest, batch_dims=1)[:, None]
  step = (tf.reduce_sum(histogram, axis=1, keepdims=True) - last) // 255
  tables = (tf.cumsum(histogram, axis=1) + step // 2) // tf.maximum(step, 1)
  tables = tf.clip_by_value(tf.concat([tf.zeros_like(tables[:, :1]), tables[:, :-1]], 1),
                            0, 255)
  return tf.cast(tf.where(step == 0, tf.range(256), tables), tf.uint8)


def sharpness(image, factor):
  """Model Garden's `sharpness` (its `blend` of the image smoothed by the 3 x 3 kernel
  [[1, 1, 1], [1, 5, 1], [1, 1, 1]] / 13 inside a one-pixel border, and the image): the
  same depthwise convolution, the blend inside the border alone (on the border both
  images are the image, which a blend by a finite factor keeps), no mask."""
  height, width, channels = image.shape
  finite = isinstance(factor, float) and math.isfinite(factor)
  if not finite or channels != 3 or min(height or 0, width or 0) < 3:
    return mg_augment.sharpness(image, factor)
  kernel = tf.constant([[1, 1, 1], [1, 5, 1], [1, 1, 1]], dtype=tf.float32,
                       shape=[3, 3, 1, 1]) / 13.
  smooth = tf.nn.depthwise_conv2d(tf.cast(image, tf.float32)[None],
                                  tf.tile(kernel, [1, 1, 3, 1]), [1, 1, 1, 1],
                                  padding="VALID", dilations=[1, 1])
  smooth = tf.cast(tf.clip_by_value(smooth, 0.0, 255.0), tf.uint8)[0]
  inside = mg_augment.blend(smooth, image[1:-1, 1:-1], factor)
  middle = tf.concat([image[1:-1, :1], inside, image[1:-1, -1:]], 1)
  return tf.concat([image[:1], middle, image[-1:]], 0)


def cutout(image, pad_size, replace=0):
  """Model Garden's `cutout` (its two draws of the centre, in its order, then the
  rows and columns within `pad_size` of it set to `replace`) as the image's slices
  around a filled block, without its mask of the image's size and its select."""
  if (image.shape[-1] != 3 or not isinstance(pad_size, int) or pad_size < 0 or
      replace is None or isinstance(replace, tf.Tensor)):
    return mg_augment.cutout(image, pad_size, replace)
  height, width = tf.shape(image)[0], tf.shape(image)[1]
  centre_y = tf.random.uniform(shape=[], minval=0, maxval=height, dtype=tf.int32)
  centre_x = tf.random.uniform(shape=[], minval=0, maxval=width, dtype=tf.int32)
  top, bottom = tf.maximum(0, centre_y - pad_size), tf.minimum(height, centre_y + pad_size)
  left, right = tf.maximum(0, centre_x - pad_size), tf.minimum(width, centre_x + pad_size)
  block = tf.broadcast_to(tf.cast(replace, image.dtype), [bottom - top, right - left, 3])
  band = tf.concat([image[top:bottom, :left], block, image[top:bottom, right:]], 1)
  return tf.ensure_shape(tf.concat([image[:top], band, image[bottom:]], 0), image.shape)


# Model Garden's ops reimplemented here, for [height, width, channels] uint8 images:
# (image, *Model Garden's args) -> image.
REIMPLEMENTED = {
    "TranslateX": lambda image, pixels, replace: shift_reflect(image, pixels, 1, replace),
    "TranslateY": lambda image, pixels, replace: shift_reflect(image, pixels, 0, replace),
    "Rotate": lambda image, level, replace: geometric("Rotate", image, level, replace),
    "ShearX": lambda image, level, replace: geometric("ShearX", image, level, replace),
    "ShearY": lambda image, level, replace: geometric("ShearY", image, level, replace),
    "Solarize": solarize,
    "SolarizeAdd": solarize_add,
    "AutoContrast": autocontrast,
    "Equalize": equalize,
    "Sharpness": sharpness,
    "Cutout": cutout,
}
PROB_RANGE = (0.2, 0.8)  # Model Garden's draw of each op's (unused) probability


class RandAugment(mg_augment.RandAugment):
  """Model Garden's RandAugment (num_layers, magnitude, ...), the ops in REIMPLEMENTED
  done here on single images; a batch or video (rank 4) is Model Garden's own.

  `distort` makes Model Garden's random draws in its order (the op of a layer, then
  one probability an op, which RandAugment does not use) and runs only the chosen op
  of each layer (`tf.switch_case`). On images of a static shape at a fixed magnitude
  (`magnitude_std` 0), Rotate and ShearX/Y gather by index maps made once."""

  def _known(self, image):
    """{op: ((matrix, index map) tensors, ...)} of the gathered warps for `image`."""
    height, width = image.shape[0], image.shape[1]
    if self.magnitude_std > 0 or height is None or width is None:
      return {}
    # As tensors of the distort graph, captured by each layer's branches (not copied).
    return {name: tuple((tf.constant(m), tf.constant(i))
                        for m, i in known_warps(name, self.magnitude, height, width))
            for name in MATRICES if name in self.available_ops}

  def _op(self, name, image, known):
    """Model Garden's draws for op `name`, and a function running it on `image`."""
    prob = tf.random.uniform([], minval=PROB_RANGE[0], maxval=PROB_RANGE[1])
    func, _, args = mg_augment._parse_policy_info(  # pylint: disable=protected-access
        name, prob, self.magnitude, REPLACE, self.cutout_const, self.translate_const,
        self.magnitude_std)
    if name in known:
      return lambda: geometric(name, image, *args, known=known[name])
    if name in REIMPLEMENTED:
      return lambda: REIMPLEMENTED[name](image, *args)
    return lambda: func(image, None, *args)[0]

  def distort(self, image):
    """The policy on a uint8 or float image (float comes back float, whole values)."""
    if image.shape.rank != 3:
      return super().distort(image)
    dtype = image.dtype
    if dtype != tf.uint8:
      image = tf.cast(tf.clip_by_value(image, 0.0, 255.0), tf.uint8)
    known = self._known(image)
    for _ in range(self.num_layers):
      chosen = tf.random.uniform([], maxval=len(self.available_ops) + 1, dtype=tf.int32)
      branches = [(i, self._op(name, image, known))
                  for i, name in enumerate(self.available_ops)]
      augmented = tf.switch_case(chosen, branches, default=lambda x=image: tf.identity(x))
      if self.prob_to_apply is not None:
        augmented = tf.cond(tf.random.uniform([]) < self.prob_to_apply,
                             lambda a=augmented: tf.identity(a),
                             lambda x=image: tf.identity(x))
      image = augmented
    return tf.cast(image, dtype)
