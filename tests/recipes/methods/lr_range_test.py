"""The LR range test: the sweep, the suggestion rule on known curves, and a real run."""

import json
import os

import gin
import numpy as np
import tensorflow as tf
import tf_keras

from recipes import strategies
from recipes import train
from recipes.errors import ConfigError
from recipes.methods import lr_range

TINY = "tests/recipes/configs/nfnet_long_tail_tiny.gin"  # the flagship, 2 epochs at 16px


class LrRangeTest(tf.test.TestCase):

  def tearDown(self):
    gin.clear_config()
    tf_keras.backend.clear_session()
    super().tearDown()

  def test_exponential_sweep(self):
    sweep = lr_range.exponential_sweep(total_steps=101, steps_per_epoch=10, min_lr=1e-4,
                                       max_lr=1.0)
    self.assertAllClose([sweep(0), sweep(50), sweep(100)], [1e-4, 1e-2, 1.0], rtol=1e-5)

  def test_smooth_is_bias_corrected(self):
    self.assertAllClose(lr_range.smooth([2.0, 2.0, 2.0], 0.9), [2.0, 2.0, 2.0])
    self.assertAllClose(lr_range.smooth([0.0, 1.0], 0.5), [0.0, 0.5 / 0.75])

  def test_suggestion_on_known_curves(self):
    lrs = np.logspace(-4, 1, 101)
    x = np.log10(lrs)
    # Accuracy flat at 0.1 until lr 1e-3, rising to 0.9 at lr 1e-1, falling after.
    accuracy = np.interp(x, [-4, -3, -1, 0, 1], [0.1, 0.1, 0.9, 0.5, 0.1])
    loss = np.interp(x, [-4, -1, 0, 0.5, 1], [2.3, 0.4, 1.0, 5.0, np.nan])
    got = lr_range.suggest(lrs, loss, accuracy, smoothing=0.0)
    self.assertAllClose(got["max_lr"], 1e-1, rtol=1e-6)
    # 10% of the 0.8 rise is reached a tenth of the way from 1e-3 to 1e-1 (in log lr).
    self.assertAllClose(np.log10(got["base_lr"]), -3 + 0.2, atol=0.051)
    # The loss passes 4x its minimum (1.6) between lr 1 and 10^0.5: cut there.
    self.assertLess(lrs[got["last_stable_step"]], 10 ** 0.5)

  def test_rise_is_measured_from_the_low_before_the_peak(self):
    lrs = np.logspace(-4, 1, 101)
    x = np.log10(lrs)
    # Early noise: accuracy starts at 0.3 and dips to 0.1 before it really rises.
    accuracy = np.interp(x, [-4, -3, -1, 1], [0.3, 0.1, 0.9, 0.2])
    got = lr_range.suggest(lrs, np.ones(101), accuracy, smoothing=0.0)
    self.assertAllClose(np.log10(got["base_lr"]), -3 + 0.2, atol=0.051)
    self.assertAllClose(got["max_lr"], 1e-1, rtol=1e-6)

  def test_range_test_needs_the_sweep(self):
    train.parse_config([TINY], ["run.procedure = @lr_range_test"])
    with self.assertRaisesRegex(ConfigError, "needs Optimization.learning_rate = "
                                "@exponential_sweep"):
      train.run(os.path.join(self.get_temp_dir(), "x"), strategies.make_strategy("one_device"))

  def test_no_learning_no_suggestion(self):
    got = lr_range.suggest([1e-3, 1e-2, 1e-1], [2.0, 2.0, 2.0], [0.5, 0.4, 0.3])
    self.assertIsNone(got["base_lr"])

  def test_range_test_on_the_tiny_recipe(self):
    model_dir = os.path.join(self.get_temp_dir(), "range")
    train.parse_config([TINY],
                       ["run.procedure = @lr_range_test", "EPOCHS = 4",
                        "Optimization.learning_rate = @exponential_sweep",
                        "exponential_sweep.min_lr = 1e-3", "exponential_sweep.max_lr = 1.0",
                        "Runtime.steps_per_loop = 3"])
    result = train.run(model_dir, strategies.make_strategy("one_device"))
    # 264 examples, batch 32: 8 steps an epoch, each recorded from loops of 3 (3, 3, 2).
    self.assertLen(result["steps"]["lr"], 4 * 8)
    self.assertEqual(len(set(result["steps"]["loss"])), 4 * 8)
    self.assertAllClose(result["steps"]["lr"][0], 1e-3, rtol=1e-5)
    self.assertAllClose(result["steps"]["lr"][-1], 1.0, rtol=1e-5)
    with open(os.path.join(model_dir, "lr_range.json")) as f:
      self.assertEqual(json.load(f)["steps"]["lr"], result["steps"]["lr"])
    with open(os.path.join(model_dir, "lr_range.png"), "rb") as f:
      self.assertEqual(f.read(4), b"\x89PNG")

  def test_a_sweep_that_diverges_ends_there(self):
    model_dir = os.path.join(self.get_temp_dir(), "diverges")
    train.parse_config(["recipes/nfnet_lr_range.gin"],
                       ["EPOCHS = 2", "IMAGE_SIZE = 16", "exponential_sweep.min_lr = 1.0",
                        "exponential_sweep.max_lr = 1e12", "AGC_CLIPPING = 1e9"])
    result = train.run(model_dir, strategies.make_strategy("one_device"))
    losses = result["steps"]["loss"]
    self.assertLess(len(losses), 16)  # cut at the divergence, not run to the end
    self.assertLess(result["max_lr_swept"], 1e11)
    self.assertIsNone(result["final_test_top1"])
    with open(os.path.join(model_dir, "lr_range.json")) as f:
      self.assertEqual(json.load(f)["steps"]["lr"], result["steps"]["lr"])  # strict JSON
    # Run again: the finished sweep is left as it was.
    gin.clear_config()
    train.parse_config(["recipes/nfnet_lr_range.gin"],
                       ["EPOCHS = 2", "IMAGE_SIZE = 16", "exponential_sweep.min_lr = 1.0",
                        "exponential_sweep.max_lr = 1e12", "AGC_CLIPPING = 1e9"])
    again = train.run(model_dir, strategies.make_strategy("one_device"))
    self.assertEqual(again["steps"]["lr"], result["steps"]["lr"])


if __name__ == "__main__":
  tf.test.main()
