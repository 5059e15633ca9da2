"""What a newcomer sees on the first run: no TensorFlow start-up lines on a machine
without GPUs, and one line that names the devices.

Runs the real entry (`python -m recipes.train`, what `bazel run //recipes:<recipe>` and
every launched worker run) on the tiny flagship, with the environment a user has:
neither TF_CPP_MIN_LOG_LEVEL nor CUDA_VISIBLE_DEVICES set.
"""

import subprocess
import sys

import tensorflow as tf

from recipes import startup
from tests.recipes import cli


class FirstRunTest(tf.test.TestCase):

  def test_cpu_run_prints_no_tensorflow_start_up_lines(self):
    env = cli.environment()
    env.pop("TF_CPP_MIN_LOG_LEVEL")
    env.pop("CUDA_VISIBLE_DEVICES", None)
    if startup.gpu_expected(env):
      self.skipTest("this machine has NVIDIA devices: TensorFlow's lines are kept")
    result = subprocess.run(
        [sys.executable, "-m", "recipes.train", cli.TINY, "--gin_bindings=EPOCHS = 1",
         f"--model_dir={self.get_temp_dir()}/run"],
        cwd=cli.ROOT, env=env, capture_output=True, text=True, timeout=600, check=False)
    self.assertEqual(result.returncode, 0, result.stderr[-3000:])
    # Before: "E ... cuda_platform.cc:51] failed call to cuInit: ... (303)" and
    # "W ... GeneratorDatasetOp::Dataset will not be optimized ..." on every run.
    self.assertNotIn("cuInit", result.stderr)
    self.assertNotIn("GeneratorDatasetOp", result.stderr)
    self.assertEqual([l for l in result.stderr.splitlines() if cli.LOG_RECORD.match(l)], [])
    self.assertIn("devices: CPU only", result.stdout.splitlines())


if __name__ == "__main__":
  tf.test.main()
