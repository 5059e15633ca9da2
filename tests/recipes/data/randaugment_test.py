"""RandAugment with ops reimplemented (windows, gathers by index maps, 8-bit
arithmetic): Model Garden's pixels, op by op and for the whole policy under the same
random draws, and the fast paths taken."""

from unittest import mock

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
      self.assertAllEqual(randaugment.REIMPLEMENTED[name](x, level, REPLACE),
                          theirs(x, level, REPLACE))

  @parameterized.parameters(
      ("Rotate", mg_augment.wrapped_rotate, mg_augment._rotate_level_to_arg, 9),
      ("ShearX", mg_augment.shear_x, mg_augment._shear_level_to_arg, 9),
      ("ShearY", mg_augment.shear_y, mg_augment._shear_level_to_arg, 5),
      ("Rotate", mg_augment.wrapped_rotate, mg_augment._rotate_level_to_arg, 10))
  def test_the_gathered_warps_are_model_gardens_ops(self, name, theirs, level_to_arg,
                                                    magnitude):
    height, width = 37, 52
    known = randaugment.known_warps(name, magnitude, height, width)
    x = image([height, width, 3], seed=magnitude)
    for matrix, indices in known:  # each map is its matrix's warp
      gathered = tf.reshape(tf.gather(tf.reshape(x, [-1, 3]), indices), x.shape)
      self.assertAllEqual(gathered, mg_augment.transform(x, matrix))

    def both(_):  # as the pipeline runs it: Model Garden's level, drawn in tf.data
      level = level_to_arg(float(magnitude))[0]
      return (randaugment.geometric(name, x, level, known=known), theirs(x, level, REPLACE),
              level)

    levels = set()
    for ours, model_gardens, level in tf.data.Dataset.range(10).map(both):
      self.assertAllEqual(ours, model_gardens)
      levels.add(float(level))
    self.assertLen(levels, 2)

  @parameterized.parameters(("Rotate", mg_augment._rotate_level_to_arg),
                            ("ShearX", mg_augment._shear_level_to_arg))
  def test_the_known_matrices_are_those_model_garden_draws(self, name, level_to_arg):
    # Else the gathers would never be chosen (and every op would take the warp): in
    # tf.data's graphs, where the level is a float32 tensor, and eagerly, where it is a
    # Python float (the bits differ).
    known = randaugment.known_warps(name, 9, 30, 20)
    drawn = lambda *_: randaugment.MATRICES[name](level_to_arg(9.)[0], 30, 20)
    tf.random.set_seed(0)
    in_tf_data = list(tf.data.Dataset.range(12).map(drawn).as_numpy_iterator())
    for where, matrices in (("tf.data", in_tf_data), ("eager", [drawn().numpy()
                                                              for _ in range(12)])):
      for matrix in matrices:
        self.assertTrue(any((matrix == m).all() for m, _ in known), msg=f"{where} {matrix}")
      self.assertEqual({bool(matrix[1] > 0) for matrix in matrices}, {True, False})

  def test_a_known_matrix_takes_its_map_and_another_takes_the_warp(self):
    x = image([9, 7, 3])
    matrix = randaugment.rotation(tf.constant(30.), 9, 7)
    reversed_map = tf.range(63)[::-1]
    unused = lambda: self.fail("their op, for a safe matrix")
    got = randaugment.warp(x, matrix, unused, known=[(matrix.numpy(), reversed_map.numpy())])
    self.assertAllEqual(got, tf.reverse(x, [0, 1]))  # the map, not the warp
    other = randaugment.rotation(tf.constant(31.), 9, 7)
    got = randaugment.warp(x, other, unused, known=[(matrix.numpy(), reversed_map.numpy())])
    self.assertAllEqual(got, mg_augment.transform(x, other))

  @parameterized.parameters(
      ("Rotate", mg_augment.wrapped_rotate), ("ShearX", mg_augment.shear_x),
      ("ShearY", mg_augment.shear_y), ("TranslateX", mg_augment.translate_x),
      ("TranslateY", mg_augment.translate_y))
  def test_levels_whose_warp_fills_take_model_gardens_op(self, name, theirs):
    # NaN and infinite source coordinates are filled by the kernel, then greyed by
    # Model Garden's unwrap; the three-channel warp alone would leave them 0.
    x = image([11, 8, 3])
    for level in (float("nan"), float("inf"), -float("inf"), 1e39, 3e7, 2.5e6, 1e5):
      ours = tf.function(lambda x, level: randaugment.REIMPLEMENTED[name](x, level, REPLACE))
      self.assertAllEqual(ours(x, level), theirs(x, level, REPLACE), msg=f"level {level}")

  def test_the_policy_gathers_by_the_known_maps(self):
    # With every known map reversed, the policy's output changes: it takes the
    # gathers (were LEVELS to drift from Model Garden's, it would warp instead).
    def reversed_maps(*args):
      return tuple((m, i[::-1]) for m, i in known_warps(*args))

    known_warps = randaugment.known_warps
    x = image([24, 20, 3])
    policy = randaugment.RandAugment(2, 9, exclude_ops=[
        o for o in mg_augment.RandAugment().available_ops
        if o not in ("Rotate", "ShearX", "ShearY")])
    def run():  # traced here: the maps are made when the graph is built
      tf.random.set_seed(3)
      dataset = tf.data.Dataset.range(8).map(lambda _: policy.distort(x))
      return list(dataset.as_numpy_iterator())

    honest = run()
    with mock.patch.object(randaugment, "known_warps", reversed_maps):
      reversed_ = run()
    changed = [bool((a != b).any()) for a, b in zip(honest, reversed_)]
    self.assertGreater(sum(changed), 4)

  def test_the_rare_fallbacks_are_single_unlowered_nodes(self):
    # Each translation's and each gathered warp's fallback (the warp, Model Garden's
    # op) is one Case node left unlowered (`rarely`): lowered, every one of its nodes
    # is visited dead in every image whose layer does not take it.
    x = tf.TensorSpec([24, 20, 3], tf.uint8)
    graph = tf.function(randaugment.RandAugment(1, 9).distort).get_concrete_function(
        x).graph.as_graph_def()
    nodes = list(graph.node) + [n for f in graph.library.function for n in f.node_def]
    unlowered = [n for n in nodes if n.op in ("Case", "StatelessCase") and
                 "_lower_using_switch_merge" in n.attr and
                 not n.attr["_lower_using_switch_merge"].b]
    self.assertLen(unlowered, 5)  # TranslateX/Y's warps; Rotate's, ShearX/Y's others

  def test_maps_are_made_only_for_the_ops_the_policy_draws(self):
    others = [o for o in mg_augment.RandAugment().available_ops
              if o not in ("Rotate", "ShearX", "ShearY")]
    x = image([24, 20, 3])
    no_geometry = randaugment.RandAugment(2, 9, exclude_ops=["Rotate", "ShearX", "ShearY"])
    self.assertEqual(no_geometry._known(x), {})  # pylint: disable=protected-access
    rotate_only = randaugment.RandAugment(2, 9, exclude_ops=others + ["ShearX", "ShearY"])
    self.assertEqual(list(rotate_only._known(x)), ["Rotate"])  # pylint: disable=protected-access

  def test_a_batch_or_video_is_model_gardens_own(self):
    x = image([2, 16, 12, 3])
    tf.random.set_seed(5)
    got = randaugment.RandAugment(2, 9).distort(x)
    tf.random.set_seed(5)
    self.assertAllEqual(got, mg_augment.RandAugment(2, 9).distort(x))

  def test_solarize_and_solarize_add_give_model_gardens_values_for_every_pixel(self):
    x = tf.reshape(tf.range(256, dtype=tf.int32), [16, 16, 1])
    x = tf.cast(tf.tile(x, [1, 1, 3]), tf.uint8)
    for threshold in (0, 1, 100, 128, 230, 255):
      self.assertAllEqual(randaugment.solarize(x, threshold),
                          mg_augment.solarize(x, threshold))
      for addition in (0, 1, 50, 99, 110, 255, -20):
        self.assertAllEqual(randaugment.solarize_add(x, addition, threshold),
                            mg_augment.solarize_add(x, addition, threshold),
                            msg=f"{addition}, {threshold}")

  def colour_cases(self):
    """Images whose channels take every value, a narrow range, one value (autocontrast
    and equalize leave those), two values, and uniform noise; sides from 3."""
    every = tf.reshape(tf.range(256 * 3, dtype=tf.int32) % 256, [16, 16, 3])
    cases = [tf.cast(every, tf.uint8), tf.cast(tf.reverse(every, [1]) // 3 + 40, tf.uint8)]
    flat = lambda value: tf.fill([12, 9, 1], tf.constant(value, tf.uint8))
    cases.append(tf.concat([image([12, 9, 1], seed=1), flat(255), flat(7)], -1))
    cases.append(tf.cast(image([10, 14, 3], seed=2) > 200, tf.uint8) * 90 + 3)
    cases += [image([3, 3, 3], seed=3), image([31, 17, 3], seed=4),
              image([224, 224, 3], seed=5)]
    return cases

  @parameterized.parameters(
      ("AutoContrast", mg_augment.autocontrast, ()), ("Equalize", mg_augment.equalize, ()),
      ("Sharpness", mg_augment.sharpness, (1.72,)), ("Sharpness", mg_augment.sharpness,
                                                     (0.1,)),
      ("Sharpness", mg_augment.sharpness, (1.0,)), ("Sharpness", mg_augment.sharpness,
                                                    (0.0,)),
      ("Sharpness", mg_augment.sharpness, (-0.7,)))
  def test_each_colour_op_is_model_gardens_op(self, name, theirs, args):
    ours = randaugment.REIMPLEMENTED[name]
    for x in self.colour_cases():
      self.assertAllEqual(ours(x, *args), theirs(x, *args), msg=f"{x.shape}")
      # and in tf.data's graphs, as the pipeline runs them
      both = tf.data.Dataset.from_tensors(x).map(lambda y: (ours(y, *args),
                                                            theirs(y, *args)))
      got, want = next(iter(both))
      self.assertAllEqual(got, want, msg=f"{x.shape} in tf.data")

  def test_colour_ops_on_other_inputs_are_model_gardens_own(self):
    x = image([9, 8, 4], seed=6)  # not three channels: Model Garden's own ops
    self.assertAllEqual(randaugment.autocontrast(x), mg_augment.autocontrast(x))
    self.assertAllEqual(randaugment.equalize(x), mg_augment.equalize(x))
    y = image([9, 8, 3], seed=8)  # an unknown size, and a tensor factor
    unknown = tf.function(lambda y: randaugment.sharpness(y, 1.5),
                          input_signature=[tf.TensorSpec([None, None, 3], tf.uint8)])
    self.assertAllEqual(unknown(y), mg_augment.sharpness(y, 1.5))
    factor = tf.constant(1.5)
    self.assertAllEqual(randaugment.sharpness(y, factor), mg_augment.sharpness(y, factor))

  @parameterized.parameters((36, [128] * 3), (0, [128] * 3), (1, 0), (5, [1, 2, 3]),
                            (500, [128] * 3))
  def test_cutout_is_model_gardens_under_the_same_draws(self, pad_size, replace):
    x = image([40, 30, 3], seed=pad_size)
    changed = 0
    for seed in range(12):
      tf.random.set_seed(seed)
      got = randaugment.cutout(x, pad_size, replace)
      tf.random.set_seed(seed)
      self.assertAllEqual(got, mg_augment.cutout(x, pad_size, replace), msg=f"seed {seed}")
      changed += int(tf.reduce_any(got != x))
    self.assertEqual(changed > 0, pad_size > 0)
    drawn = tf.data.Dataset.range(4).map(lambda _: randaugment.cutout(x, pad_size, replace))
    for got in drawn:  # in a graph: the shape known, the block where it belongs
      self.assertEqual(got.shape, x.shape)
      filled = tf.reduce_all(got == tf.cast(replace, tf.uint8), axis=-1)
      rows, cols = tf.reduce_any(filled, 1), tf.reduce_any(filled, 0)
      self.assertLessEqual(int(tf.reduce_sum(tf.cast(rows, tf.int32))), 2 * pad_size)
      self.assertLessEqual(int(tf.reduce_sum(tf.cast(cols, tf.int32))), 2 * pad_size)

  @parameterized.parameters(0, 1)
  def test_shift_reflect_is_model_gardens_translate_at_every_shift(self, axis):
    # Whole shifts up to the side take the window; the others (beyond the side,
    # fractional) Model Garden's warp: every one Model Garden's pixels.
    x = image([13, 9, 3], seed=axis)
    side = x.shape[axis]
    shifts = [float(s) for s in range(-side - 3, side + 4)] + [2.5, -0.5, 1e10, -2.0**31]
    their_op = mg_augment.translate_x if axis == 1 else mg_augment.translate_y
    for shift in shifts:
      translation = [-shift, 0.] if axis == 1 else [0., -shift]
      ours = randaugment.shift_reflect(x, shift, axis)
      self.assertAllEqual(ours, mg_augment.translate(x, translation), msg=f"shift {shift}")
      # and the op RandAugment runs (wrap, warp, unwrap), not only the bare warp
      self.assertAllEqual(ours, their_op(x, shift, REPLACE), msg=f"shift {shift}")

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
