"""The start-up rule: TensorFlow's C++ log level before import, and the devices line."""

import os

import tensorflow as tf

from recipes import startup
from recipes import strategies

NODES = ["/dev/nvidia0", "/dev/nvidia1"]


class LogLevelTest(tf.test.TestCase):

  def test_gpu_machine_keeps_warnings_and_errors(self):
    # NVIDIA device nodes: TensorFlow's warnings and errors stay visible.
    self.assertTrue(startup.gpu_expected({}, NODES))
    self.assertEqual(startup.tf_log_level({}, NODES), "1")
    # CUDA_VISIBLE_DEVICES naming devices counts too (a container may hide /dev).
    self.assertEqual(startup.tf_log_level({"CUDA_VISIBLE_DEVICES": "0,1"}, []), "1")
    self.assertEqual(startup.tf_log_level({"CUDA_VISIBLE_DEVICES": "GPU-5c1e"}, []), "1")

  def test_cpu_machine_hides_tensorflow_start_up_lines(self):
    self.assertFalse(startup.gpu_expected({}, []))
    self.assertEqual(startup.tf_log_level({}, []), "3")
    # GPUs hidden on purpose: a CPU run, quiet.
    for hidden in ("", "-1", " -1 "):
      self.assertEqual(
          startup.tf_log_level({"CUDA_VISIBLE_DEVICES": hidden}, NODES), "3", msg=hidden)

  def test_a_level_the_user_set_is_kept(self):
    for nodes in (NODES, []):
      for level in ("0", "2", "3"):
        self.assertEqual(startup.tf_log_level({"TF_CPP_MIN_LOG_LEVEL": level}, nodes),
                         level)
    # An empty value is no setting.
    self.assertEqual(startup.tf_log_level({"TF_CPP_MIN_LOG_LEVEL": ""}, []), "3")

  def test_quiet_tensorflow_sets_the_variable(self):
    env = {"CUDA_VISIBLE_DEVICES": "0"}
    self.assertEqual(startup.quiet_tensorflow(env), "1")
    self.assertEqual(env["TF_CPP_MIN_LOG_LEVEL"], "1")
    env = {"TF_CPP_MIN_LOG_LEVEL": "0", "CUDA_VISIBLE_DEVICES": "-1"}
    self.assertEqual(startup.quiet_tensorflow(env), "0")

  def test_device_nodes_are_gpus_only(self):
    # /dev/nvidiactl and /dev/nvidia-uvm exist with a driver but without a GPU.
    for node in startup.nvidia_device_nodes():
      self.assertRegex(os.path.basename(node), r"^nvidia\d+$")


class DevicesLineTest(tf.test.TestCase):

  def test_gpus(self):
    self.assertEqual(
        strategies.devices_line(["GPU", "GPU"], ["NVIDIA H100 80GB HBM3"] * 2, "mirrored"),
        "devices: 2 x GPU (NVIDIA H100 80GB HBM3), mirrored")
    self.assertEqual(
        strategies.devices_line(["GPU"], ["NVIDIA A100-SXM4-40GB"], "one device",
                                gpu_expected=True),
        "devices: 1 x GPU (NVIDIA A100-SXM4-40GB)")
    self.assertEqual(
        strategies.devices_line(["GPU"] * 8, ["NVIDIA A100"] * 8, "multi-worker mirrored",
                                workers=4),
        "devices: 8 x GPU (NVIDIA A100), multi-worker mirrored over 4 workers")

  def test_cpu(self):
    self.assertEqual(strategies.devices_line(["CPU"]), "devices: CPU only")
    self.assertEqual(strategies.devices_line(["CPU", "CPU"], kind="mirrored"),
                     "devices: 2 x CPU (logical devices of one CPU), mirrored")

  def test_a_missing_gpu_is_said(self):
    line = strategies.devices_line(["CPU"], gpu_expected=True)
    self.assertStartsWith(line, "devices: CPU only; a GPU was expected")
    self.assertIn("TensorFlow found none", line)

  def test_describes_a_real_strategy(self):
    line = strategies.describe_devices(strategies.make_strategy("one_device"))
    if tf.config.list_physical_devices("GPU"):
      self.assertStartsWith(line, "devices: 1 x GPU (")
    else:
      self.assertEqual(line, "devices: CPU only")

if __name__ == "__main__":
  tf.test.main()
