"""RandAugment (Cubuk et al. 2020) as Model Garden's, its geometric ops warping the
image itself.

Model Garden's Rotate, ShearX/Y and TranslateX/Y (`official.vision.ops.augment`) add a
fourth channel of ones to the image (`wrap`), warp the four channels with
`ImageProjectiveTransformV3` (nearest neighbour, `fill_mode` "reflect", the default of
its `transform`) and then grey (128) the pixels whose fourth channel came out 0
(`unwrap`). Under reflection every output pixel samples some input pixel, so that
channel is 1 everywhere and `unwrap` greys nothing: the op is the warp of the three
channels alone. Here the geometric ops are that warp, by Model Garden's own
`rotate`, `translate` and `transform` on the image: the same pixels (tested op by op)
without the copy into four channels, the fourth channel's warp and the pass that
reads it. The other ops, the choice of ops and their magnitudes are Model Garden's.

TranslateX/Y by a whole number of pixels no larger than the side (Model Garden's
default: magnitude / 10 x 100 px) are no warp at all: under the reflecting fill the
output is a window of the image between its two mirror images (`shift_reflect`), the
same pixels as the nearest-neighbour warp (its source coordinate is whole, so its
rounding does nothing; tested), at the cost of copies. Other shifts take the warp.

Not done: composing two chosen geometric ops into one warp. Two nearest-neighbour
warps round twice and the second reflects what the first reflected; one warp of the
composed matrix does neither, so it would not give Model Garden's pixels. The exact
composition is a warp of an index image followed by one gather of the pixels, which
costs about as much as the second warp it replaces (measured while building this), and
both geometric ops are drawn for one image in 12 (RandAugment(2, m), 5 of 17 choices a
layer).
"""

import tensorflow as tf

from official.vision.ops import augment as mg_augment



def shift_reflect(image, shift, axis):
  """`image` [height, width, channels] shifted by `shift` pixels along `axis` (0: y, 1:
  x) as Model Garden's `translate` does it (output[i] = input[i + shift], reflecting
  fill: [dcba|abcd|dcba]): for a whole shift with |shift| <= the side, the window of
  the image and its mirrors at the shift; otherwise Model Garden's warp."""
  shift = tf.convert_to_tensor(shift, tf.float32)
  side = tf.shape(image)[axis]
  whole = tf.cast(tf.round(shift), tf.int32)

  def window():
    mirror = tf.reverse(image, [axis])
    extended = tf.concat([mirror, image, mirror], axis)
    begin = tf.one_hot(axis, 3, on_value=side + whole, off_value=0)
    return tf.slice(extended, begin, tf.shape(image))

  def warp():
    translation = [-shift, 0.] if axis == 1 else [0., -shift]
    return mg_augment.translate(image, translation)

  fits = tf.logical_and(tf.equal(tf.round(shift), shift),
                        tf.abs(shift) <= tf.cast(side, tf.float32))
  return tf.cond(fits, window, warp)


# Model Garden's geometric ops on the image alone: (image, *Model Garden's args).
WARPS = {
    "Rotate": lambda image, degrees, replace: mg_augment.rotate(image, degrees),
    "TranslateX": lambda image, pixels, replace: shift_reflect(image, pixels, axis=1),
    "TranslateY": lambda image, pixels, replace: shift_reflect(image, pixels, axis=0),
    "ShearX": lambda image, level, replace: mg_augment.transform(
        image, [1., level, 0., 0., 1., 0., 0., 0.]),
    "ShearY": lambda image, level, replace: mg_augment.transform(
        image, [1., 0., 0., level, 1., 0., 0., 0.]),
}
REPLACE = [128] * 3  # Model Garden's grey for the pixels an op empties
PROB_RANGE = (0.2, 0.8)  # Model Garden's draw of each op's (unused) probability


class RandAugment(mg_augment.RandAugment):
  """Model Garden's RandAugment (num_layers, magnitude, ...), its geometric ops as WARPS.

  `distort` makes Model Garden's random draws in its order (the op of a layer, then
  one probability an op, which RandAugment does not use) and runs only the chosen op
  of each layer (`tf.switch_case`)."""

  def _op(self, name, image):
    prob = tf.random.uniform([], minval=PROB_RANGE[0], maxval=PROB_RANGE[1])
    func, _, args = mg_augment._parse_policy_info(  # pylint: disable=protected-access
        name, prob, self.magnitude, REPLACE, self.cutout_const, self.translate_const,
        self.magnitude_std)
    if name in WARPS:
      return lambda: WARPS[name](image, *args)
    return lambda: func(image, None, *args)[0]

  def distort(self, image):
    dtype = image.dtype
    if dtype != tf.uint8:
      image = tf.cast(tf.clip_by_value(image, 0.0, 255.0), tf.uint8)
    for _ in range(self.num_layers):
      chosen = tf.random.uniform([], maxval=len(self.available_ops) + 1, dtype=tf.int32)
      branches = [(i, self._op(name, image)) for i, name in enumerate(self.available_ops)]
      augmented = tf.switch_case(chosen, branches, default=lambda x=image: tf.identity(x))
      if self.prob_to_apply is not None:
        augmented = tf.cond(tf.random.uniform([]) < self.prob_to_apply,
                             lambda a=augmented: tf.identity(a),
                             lambda x=image: tf.identity(x))
      image = augmented
    return tf.cast(image, dtype)
