"""The recipe entry point as users run it: flags, Gin files, exit codes, outputs."""

import json
import os
import re
import subprocess
import sys

import tensorflow as tf

# The runfiles (or source) root, where recipes/ and its Gin files live.
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def train(*args):
  """Runs `python -m recipes.train ARGS` as a user would; returns the finished process."""
  env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
             TF_CPP_MIN_LOG_LEVEL="2")
  env.pop("BUILD_WORKING_DIRECTORY", None)
  return subprocess.run([sys.executable, "-m", "recipes.train", *args], cwd=ROOT, env=env,
                        capture_output=True, text=True, timeout=600, check=False)


class TrainTest(tf.test.TestCase):

  def assert_one_line_error(self, result, pattern, model_dir):
    self.assertEqual(result.returncode, 2, msg=result.stderr[-3000:])
    # Everything on stderr but log records (TF's C++ "2026-..." and absl's "I1122 ...").
    said = [line for line in result.stderr.splitlines()
            if line.strip() and not re.match(r"(\d{4}-\d\d-\d\d |[IWEF]\d{4} )", line)]
    self.assertLen(said, 1, msg=result.stderr[-3000:])
    self.assertRegex(said[0], "^error: .*" + pattern)
    self.assertNotIn("Traceback", result.stderr)
    self.assertFalse(os.path.exists(model_dir))

  def test_tiny_recipe_end_to_end(self):
    model_dir = os.path.join(self.get_temp_dir(), "tiny")
    result = train("--gin_file=recipes/nfnet_long_tail_tiny.gin", f"--model_dir={model_dir}")
    self.assertEqual(result.returncode, 0, msg=result.stderr[-3000:])
    self.assertIn("balanced_accuracy", result.stdout)
    with open(os.path.join(model_dir, "metrics.json")) as f:
      metrics = json.load(f)
    self.assertEqual(metrics["recipe"], "nfnet_long_tail")
    self.assertEqual(metrics["epochs"], 2)
    with open(os.path.join(model_dir, "operative_config.gin")) as f:
      operative = f.read()
    self.assertIn("logit_adjusted.tau = %TAU", operative)
    self.assertIn("TAU = 1.0", operative)
    self.assertIn("AdaptiveGradClip.clipping = %AGC_CLIPPING", operative)
    self.assertIn("AGC_CLIPPING = 0.04", operative)
    self.assertTrue(os.path.exists(os.path.join(model_dir, "per_class_accuracy.png")))

  def test_unknown_gin_binding(self):
    model_dir = os.path.join(self.get_temp_dir(), "unknown_binding")
    result = train("--gin_file=recipes/nfnet_long_tail_tiny.gin", f"--model_dir={model_dir}",
                   "--gin_bindings=LongTail.rhoo = 10")
    self.assert_one_line_error(result, "bad Gin config: .*rhoo", model_dir)

  def test_unknown_configurable(self):
    model_dir = os.path.join(self.get_temp_dir(), "unknown_configurable")
    result = train("--gin_file=recipes/nfnet_long_tail_tiny.gin", f"--model_dir={model_dir}",
                   "--gin_bindings=NoSuchThing.x = 1")
    self.assert_one_line_error(result, "bad Gin config: .*NoSuchThing", model_dir)

  def test_missing_gin_file(self):
    model_dir = os.path.join(self.get_temp_dir(), "no_file")
    result = train("--gin_file=recipes/nope.gin", f"--model_dir={model_dir}")
    self.assert_one_line_error(result, "gin file 'recipes/nope.gin' not found", model_dir)

  def test_unknown_flag(self):
    model_dir = os.path.join(self.get_temp_dir(), "flag")
    result = train("--gin_file=recipes/nfnet_long_tail_tiny.gin", f"--model_dir={model_dir}",
                   "--epochz=3")
    self.assertNotEqual(result.returncode, 0)
    self.assertIn("Unknown command line flag 'epochz'", result.stderr)
    self.assertFalse(os.path.exists(model_dir))

  def test_missing_dataset_path(self):
    model_dir = os.path.join(self.get_temp_dir(), "missing_data")
    result = train("--gin_file=recipes/nfnet_long_tail_tiny.gin", f"--model_dir={model_dir}",
                   "--gin_bindings=Task.data = @image_folder",
                   "--gin_bindings=image_folder.root = '/no/such/images'",
                   "--gin_bindings=image_folder.test_per_class = 5")
    self.assert_one_line_error(result, "image folder '/no/such/images' does not exist",
                               model_dir)

  def test_classes_that_do_not_match_the_model(self):
    model_dir = os.path.join(self.get_temp_dir(), "classes")
    result = train("--gin_file=recipes/nfnet_long_tail_tiny.gin", f"--model_dir={model_dir}",
                   "--gin_bindings=zoo.build.num_classes = 12")
    self.assert_one_line_error(result, "data set has 10 classes but the model outputs 12",
                               model_dir)

  def test_unwritable_model_dir(self):
    blocker = os.path.join(self.get_temp_dir(), "blocker")
    with open(blocker, "w") as f:
      f.write("x")
    model_dir = os.path.join(blocker, "run")
    result = train("--gin_file=recipes/nfnet_long_tail_tiny.gin", f"--model_dir={model_dir}")
    self.assert_one_line_error(result, "model_dir .* cannot be created", model_dir)

  def test_required_binding_left_unset(self):
    model_dir = os.path.join(self.get_temp_dir(), "required")
    result = train("--gin_file=recipes/nfnet_long_tail_full.gin", f"--model_dir={model_dir}")
    self.assert_one_line_error(result, "DATA_DIR.*set it with --gin_bindings", model_dir)

  def test_required_parameter_left_unset(self):
    model_dir = os.path.join(self.get_temp_dir(), "required_param")
    result = train("--gin_file=recipes/nfnet_long_tail_tiny.gin", f"--model_dir={model_dir}",
                   "--gin_bindings=Task.data = @tfds_source")
    self.assert_one_line_error(result, "Required bindings for `tfds_source`.*name", model_dir)


if __name__ == "__main__":
  tf.test.main()
