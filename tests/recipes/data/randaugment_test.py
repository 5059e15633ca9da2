"""RandAugment with its geometric ops as plain warps: Model Garden's pixels, op by op
and for the whole policy under the same random draws."""

from absl.testing import parameterized
import numpy as np
import tensorflow as tf

from official.vision.ops import augment as mg_augment
from recipes.data import randaugment

REPLACE = [128] * 3


def image(shape, seed=0):
  return tf.constant(np.random.default_rng(seed).integers(0, 256, shape), tf.uint8)


class RandAugmentTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.parameters(
      ("TranslateX", mg_augment.translate_x, 100.0), ("TranslateX", mg_augment.translate_x,
                                                      -250.0),
      ("TranslateY", mg_augment.translate_y, 37.0), ("TranslateY", mg_augment.translate_y,
                                                     -400.0),
      ("ShearX", mg_augment.shear_x, 0.3), ("ShearY", mg_augment.shear_y, -0.3),
      ("Rotate", mg_augment.wrapped_rotate, 30.0), ("Rotate", mg_augment.wrapped_rotate,
                                                    -135.0))
  def test_each_warp_is_model_gardens_op(self, name, theirs, level):
    for shape in ([224, 200, 3], [33, 57, 3]):
      x = image(shape, seed=shape[1])
      self.assertAllEqual(randaugment.WARPS[name](x, level, REPLACE), theirs(x, level, REPLACE))

  @parameterized.parameters(0, 1)
  def test_shift_reflect_is_model_gardens_translate_at_every_shift(self, axis):
    # Whole shifts up to the side take the window; the others (beyond the side,
    # fractional) Model Garden's warp: every one Model Garden's pixels.
    x = image([13, 9, 3], seed=axis)
    side = x.shape[axis]
    shifts = [float(s) for s in range(-side - 3, side + 4)] + [2.5, -0.5, 1e10, -2.0**31]
    for shift in shifts:
      translation = [-shift, 0.] if axis == 1 else [0., -shift]
      self.assertAllEqual(randaugment.shift_reflect(x, shift, axis),
                          mg_augment.translate(x, translation), msg=f"shift {shift}")

  def test_shift_reflect_in_a_graph_with_unknown_shapes(self):
    fn = tf.function(lambda x, s: randaugment.shift_reflect(x, s, 1),
                     input_signature=[tf.TensorSpec([None, None, 3], tf.uint8),
                                      tf.TensorSpec([], tf.float32)])
    x = image([6, 7, 3])
    for shift in (-7., -3., 0., 4., 7., 8.):
      self.assertAllEqual(fn(x, shift), mg_augment.translate(x, [-shift, 0.]))

  def test_the_fourth_channel_it_drops_is_all_ones(self):
    # Why the warps are exact: under Model Garden's reflecting fill, the ones channel
    # `wrap` adds stays 1 after any of its warps, so `unwrap` greys nothing.
    ones = mg_augment.wrap(image([40, 30, 3]))[..., 3:]
    for warped in (mg_augment.translate(ones, [-100, 0]), mg_augment.rotate(ones, 77.0),
                   mg_augment.transform(ones, [1., 0.9, 0., 0., 1., 0., 0., 0.])):
      self.assertAllEqual(warped, tf.ones_like(warped))

  @parameterized.parameters((2, 9), (3, 15), (1, 5))
  def test_the_policy_gives_model_gardens_pixels_under_the_same_draws(self, layers, magnitude):
    ours = randaugment.RandAugment(layers, magnitude)
    theirs = mg_augment.RandAugment(layers, magnitude)
    self.assertEqual(ours.available_ops, theirs.available_ops)
    x = image([48, 40, 3])
    changed = []
    for seed in range(40):  # eager: each run's draws follow the global seed alone
      tf.random.set_seed(seed)
      got = ours.distort(x)
      tf.random.set_seed(seed)
      want = theirs.distort(x)
      self.assertAllEqual(got, want, msg=f"seed {seed}")
      changed.append(bool(tf.reduce_any(got != x)))
    self.assertGreater(sum(changed), 20)  # mostly ops that change the image, not identities

  def test_float_images_come_back_float(self):
    x = tf.cast(image([20, 20, 3]), tf.float32) + 0.4
    out = randaugment.RandAugment(2, 9).distort(x)
    self.assertEqual(out.dtype, tf.float32)
    self.assertAllEqual(out, tf.round(out))


if __name__ == "__main__":
  tf.test.main()
