"""//recipes:fashion_mnist_long_tail on the real Fashion-MNIST release files: a few
steps through the whole recipe (data check, hold-out, Cao et al.'s draw, training,
validation, best checkpoint, the balanced 10,000-image test). Needs Debian's
dataset-fashion-mnist (.ci/run installs it); skipped with one line without it."""

import json
import os
import subprocess
import sys

import tensorflow as tf

from recipes.data import fashion_mnist
from tests import real_parts

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class FashionMnistLongTailTest(tf.test.TestCase):

  def test_trains_on_the_real_release(self):
    if not os.path.isdir(fashion_mnist.DEFAULT_DIRECTORY):
      real_parts.missing(fashion_mnist.DEFAULT_DIRECTORY,
                         "apt-get install dataset-fashion-mnist")
    model_dir = os.path.join(self.get_temp_dir(), "run")
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    result = subprocess.run(
        [sys.executable, "-m", "recipes.train",
         "--gin_file=recipes/fashion_mnist_long_tail.gin", f"--model_dir={model_dir}",
         "--gin_bindings=Runtime.steps = 4", "--gin_bindings=BATCH_SIZE = 32",
         "--gin_bindings=WARMUP_EPOCHS = 0"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, check=False)
    self.assertEqual(result.returncode, 0, msg=result.stderr[-3000:])
    with open(os.path.join(model_dir, "metrics.json")) as f:
      metrics = json.load(f)
    # Cao et al.'s profile on 5,900 a class (100 a class held out first), rho = 100.
    self.assertEqual(metrics["train_class_counts"],
                     [5900, 3536, 2120, 1271, 762, 456, 273, 164, 98, 59])
    self.assertEqual(metrics["num_validation_examples"], 1000)
    self.assertEqual(metrics["num_test_examples"], 10_000)
    self.assertEqual(metrics["steps"], 4)
    self.assertEqual(metrics["data"], "fashion_mnist")
    self.assertLen(metrics["per_class_accuracy"], 10)
    self.assertEqual(metrics["best_on_validation"]["epoch"], 1)
    self.assertTrue(os.path.exists(os.path.join(model_dir, "per_class_accuracy.png")))


if __name__ == "__main__":
  tf.test.main()
