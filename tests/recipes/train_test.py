"""The recipe entry point as users run it, end to end (its bad inputs: bad_inputs_test)."""

import json
import os

import tensorflow as tf

from tests.recipes import cli


def train(*args):
  """Runs `python -m recipes.train ARGS` as a user would; returns its Result."""
  return cli.finish(cli.spawn(*args))


class TrainTest(tf.test.TestCase):

  def test_tiny_recipe_end_to_end(self):
    model_dir = os.path.join(self.get_temp_dir(), "tiny")
    result = train(cli.TINY, f"--model_dir={model_dir}")
    self.assertEqual(result.returncode, 0, msg=result.stderr[-3000:])
    self.assertIn("balanced_accuracy", result.stdout)
    with open(os.path.join(model_dir, "metrics.json")) as f:
      metrics = json.load(f)
    self.assertEqual(metrics["recipe"], "nfnet_long_tail_digits")
    self.assertEqual(metrics["epochs"], 2)
    with open(os.path.join(model_dir, "operative_config.gin")) as f:
      operative = f.read()
    self.assertIn("logit_adjusted.tau = %LOGIT_ADJUST_TAU", operative)
    self.assertIn("LOGIT_ADJUST_TAU = 1.0", operative)
    self.assertIn("AdaptiveGradClip.clipping = %AGC_CLIPPING", operative)
    self.assertIn("AGC_CLIPPING = 0.04", operative)
    self.assertTrue(os.path.exists(os.path.join(model_dir, "per_class_accuracy.png")))


if __name__ == "__main__":
  tf.test.main()
