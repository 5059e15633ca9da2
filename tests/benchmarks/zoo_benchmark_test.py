"""//benchmarks:zoo at a tiny size: its FLOP count against the formula, the timm peer's
protocol (a stand-in interpreter), and the --device path (a GPU name given on CPU)."""

import contextlib
import io
import json
import os
import stat
from unittest import mock

from absl import flags
from absl.testing import flagsaver
from absl.testing import parameterized
import numpy as np
import tensorflow as tf
import tf_keras

from benchmarks import stats
from benchmarks import tables
from benchmarks import zoo_benchmark
from recipes import strategies
from tricks import grouped_conv

# Speaks benchmarks/peer_timm.py's protocol without torch ($6 is the setting).
FAKE_TIMM_PYTHON = """#!/bin/sh
if [ "$6" = "compile" ]; then echo "skipped CppCompileError: no C++ compiler"; exit 0; fi
echo "ready torch fake"
while read steps; do echo 0.05; done
"""
TINY = dict(rounds=2, steps=1, inference_models=[], matmul_reps=1)


class ZooBenchmarkTest(tf.test.TestCase, parameterized.TestCase):

  def setUp(self):
    super().setUp()
    if not flags.FLAGS.is_parsed():
      flags.FLAGS.mark_as_parsed()

  def run_main(self, **flag_values):
    output = os.path.join(self.get_temp_dir(), "figures.json")
    with flagsaver.flagsaver(output=output, **flag_values):
      zoo_benchmark.main(["zoo"])
    with open(output) as f:
      return json.load(f)

  @parameterized.parameters(1, 3)
  def test_flops_are_twice_the_multiply_adds(self, groups):
    """A 3x3 convolution (stride 2) and a Dense layer: 2 x H_out W_out k^2 C_in/G C_out
    and 2 x inputs x outputs, plus the bias adds TF's profiler counts (one a value)."""
    inputs = tf_keras.Input((8, 8, 3))
    x = grouped_conv.GroupedConv2D(6, 3, strides=2, padding="same", groups=groups)(inputs)
    x = tf_keras.layers.Flatten()(x)
    model = tf_keras.Model(inputs, tf_keras.layers.Dense(5)(x))
    conv = 2 * 4 * 4 * 9 * (3 // groups) * 6 + 4 * 4 * 6
    dense = 2 * (4 * 4 * 6) * 5 + 5
    self.assertEqual(zoo_benchmark.forward_flops(model, 8), conv + dense)
    self.assertEqual(zoo_benchmark.training_flops(model, 8), 3 * (conv + dense))

  def test_published_forward_cost(self):
    """ResNet-50 at 224px: 3.87 G multiply-adds (He et al. 2016 table 1 gives 3.8 G)."""
    from zoo import registry  # pylint: disable=g-import-not-at-top
    model = registry.build("resnet50", num_classes=1000)
    self.assertAllClose(zoo_benchmark.forward_flops(model, 224) / 2e9, 3.87, atol=0.02)

  def test_tiny_run_reports_every_figure(self):
    figures = self.run_main(models=["nfnet_nano"], variants=["fp32", "bf16"], rounds=1,
                            steps=1, inference_models=["resnet20_cifar"],
                            inference_rounds=1, matmul_reps=1)
    self.assertGreater(figures["matmul_gflops"]["float32"], 0)
    row = figures["training"]["nfnet_nano"]
    self.assertEqual(set(row["variants"]), {"fp32", "bf16"})
    fp32 = row["variants"]["fp32"]
    self.assertGreater(fp32["images_per_second"], 0)
    self.assertGreater(row["training_gflops_per_image"], 0)
    self.assertAllClose(fp32["fraction_of_peak"],
                        fp32["images_per_second"] * row["training_flops_per_image"]
                        / (figures["matmul_gflops"]["float32"] * 1e9), rtol=2e-3)
    self.assertIsNone(row["timm"])
    self.assertIsNone(row["peers"])
    served = figures["inference"]["resnet20_cifar"]
    self.assertEqual(served["test_size"], 32)
    self.assertGreater(served["32"]["images_per_second"], 0)
    # The trainer's bf16 build leaves the global policy as it found it.
    self.assertEqual(tf_keras.mixed_precision.global_policy().name, "float32")

  def test_timm_peer_ratios_carry_intervals_and_skips(self):
    python = os.path.join(self.get_temp_dir(), "python")
    with open(python, "w") as f:
      f.write(FAKE_TIMM_PYTHON)
    os.chmod(python, os.stat(python).st_mode | stat.S_IXUSR)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
      figures = self.run_main(models=["resnet50"], variants=["fp32"], batch_size=2,
                              image_size=32, timm_python=python,
                              timm_settings=["default", "channels_last", "compile"],
                              **TINY)
    row = figures["training"]["resnet50"]
    self.assertEqual(row["timm_skipped"],
                     {"timm_compile": "CppCompileError: no C++ compiler"})
    self.assertEqual(row["variants"]["timm"]["ms_per_step"], 50.0)
    peers = row["peers"]
    self.assertEqual(peers["ours"], "fp32")
    self.assertEqual(set(peers["ratios"]), {"timm", "timm_channels_last"})
    ours = row["variants"]["fp32"]["seconds_a_step_each_round"]
    ratio = peers["ratios"]["timm"]
    self.assertEqual(ratio["rounds"], 2)
    # The one timing rule (benchmarks/stats.py): the median of the per-round ratios;
    # two rounds give no 95% interval, so no bounds and no verdict.
    self.assertAllClose(ratio["ratio"], np.median([0.05 / t for t in ours]), atol=2e-3)
    self.assertEqual((ratio["low"], ratio["high"]), (None, None))
    self.assertEqual(ratio["verdict"], stats.TOO_FEW_ROUNDS)
    text = printed.getvalue()
    self.assertIn(f"{ratio['ratio']:.2f}x [no 95% interval from 2 rounds]", text)
    self.assertIn(ratio["verdict"], text)
    self.assertIsNone(row["variants"]["fp32"]["noise"])  # nor a noise figure
    self.assertIn(stats.TIMING_RULE, text)
    self.assertIn("timm_compile", text)
    self.assertIn("skipped: CppCompileError", text)

  def test_fraction_of_two_published_peaks(self):
    """2,000 img/s at 24 GFLOP an image is 48 TFLOP/s: 48 / 624 of two A100s (312
    TFLOP/s bfloat16 dense each), the same for float32; timm's rows get none."""
    row = {"training_flops_per_image": 24e9,
           "variants": {"fp32": {"images_per_second": 2000.0},
                        "bf16": {"images_per_second": 2000.0},
                        "timm": {"images_per_second": 1000.0}}}
    zoo_benchmark.add_fractions(
        row, zoo_benchmark.device_yardstick("NVIDIA A100-SXM4-80GB", replicas=2))
    self.assertEqual(row["variants"]["fp32"]["fraction_of_peak"], 0.07692)
    self.assertEqual(row["variants"]["bf16"]["fraction_of_peak"], 0.07692)
    self.assertNotIn("fraction_of_peak", row["variants"]["timm"])
    self.assertIsNone(zoo_benchmark.device_yardstick("AMD EPYC 7B13", 1))
    self.assertEqual(zoo_benchmark.device_variants("Tesla V100-SXM2-16GB"),
                     ("fp32", "fp32_xla", "fp16", "fp16_xla"))
    self.assertEqual(zoo_benchmark.device_variants("NVIDIA H100 80GB HBM3"),
                     ("fp32", "fp32_xla", "bf16", "bf16_xla"))

  def test_device_path_with_a_gpu_name_given_on_cpu(self):
    """The accelerator path run on this CPU, as if it were an A100 (312 TFLOP/s)."""
    found = (strategies.make_strategy("auto"), "NVIDIA A100-SXM4-40GB")
    printed = io.StringIO()
    with mock.patch.object(zoo_benchmark, "find_accelerator", return_value=found), \
        contextlib.redirect_stdout(printed):
      figures = self.run_main(device="gpu", models=["resnet32_cifar"],
                              variants=["fp32", "bf16"], batch_size=4, **TINY)
    self.assertEqual(figures["device"]["peak"]["tflops"], 312)
    self.assertNotIn("matmul_gflops", figures)
    row = figures["training"]["resnet32_cifar"]
    self.assertEqual(row["image_size"], 32)  # the card's training size
    for name in ("fp32", "bf16"):
      v = row["variants"][name]
      self.assertAllClose(v["fraction_of_peak"],
                          v["images_per_second"] * row["training_flops_per_image"]
                          / 312e12, rtol=2e-3)
    self.assertIn("312 TFLOP/s dense bfloat16", printed.getvalue())
    self.assertIn("NVIDIA A100 Tensor Core GPU datasheet", printed.getvalue())

  def test_device_gpu_without_one_says_so_in_one_line(self):
    errors = io.StringIO()
    with flagsaver.flagsaver(device="gpu"), mock.patch.object(
        tf.config, "list_physical_devices", return_value=[]), \
        contextlib.redirect_stderr(errors):
      with self.assertRaises(SystemExit) as caught:
        zoo_benchmark.main(["zoo"])
    self.assertEqual(caught.exception.code, 2)
    self.assertEqual(errors.getvalue().count("\n"), 1)
    self.assertIn("no GPU is present", errors.getvalue())

  @parameterized.parameters(
      dict(models=["nfnet_f9"]), dict(variants=["int8"]), dict(variants=[]),
      dict(rounds=0), dict(inference_models=["vgg"]), dict(timm_python="/nonexistent"),
      dict(timm_settings=["fastest"]), dict(batch_size=0),
      dict(timm_python="/bin/sh", device="gpu"))
  def test_bad_flags(self, **bad):
    with flagsaver.flagsaver(**bad):
      with self.assertRaises(Exception) as caught:
        zoo_benchmark.check_flags()
    self.assertIn("--", str(caught.exception))

  def test_the_timm_table_knows_every_setting(self):
    # tables.zoo_timm renders docs/costs.md's table from this benchmark's JSON keys.
    self.assertEqual([key for key, _ in tables.TIMM_SETTINGS],
                     [zoo_benchmark.timm_key(s) for s in zoo_benchmark.TIMM_SETTINGS])


if __name__ == "__main__":
  tf.test.main()
