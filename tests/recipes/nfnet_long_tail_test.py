"""The flagship as `bazel run //recipes:nfnet_long_tail` runs it: NFNet-nano on the real
Fashion-MNIST release files, the long-tailed split of README (rho = 100, the validation
hold-out first, the balanced 10,000-image test split), for a few steps. The full run's
figures are //benchmarks:long_tail's (README's table, docs/data/nfnet_long_tail.json);
this checks that the command trains on that split with the flagship's settings and
reports as README says."""

import json
import os
import re
import subprocess
import sys

import tensorflow as tf

from recipes.data import fashion_mnist
from tests import real_parts

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COUNTS = [5900, 3536, 2120, 1271, 762, 456, 273, 164, 98, 59]  # int(5900 * 100^(-i/9))


def run(model_dir):
  """(metrics, the process's result, model_dir) of 6 steps of the flagship as a user
  runs it."""
  env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
             TF_CPP_MIN_LOG_LEVEL="2")
  result = subprocess.run(
      [sys.executable, "-m", "recipes.train", "--gin_file=recipes/nfnet_long_tail.gin",
       f"--model_dir={model_dir}", "--gin_bindings=Runtime.steps = 6"],
      cwd=ROOT, env=env, capture_output=True, text=True, timeout=840, check=False)
  if result.returncode != 0:
    raise AssertionError(f"the flagship failed ({result.returncode}): {result.stderr[-3000:]}")
  with open(os.path.join(model_dir, "metrics.json")) as f:
    return json.load(f), result, model_dir


class NfnetLongTailTest(tf.test.TestCase):

  def test_a_few_steps_of_the_default_run(self):
    if not os.path.isdir(fashion_mnist.DEFAULT_DIRECTORY):
      real_parts.missing(fashion_mnist.DEFAULT_DIRECTORY,
                         "apt-get install dataset-fashion-mnist (./bazelw does it as root)")
    results = [run(os.path.join(self.get_temp_dir(), name)) for name in ("run", "again")]
    # The default run's row reproduces on the same machine: the same command twice
    # gives the same figures, to the last bit (README's rows are such runs, longer).
    (metrics, result, model_dir), (again, _, _) = results
    for key in ("balanced_accuracy", "per_class_accuracy", "final_train_loss"):
      self.assertEqual(again[key], metrics[key], msg=key)
    self.assertEqual(metrics["data"], "fashion_mnist")
    self.assertEqual(metrics["train_class_counts"], COUNTS)
    self.assertEqual(metrics["num_train_examples"], sum(COUNTS))
    self.assertEqual(metrics["num_validation_examples"], 1000)
    self.assertEqual(metrics["num_test_examples"], 10000)
    self.assertEqual(metrics["steps"], 6)
    with open(os.path.join(model_dir, "operative_config.gin")) as f:
      operative = f.read()
    for line in ("build.name = 'nfnet_nano'", "Task.loss = @logit_adjusted",
                 "AdaptiveGradClip.clipping = %AGC_CLIPPING",
                 "SGD.nesterov = True", "Task.validation_per_class = 100",
                 "CaoLongTail.rho = %RHO", "RHO = 100"):
      self.assertIn(line, operative)
    # The report reads as a result (a run of 6 steps is not README's schedule: no
    # baseline line; recipes/baselines_test.py checks that line).
    self.assertRegex(result.stdout, r"\nBalanced accuracy 0\.\d{3} on the test split "
                     r"\(10000 images; top-1 0\.\d{3}\); many-shot 0\.\d{3} \(4 classes\), "
                     r"medium-shot 0\.\d{3} \(3 classes\), few-shot 0\.\d{3} \(3 classes\)\n")
    self.assertNotIn("cross-entropy on this split", result.stdout)
    self.assertTrue(re.search(r"Report in \S+: .*metrics.json", result.stdout))


if __name__ == "__main__":
  tf.test.main()
