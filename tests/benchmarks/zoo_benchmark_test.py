"""//benchmarks:zoo at a tiny size, and its FLOP count against the formula."""

import json
import os

from absl import flags
from absl.testing import flagsaver
from absl.testing import parameterized
import tensorflow as tf
import tf_keras

from benchmarks import zoo_benchmark
from tricks import grouped_conv


class ZooBenchmarkTest(tf.test.TestCase, parameterized.TestCase):

  def setUp(self):
    super().setUp()
    if not flags.FLAGS.is_parsed():
      flags.FLAGS.mark_as_parsed()

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
    output = os.path.join(self.get_temp_dir(), "figures.json")
    with flagsaver.flagsaver(models=["nfnet_nano"], variants=["fp32", "bf16"], rounds=1,
                             steps=1, inference_models=["resnet20_cifar"],
                             inference_rounds=1, matmul_reps=1, output=output):
      zoo_benchmark.main(["zoo"])
    with open(output) as f:
      figures = json.load(f)
    self.assertGreater(figures["matmul_gflops"]["float32"], 0)
    row = figures["training"]["nfnet_nano"]
    self.assertEqual(set(row["variants"]), {"fp32", "bf16"})
    self.assertGreater(row["variants"]["fp32"]["images_per_second"], 0)
    self.assertGreater(row["training_gflops_per_image"], 0)
    self.assertIsNone(row["timm"])
    served = figures["inference"]["resnet20_cifar"]
    self.assertEqual(served["test_size"], 32)
    self.assertGreater(served["32"]["images_per_second"], 0)
    # The trainer's bf16 build leaves the global policy as it found it.
    self.assertEqual(tf_keras.mixed_precision.global_policy().name, "float32")

  @parameterized.parameters(
      dict(models=["nfnet_f9"]), dict(variants=["fp16"]), dict(variants=[]),
      dict(rounds=0), dict(inference_models=["vgg"]), dict(timm_python="/nonexistent"))
  def test_bad_flags(self, **bad):
    with flagsaver.flagsaver(**bad):
      with self.assertRaises(Exception) as caught:
        zoo_benchmark.check_flags()
    self.assertIn("--", str(caught.exception))


if __name__ == "__main__":
  tf.test.main()
