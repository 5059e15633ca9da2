"""Published accelerator peaks, found by names as TensorFlow reports them."""

from absl.testing import parameterized
import tensorflow as tf

from benchmarks import device_peaks


class DevicePeaksTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.parameters(
      ("NVIDIA A100-SXM4-40GB", 312, "bfloat16"),
      ("NVIDIA A100-PCIE-40GB", 312, "bfloat16"),
      ("NVIDIA H100 80GB HBM3", 989, "bfloat16"),
      ("NVIDIA H100 PCIe", 756, "bfloat16"),
      ("NVIDIA H200", 989, "bfloat16"),
      ("NVIDIA L4", 121, "bfloat16"),
      ("NVIDIA L40S", 362, "bfloat16"),
      ("Tesla V100-SXM2-16GB", 125, "float16"),
      ("Tesla T4", 65, "float16"),
      ("TPU v4", 275, "bfloat16"),
      ("tpu v5e", 197, "bfloat16"))
  def test_published_peak(self, name, tflops, dtype):
    peak = device_peaks.published_peak(name)
    self.assertEqual((peak.tflops, peak.dtype), (tflops, dtype))
    self.assertTrue(peak.source)

  @parameterized.parameters("AMD EPYC 7B13", "NVIDIA GeForce RTX 4090", "")
  def test_unknown_devices_have_none(self, name):
    self.assertIsNone(device_peaks.published_peak(name))

  def test_mixed_precision_follows_the_peak_dtype(self):
    self.assertEqual(device_peaks.mixed_precision_for(
        device_peaks.published_peak("Tesla V100-SXM2-16GB")), "mixed_float16")
    self.assertEqual(device_peaks.mixed_precision_for(
        device_peaks.published_peak("NVIDIA L4")), "mixed_bfloat16")
    self.assertEqual(device_peaks.mixed_precision_for(None), "mixed_bfloat16")


if __name__ == "__main__":
  tf.test.main()
