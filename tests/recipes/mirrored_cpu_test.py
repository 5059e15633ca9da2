"""`--strategy=mirrored --cpu_replicas=2`: the multi-replica code path on a machine
without GPUs, in real processes (`python -m recipes.train`), trains the tiny flagship
to the weights one device reaches on the same global batch."""

import os

import tensorflow as tf

from tests.recipes import cli

class MirroredCpuTest(tf.test.TestCase):

  def test_two_cpu_replicas_train_like_one_device(self):
    root = self.create_tempdir().full_path
    runs = {}
    for name, strategy in (("one_device", ["--strategy=one_device"]),
                           ("mirrored", ["--strategy=mirrored", "--cpu_replicas=2"])):
      model_dir = os.path.join(root, name)
      result = cli.finish(cli.spawn(cli.TINY, *cli.DETERMINISTIC_MODEL, *strategy,
                                    f"--model_dir={model_dir}"))
      self.assertEqual(result.returncode, 0, result.stderr[-3000:])
      replicas = 2 if name == "mirrored" else 1
      self.assertIn(f"on {replicas} replica(s)", result.stdout)
      runs[name] = (cli.final_weights(model_dir)[0], cli.metrics(model_dir))
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
