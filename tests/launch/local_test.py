"""`--backend=local`: two worker processes (TF_CONFIG on localhost) train the tiny
flagship (the flagship recipe, then the test-only tiny Gin file as a recipe flag); only
the chief writes model_dir, and the result is one process's."""

import glob
import io
import os
import re
import subprocess
import sys
import threading
import time
from unittest import mock

import tensorflow as tf

from launch import job as job_lib
from launch import local
from tests.recipes import cli

RECIPE = "nfnet_long_tail_digits"


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

  def test_status_and_cancel_of_a_running_job(self):
    """`--status=<id>` of a running launch (the id it printed) says its workers run;
    `--cancel=<id>` makes them save and exit 143, and the launch ends with 143."""
    root = self.create_tempdir().full_path
    model_dir = os.path.join(root, "run")
    env = cli.environment({"PYTHONPATH": local.ROOT, "XDG_CACHE_HOME": root,
                           "TF_CPP_MIN_LOG_LEVEL": "2"})

    def launcher(*args):
      return [sys.executable, "-m", "launch.cli", "--backend=local", *args]

    def manage(*args):
      return subprocess.run(launcher(*args), cwd=local.ROOT, env=env, text=True,
                            capture_output=True, check=False, timeout=60)

    run = subprocess.Popen(
        launcher("--recipe=nfnet_long_tail_digits", "--workers=2", f"--model_dir={model_dir}",
                 # Long enough to be running still when cancelled.
                 "--", cli.TINY, *cli.DETERMINISTIC_MODEL, "--gin_bindings=EPOCHS = 100"),
        cwd=local.ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True)
    try:
      said = ""
      while not re.search(r"^job \d+: ", said, re.M) and run.poll() is None:
        said += run.stdout.readline()
      job_id = re.search(r"^job (\d+): see it with", said, re.M).group(1)
      self.assertEqual(job_id, str(run.pid))
      rest = []  # read on, so the launcher never blocks on a full pipe
      reader = threading.Thread(target=lambda: rest.extend(run.stdout), daemon=True)
      reader.start()
      deadline = time.monotonic() + 300
      while not glob.glob(os.path.join(model_dir, "checkpoints", "ckpt-*.index")):
        if run.poll() is not None or time.monotonic() > deadline:
          self.fail(f"no checkpoint yet: {''.join(rest)[-3000:]}")
        time.sleep(0.2)
      said = manage(f"--status={job_id}")
      self.assertEqual(said.returncode, 0, said.stderr)
      self.assertIn(f"job {job_id} (nfnet-long-tail-digits): running, 2 of 2 workers alive",
                    said.stdout)
      said = manage(f"--cancel={job_id}")
      self.assertEqual(said.returncode, 0, said.stderr)
      run.wait(timeout=120)
      reader.join(timeout=10)
      self.assertEqual(run.returncode, 143, "".join(rest)[-3000:])
    finally:
      if run.poll() is None:
        run.kill()
      run.communicate()
    self.assertFalse(os.path.exists(os.path.join(model_dir, "metrics.json")))
    said = manage(f"--status={job_id}")
    self.assertEqual(said.returncode, 2)
    self.assertIn(f"no local job {job_id} runs here", said.stderr)
    said = manage("--status=12x")
    self.assertEqual(said.returncode, 2)
    self.assertIn("--status/--cancel='12x' is not a local job id", said.stderr)

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
                       r"--gin_file=recipes/nfnet_long_tail_digits.gin "
                       r"--strategy=multi_worker_mirrored --model_dir=/runs/tiny$")


if __name__ == "__main__":
  tf.test.main()
