"""//benchmarks:dct_accuracy: the JPEG folders it writes, its two arms differing in the
switch alone, the share of boxes the switch scales at sizes where it is known, and its
table's paired interval against the t formula."""

import os

from absl import flags
from absl.testing import flagsaver
import numpy as np
import tensorflow as tf

from benchmarks import dct_accuracy_benchmark as bench
from benchmarks import tables

FLAGS = flags.FLAGS


class WriteTreeTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    rng = np.random.default_rng(0)
    coarse = rng.uniform(0, 255, (6, 7, 7, 1))
    grey = tf.cast(tf.image.resize(coarse, [28, 28]), tf.uint8).numpy()
    self.images = np.repeat(grey, 3, axis=-1)  # as fashion_mnist.load gives them
    self.labels = np.array([0, 1, 2, 0, 1, 2], np.int32)

  def test_the_first_images_of_every_class_as_grey_jpegs(self):
    folder = os.path.join(self.create_tempdir().full_path, "train")
    bench.write_tree(self.images, self.labels, 2, folder, quality=95)
    self.assertEqual(sorted(os.listdir(folder)), ["0", "1", "2"])
    self.assertEqual(sorted(os.listdir(os.path.join(folder, "1"))), ["1.jpg", "4.jpg"])
    with open(os.path.join(folder, "2", "5.jpg"), "rb") as f:
      decoded = tf.io.decode_jpeg(f.read()).numpy()
    self.assertEqual(decoded.shape, (28, 28, 1))  # grey, as Zalando's images are
    error = np.abs(decoded.astype(int) - self.images[5, ..., :1].astype(int))
    self.assertLess(error.mean(), 3)  # quality 95 on smooth noise (another image: ~80)
    self.assertLessEqual(error.max(), 12)
    self.assertFalse(os.path.exists(folder + ".tmp"))

  def test_folders_are_named_by_their_content(self):
    key = bench.tree_key(self.images, self.labels, 2, 95)
    self.assertEqual(key, bench.tree_key(self.images.copy(), self.labels.copy(), 2, 95))
    other = self.images.copy()
    other[4, 0, 0, 0] ^= 1  # one pixel of an image written (the second of class 1)
    self.assertNotEqual(key, bench.tree_key(other, self.labels, 2, 95))
    other = self.images.copy()
    other[5, 0, 0, 0] ^= 1  # one pixel of an image written (the second of class 2)
    self.assertNotEqual(key, bench.tree_key(other, self.labels, 2, 95))
    self.assertNotEqual(key, bench.tree_key(self.images, self.labels, 2, 90))
    self.assertNotEqual(key, bench.tree_key(self.images, self.labels, 1, 95))
    relabelled = self.labels[[1, 0, 2, 3, 4, 5]]
    self.assertNotEqual(key, bench.tree_key(self.images, relabelled, 2, 95))
    extra = np.concatenate([self.images, self.images[:1]])  # a third image of class 0
    self.assertEqual(key, bench.tree_key(extra, np.append(self.labels, 0), 2, 95))

  def test_too_few_images_a_class_stops_before_writing(self):
    folder = os.path.join(self.create_tempdir().full_path, "train")
    with self.assertRaises(SystemExit) as stop:
      bench.write_tree(self.images, self.labels, 3, folder, quality=95)
    self.assertEqual(stop.exception.code, 2)
    self.assertFalse(os.path.exists(folder))
    self.assertFalse(os.path.exists(folder + ".tmp"))


class ArmsTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    FLAGS.mark_as_parsed()

  def test_the_arms_differ_in_the_switch_alone(self):
    runs = {arm: bench.arm_run(arm, 1, ("/t", "/s"), "/r") for arm in bench.ARMS}
    scaled, unscaled = runs["DCT-scaled"].bindings, runs["unscaled"].bindings
    self.assertEqual(scaled[:-1], unscaled[:-1])
    self.assertEqual(scaled[-1], "InputPipeline.random_resized_crop_dct_scaling = True")
    self.assertEqual(unscaled[-1], "InputPipeline.random_resized_crop_dct_scaling = False")
    self.assertIn("SEED = 1", scaled)
    self.assertIn("image_folder.test_root = '/s'", scaled)
    self.assertNotEqual(runs["DCT-scaled"].model_dir, runs["unscaled"].model_dir)

  def test_seeds_need_two(self):
    with flagsaver.flagsaver(seeds=["0"]):
      with self.assertRaises(SystemExit) as stop:
        bench.seeds()
    self.assertEqual(stop.exception.code, 2)
    with flagsaver.flagsaver(seeds=["2", "0", "1"]):
      self.assertEqual(bench.seeds(), [0, 1, 2])


class ScaledFractionTest(tf.test.TestCase):

  def test_where_the_answer_is_known(self):
    # 28 px boxes of 8% of the area or more at ratios 3/4..4/3 have a short side of 7
    # or more: all >= 2 * 1; none is 2 * 15 = 30 wide.
    self.assertEqual(bench.scaled_fraction(1, draws=200), 1.0)
    self.assertEqual(bench.scaled_fraction(15, draws=200), 0.0)
    self.assertBetween(bench.scaled_fraction(12, draws=200), 0.05, 0.95)


class TableTest(tf.test.TestCase):

  def test_the_paired_difference_by_the_t_formula(self):
    results = {"accuracies": {
        "unscaled": {"validation": {"0": .80, "1": .81, "2": .82},
                     "test": {"0": .70, "1": .70, "2": .70}},
        "DCT-scaled": {"validation": {"0": .81, "1": .83, "2": .85},
                       "test": {"0": .70, "1": .70, "2": .70}}}}
    results["difference"] = bench.summary(results["accuracies"])
    # Differences 0.01, 0.02, 0.03: mean 0.02, sd 0.01, se 0.01 / sqrt(3); t(2) 4.303;
    # t = 2 sqrt(3), p = 1 - t / sqrt(2 + t^2) = 0.074 (the t(2) distribution in closed form).
    half = 4.303 * 0.01 / 3 ** 0.5
    self.assertAlmostEqual(results["difference"]["validation"]["low"], 0.02 - half, 4)
    self.assertEqual(results["difference"]["validation"]["dof"], 2)
    lines = tables.dct_accuracy(results).splitlines()
    self.assertEqual(lines[2:4], ["| unscaled | 3 | 0.8100 | 0.7000 |",
                                  "| DCT-scaled | 3 | 0.8300 | 0.7000 |"])
    self.assertEqual(lines[4], "| DCT-scaled - unscaled, validation | 3 pairs | +0.0200 "
                     f"[{0.02 - half:+.4f}, {0.02 + half:+.4f}] | paired t, 2 df, "
                     "p = 0.074: within noise |")
    self.assertTrue(lines[5].endswith("within noise |"), lines[5])


if __name__ == "__main__":
  tf.test.main()
