"""`--backend=local`: two worker processes (TF_CONFIG on localhost) train the tiny
flagship (the flagship recipe, then the test-only tiny Gin file as a recipe flag); only
the chief writes model_dir, and the result is one process's."""

import io
import os
from unittest import mock

import tensorflow as tf

from launch import job as job_lib
from launch import local
from tests.recipes import cli

RECIPE = "nfnet_long_tail"


class LocalTest(tf.test.TestCase):

  def test_two_workers_train_like_one_process(self):
    root = self.create_tempdir().full_path
    two, one, scratch = (os.path.join(root, n) for n in ("two", "one", "tmp"))
    os.makedirs(scratch)
    out = io.StringIO()
    job = job_lib.Job("tiny", RECIPE, workers=2, model_dir=two,
                      recipe_args=(cli.TINY, *cli.DETERMINISTIC_MODEL))
    with mock.patch.dict(os.environ, TMPDIR=scratch, TF_CPP_MIN_LOG_LEVEL="2"):
      status = local.launch(job, out=out)
    said = out.getvalue()
    self.assertEqual(status, 0, said[-3000:])
    self.assertIn("on 2 replica(s)", said)
    self.assertIn("[worker 1] This worker is done; the chief writes the report in", said)
    # The other worker saved into a scratch directory of its own, and deleted it.
    self.assertEqual([n for n in os.listdir(scratch) if n.startswith("model_zoo-")], [])
    self.assertContainsSubset(
        ["checkpoints", "config.gin", "operative_config.gin", "metrics.json",
         "per_class_accuracy.png", "train", "eval"], os.listdir(two))

    single = cli.finish(cli.spawn(cli.TINY, *cli.DETERMINISTIC_MODEL,
                                  "--strategy=one_device", f"--model_dir={one}"))
    self.assertEqual(single.returncode, 0, single.stderr[-3000:])
    (weights_two, _), (weights_one, _) = cli.final_weights(two), cli.final_weights(one)
    self.assertEqual(sorted(weights_two), sorted(weights_one))
    self.assertNotEmpty(weights_one)
    for name, value in weights_one.items():
      # The same global batches; the gradient is summed over workers in another order.
      self.assertAllClose(weights_two[name], value, rtol=1e-3, atol=1e-5, msg=name)
    metrics_two, metrics_one = cli.metrics(two), cli.metrics(one)
    self.assertEqual(metrics_two["num_replicas"], 2)
    # Evaluation is complete across workers: every test example scored once.
    self.assertEqual(metrics_two["num_test_examples"], metrics_one["num_test_examples"])
    self.assertAllClose(metrics_two["balanced_accuracy"], metrics_one["balanced_accuracy"],
                        atol=0.02)

  def test_dry_run_prints_each_workers_command(self):
    out = io.StringIO()
    job = job_lib.Job("tiny", RECIPE, workers=3, model_dir="/runs/tiny")
    self.assertEqual(local.launch(job, dry_run=True, out=out, python="python3"), 0)
    lines = out.getvalue().splitlines()
    self.assertLen(lines, 3)
    for index, line in enumerate(lines):
      self.assertRegex(line, r"^TF_CONFIG='\{\"cluster\": \{\"worker\": \[\"localhost:\d+\", "
                       r"\"localhost:\d+\", \"localhost:\d+\"\]\}, \"task\": \{\"type\": "
                       rf"\"worker\", \"index\": {index}\}}\}}' python3 -m recipes.train "
                       r"--gin_file=recipes/nfnet_long_tail.gin "
                       r"--strategy=multi_worker_mirrored --model_dir=/runs/tiny$")


if __name__ == "__main__":
  tf.test.main()
