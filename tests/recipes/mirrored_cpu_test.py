"""`--strategy=mirrored --cpu_replicas=2`: the multi-replica code path on a machine
without GPUs, in real processes (`python -m recipes.train`), trains the tiny flagship
to the weights one device reaches on the same global batch."""

import json
import os

import tensorflow as tf

from tests.recipes import cli

# Stochastic depth and dropout draw per replica; without them the two runs do the same
# arithmetic, summed in a different order.
DETERMINISTIC_MODEL = ("--gin_bindings=zoo.build.stochdepth_rate = 0.0",
                       "--gin_bindings=zoo.build.dropout = 0.0")


def final_weights(model_dir):
  """{name: value} of the model variables in the run's latest checkpoint."""
  reader = tf.train.load_checkpoint(
      tf.train.latest_checkpoint(os.path.join(model_dir, "checkpoints")))
  return {n: reader.get_tensor(n) for n in reader.get_variable_to_shape_map()
          if n.startswith("model/") and n.endswith(".ATTRIBUTES/VARIABLE_VALUE")}


class MirroredCpuTest(tf.test.TestCase):

  def test_two_cpu_replicas_train_like_one_device(self):
    root = self.create_tempdir().full_path
    runs = {}
    for name, strategy in (("one_device", ["--strategy=one_device"]),
                           ("mirrored", ["--strategy=mirrored", "--cpu_replicas=2"])):
      model_dir = os.path.join(root, name)
      result = cli.finish(cli.spawn(cli.TINY, *DETERMINISTIC_MODEL, *strategy,
                                    f"--model_dir={model_dir}"))
      self.assertEqual(result.returncode, 0, result.stderr[-3000:])
      replicas = 2 if name == "mirrored" else 1
      self.assertIn(f"on {replicas} replica(s)", result.stdout)
      with open(os.path.join(model_dir, "metrics.json")) as f:
        runs[name] = (final_weights(model_dir), json.load(f))
    (one, one_metrics), (two, two_metrics) = runs["one_device"], runs["mirrored"]
    self.assertEqual(sorted(one), sorted(two))
    self.assertNotEmpty(one)
    for name, value in one.items():
      # Float reassociation (per-replica sums, then the all-reduce) over 16 steps.
      self.assertAllClose(two[name], value, rtol=1e-3, atol=1e-5, msg=name)
    self.assertAllClose(two_metrics["balanced_accuracy"],
                        one_metrics["balanced_accuracy"], atol=0.02)


if __name__ == "__main__":
  tf.test.main()
