"""The PIL CIFAR-10 AutoAugment policy (Ren et al.'s copy of DeepVoltaire's), op by op
against PIL's formulas written out in NumPy, at their magnitude indices."""

import numpy as np
import tensorflow as tf

from recipes.data import autoaugment_pil as aa


def image(seed=0, size=8):
  rng = np.random.default_rng(seed)
  return rng.integers(0, 256, [size, size, 3], dtype=np.uint8)


def op(name, x, magnitude, sign=1.0):
  return aa.apply_op(name, tf.constant(x), magnitude, sign).numpy()


def pil_blend(degenerate, x, factor):
  """PIL Image.blend (Blend.c): in C floats, in1 + alpha (in2 - in1), clipped,
  truncated to uint8."""
  in1, in2 = degenerate.astype(np.float32), x.astype(np.float32)
  out = in1 + np.float32(factor) * (in2 - in1)
  return np.clip(out, 0, 255).astype(np.uint8)


class AutoAugmentPilTest(tf.test.TestCase):

  def test_magnitudes_at_their_indices(self):
    # round(linspace(8, 4, 10)) = 8 8 7 7 6 6 5 5 4 4: index 7 keeps 5 bits (4.89 rounds up).
    self.assertEqual(aa.RANGES["posterize"][7], 5)
    self.assertEqual(list(aa.RANGES["posterize"]), [8, 8, 7, 7, 6, 6, 5, 5, 4, 4])
    self.assertAllClose(aa.RANGES["solarize"][2], 256 - 2 * 256 / 9)
    self.assertAllClose(aa.RANGES["translateX"][9] * 32, 150 / 331 * 32)  # 14.5 px
    self.assertAllClose(aa.RANGES["rotate"][2], 2 * 30 / 9)
    self.assertAllClose(aa.RANGES["color"][3], 0.3)  # m / 9 of 0.9: theirs, not m / 10
    self.assertLen(aa.CIFAR10_POLICY, 25)
    self.assertEqual(aa.CIFAR10_POLICY[5], (0.2, "shearY", 7, 0.3, "posterize", 7))

  def test_posterize_keeps_the_top_bits(self):
    x = image()
    self.assertAllEqual(op("posterize", x, aa.RANGES["posterize"][7]), (x >> 3) << 3)

  def test_solarize_inverts_from_the_threshold(self):
    x = np.arange(256, dtype=np.uint8).reshape(16, 16, 1).repeat(3, -1)
    for index in (0, 2, 5, 9):
      t = aa.RANGES["solarize"][index]  # fractional thresholds: i < t, as PIL's table
      self.assertAllEqual(op("solarize", x, t), np.where(x < t, x, 255 - x), msg=t)

  def test_contrast_blends_with_the_mean_grey_level(self):
    x = image(1)
    r, g, b = (x[..., c].astype(np.int64) for c in range(3))
    grey = (r * 19595 + g * 38470 + b * 7471 + 0x8000) >> 16  # PIL's RGB -> L
    mean = int(grey.mean() + 0.5)
    for sign in (1.0, -1.0):
      factor = 1 + sign * aa.RANGES["contrast"][6]
      self.assertAllEqual(op("contrast", x, aa.RANGES["contrast"][6], sign),
                          pil_blend(np.full_like(x, mean), x, factor))

  def test_brightness_and_color(self):
    x = image(2)
    m = aa.RANGES["brightness"][7]
    for sign in (1.0, -1.0):
      self.assertAllEqual(op("brightness", x, m, sign),
                          pil_blend(np.zeros_like(x), x, 1 + sign * m))
      grey = (x @ np.array([0.2989, 0.587, 0.114]))[..., None].repeat(3, -1)
      expected = pil_blend(np.round(grey), x, 1 + sign * aa.RANGES["color"][3])
      got = op("color", x, aa.RANGES["color"][3], sign).astype(int)
      self.assertLessEqual(np.abs(got - expected.astype(int)).max(), 1)  # grey rounding

  def test_invert_autocontrast_equalize(self):
    x = image(3, size=32)
    self.assertAllEqual(op("invert", x, 0), 255 - x)
    lo, hi = x.min((0, 1)), x.max((0, 1))
    scale = 255.0 / (hi - lo)
    self.assertAllEqual(op("autocontrast", x, 0),
                        np.clip(x * scale - lo * scale, 0, 255).astype(np.uint8))
    expected = np.empty_like(x)
    for c in range(3):  # PIL ImageOps.equalize, channel by channel
      h = np.bincount(x[..., c].ravel(), minlength=256)
      step = (h.sum() - h[np.nonzero(h)[0][-1]]) // 255
      self.assertGreater(step, 0)  # (PIL leaves the channel as it is at 0)
      lut, n = [], step // 2
      for i in range(256):
        lut.append(min(255, n // step))
        n += h[i]
      expected[..., c] = np.array(lut)[x[..., c]]
    self.assertAllEqual(op("equalize", x, 0), expected)

  def test_translate_reads_x_plus_t_and_fills_grey(self):
    x = image(4)
    out = op("translateX", x, 0.25, 1.0)  # PIL (1, 0, t, 0, 1, 0), t = 0.25 * 8 = 2 px
    self.assertAllEqual(out[:, :6], x[:, 2:])
    self.assertAllEqual(out[:, 6:], np.full_like(x[:, 6:], 128))
    out = op("translateY", x, 0.25, -1.0)
    self.assertAllEqual(out[2:], x[:6])
    self.assertAllEqual(out[:2], np.full_like(x[:2], 128))

  def test_rotate_turns_counter_clockwise(self):
    x = image(5)
    self.assertAllEqual(op("rotate", x, 90.0), np.rot90(x, k=1))  # PIL rotate(90)

  def test_shear_reads_x_plus_s_y_and_fills_grey(self):
    x = image(6)
    out = op("shearX", x, 1.0, -1.0)  # PIL (1, -1, 0, 0, 1, 0): input (x - y, y)
    for r in range(8):
      self.assertAllEqual(out[r, r:], x[r, :8 - r])
      self.assertAllEqual(out[r, :r], np.full_like(x[r, :r], 128))

  def test_policy_keeps_shape_and_dtype_in_a_dataset(self):
    policy = aa.CIFAR10Policy()
    data = tf.data.Dataset.from_tensors(tf.constant(image(6, 32))).repeat(30)
    for out in data.map(policy.distort):
      self.assertEqual(out.dtype, tf.uint8)
      self.assertEqual(out.shape, (32, 32, 3))
    # Every sub-policy traces and runs.
    for i in range(25):
      self.assertEqual(policy.sub_policy(tf.constant(image(7, 32)), i).shape, (32, 32, 3))


if __name__ == "__main__":
  tf.test.main()
