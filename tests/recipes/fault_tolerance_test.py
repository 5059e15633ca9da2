"""Runs that survive, tried with real processes on the tiny flagship (2 epochs of 8
steps): SIGTERM mid-epoch (with and without a weight average), kill -9 at four points
(mid-epoch, inside a checkpoint write, after an epoch's checkpoint, before the report),
damaged checkpoints, a diverging run, a one-off non-finite step, a finished run started
again, and two runs on one model_dir. Every interrupted run, rerun with the same
command, ends with weights identical to an uninterrupted run's.
"""

import json
import os
import shutil
import signal
import time

from absl.testing import parameterized
import numpy as np
import tensorflow as tf

from tests.recipes import cli

ARGS = (cli.TINY, "--gin_bindings=Runtime.keep_checkpoints = 5")
STEPS = 16  # 2 epochs of 8 steps


class FaultToleranceTest(parameterized.TestCase, tf.test.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.root = os.environ.get("TEST_TMPDIR") or "/tmp"
    cls.baseline = os.path.join(cls.root, "baseline")
    shutil.rmtree(cls.baseline, ignore_errors=True)
    result = cli.finish(cli.spawn(*ARGS, f"--model_dir={cls.baseline}"))
    assert result.returncode == 0, result.stderr[-3000:]
    cls.weights, cls.path = cli.final_weights(cls.baseline)

  def model_dir(self):
    return os.path.join(self.create_tempdir().full_path, "run")

  def interrupted(self, when, count, model_dir, *extra):
    return cli.finish(cli.spawn(when, str(count), "--", *ARGS, *extra,
                                f"--model_dir={model_dir}", module="tests.recipes.interrupt"))

  def assert_same_as_uninterrupted(self, model_dir):
    weights, path = cli.final_weights(model_dir)
    self.assertEqual(os.path.basename(path), os.path.basename(self.path))
    self.assertEqual(sorted(weights), sorted(self.weights))
    for name, value in self.weights.items():
      self.assertAllEqual(weights[name], value, msg=name)
    with open(os.path.join(model_dir, "metrics.json")) as f:
      metrics = json.load(f)
    with open(os.path.join(self.baseline, "metrics.json")) as f:
      baseline = json.load(f)
    for key in ("balanced_accuracy", "top1", "final_train_loss"):
      self.assertEqual(metrics[key], baseline[key], msg=key)

  def rerun(self, model_dir):
    result = cli.finish(cli.spawn(*ARGS, f"--model_dir={model_dir}"))
    self.assertEqual(result.returncode, 0, msg=result.stderr[-3000:])
    return result

  def test_sigterm_mid_epoch_saves_and_resumes_exactly(self):
    model_dir = self.model_dir()
    result = self.interrupted("term", 11, model_dir)  # epoch 2, after its third step
    self.assertEqual(result.returncode, 143, msg=result.stderr[-3000:])
    self.assertLen(result.said, 1, msg=result.stderr[-3000:])
    self.assertRegex(result.said[0], r"^stopped: preempted \(SIGTERM\) at epoch 2, step 3 of "
                     r"8: saved .*ckpt-11; rerun the same command")
    self.assertFalse(os.path.exists(os.path.join(model_dir, "metrics.json")))
    resumed = self.rerun(model_dir)
    self.assertIn("Resumed from", resumed.stdout)
    self.assertIn("epoch 1 of 2, step 3 of 8", resumed.stdout)
    self.assert_same_as_uninterrupted(model_dir)

  def test_sigterm_with_validation_and_loops_of_three_resumes_exactly(self):
    # The best checkpoint on validation, early-stopping state and 3-step loops across a
    # mid-epoch preemption: the resumed run ends as its own uninterrupted twin.
    extra = ("--gin_bindings=Task.validation_per_class = 3",
             "--gin_bindings=Runtime.best_metric = 'balanced_accuracy'",
             "--gin_bindings=Runtime.steps_per_loop = 3")
    straight = self.model_dir()
    result = cli.finish(cli.spawn(*ARGS, *extra, f"--model_dir={straight}"))
    self.assertEqual(result.returncode, 0, msg=result.stderr[-3000:])
    model_dir = self.model_dir()
    result = self.interrupted("term", 4, model_dir, *extra)  # 7 steps an epoch: 3, 3, 1
    self.assertEqual(result.returncode, 143, msg=result.stderr[-3000:])
    self.assertRegex(result.said[-1], r"at epoch 2, step 3 of 7: saved .*ckpt-10;")
    result = cli.finish(cli.spawn(*ARGS, *extra, f"--model_dir={model_dir}"))
    self.assertEqual(result.returncode, 0, msg=result.stderr[-3000:])
    want, _ = cli.final_weights(straight)
    got, _ = cli.final_weights(model_dir)
    for name, value in want.items():
      self.assertAllEqual(got[name], value, msg=name)
    reports = []
    for directory in (straight, model_dir):
      with open(os.path.join(directory, "metrics.json")) as f:
        reports.append(json.load(f))
    for key in ("top1", "final_train_loss", "final_validation"):
      self.assertEqual(reports[1][key], reports[0][key], msg=key)
    best = [r["best_on_validation"] for r in reports]
    self.assertEqual(best[1]["epoch"], best[0]["epoch"])
    self.assertEqual(best[1]["test"]["top1"], best[0]["test"]["top1"])

  def test_sigterm_mid_epoch_with_a_weight_average_resumes_exactly(self):
    # tf_keras's use_ema: the averages are optimizer variables in the checkpoint; the
    # resumed run ends with the uninterrupted run's averages (and evaluates with them).
    extra = ("--gin_bindings=tf_keras.optimizers.SGD.use_ema = True",
             "--gin_bindings=tf_keras.optimizers.SGD.ema_momentum = 0.9")
    straight = self.model_dir()
    result = cli.finish(cli.spawn(*ARGS, *extra, f"--model_dir={straight}"))
    self.assertEqual(result.returncode, 0, msg=result.stderr[-3000:])
    model_dir = self.model_dir()
    result = self.interrupted("term", 11, model_dir, *extra)  # epoch 2, after step 3
    self.assertEqual(result.returncode, 143, msg=result.stderr[-3000:])
    result = cli.finish(cli.spawn(*ARGS, *extra, f"--model_dir={model_dir}"))
    self.assertEqual(result.returncode, 0, msg=result.stderr[-3000:])
    self.assertIn("epoch 1 of 2, step 3 of 8", result.stdout)
    saved = []
    for directory in (straight, model_dir):
      path = tf.train.latest_checkpoint(os.path.join(directory, "checkpoints"))
      self.assertEqual(os.path.basename(path), f"ckpt-{STEPS}")
      reader = tf.train.load_checkpoint(path)
      saved.append({n: reader.get_tensor(n) for n in reader.get_variable_to_shape_map()
                    if n.startswith(("model/", "optimizer/"))})
    self.assertEqual(sorted(saved[1]), sorted(saved[0]))
    for name, value in saved[0].items():
      self.assertAllEqual(saved[1][name], value, msg=name)
    # Averages were kept: the optimizer holds a copy of every trainable weight more.
    plain = tf.train.load_checkpoint(self.path).get_variable_to_shape_map()
    optimizer = lambda names: [n for n in names if n.startswith("optimizer/_variables/")]
    model_vars = [n for n in saved[0] if n.startswith("model/")
                  and "OPTIMIZER_SLOT" not in n]
    self.assertGreater(len(optimizer(saved[0])), len(optimizer(plain)) + 50)
    self.assertLess(len(model_vars), len(optimizer(saved[0])))
    for key in ("balanced_accuracy", "top1", "final_train_loss"):
      self.assertEqual(cli.metrics(model_dir)[key], cli.metrics(straight)[key], msg=key)

  @parameterized.named_parameters(
      ("mid_epoch", "loop", 5),  # epoch 1, after step 5: nothing of it saved
      ("inside_a_checkpoint_write", "save", 2),  # the end of epoch 1's checkpoint
      ("after_a_checkpoint", "evaluate", 1),  # epoch 1 saved, its evaluation started
      ("before_the_report", "report", 1))  # trained and exported, no metrics.json yet
  def test_kill_9_then_rerun_gives_identical_weights(self, when, count):
    model_dir = self.model_dir()
    result = self.interrupted(when, count, model_dir)
    self.assertEqual(result.returncode, -signal.SIGKILL, msg=result.stderr[-3000:])
    if when == "save":
      leftovers = [n for n in os.listdir(os.path.join(model_dir, "checkpoints"))
                   if "_temp" in n]
      self.assertNotEmpty(leftovers)  # the kill did land inside the write
    resumed = self.rerun(model_dir)
    if when == "save":
      self.assertIn("left by a checkpoint write that did not finish", resumed.stdout)
      self.assertFalse([n for n in os.listdir(os.path.join(model_dir, "checkpoints"))
                        if "_temp" in n])
    self.assert_same_as_uninterrupted(model_dir)

  @parameterized.named_parameters(
      ("truncated_data", "truncate"), ("emptied_index", "empty_index"),
      ("missing_shard", "remove_data"))
  def test_damaged_latest_checkpoint_falls_back_to_the_one_before(self, damage):
    model_dir = self.model_dir()
    shutil.copytree(self.baseline, model_dir)
    os.remove(os.path.join(model_dir, "metrics.json"))  # not finished: resume it
    prefix = os.path.join(model_dir, "checkpoints", f"ckpt-{STEPS}")
    data = prefix + ".data-00000-of-00001"
    if damage == "truncate":
      with open(data, "r+b") as f:
        f.truncate(os.path.getsize(data) // 2)
    elif damage == "empty_index":
      open(prefix + ".index", "w").close()
    else:
      os.remove(data)
    resumed = self.rerun(model_dir)
    warnings = [l for l in resumed.said if l.startswith("warning:")]
    self.assertLen(warnings, 1, msg=resumed.stderr[-3000:])
    self.assertRegex(warnings[0], f"checkpoint .*ckpt-{STEPS} is damaged")
    self.assertIn("ckpt-8 at epoch 1", resumed.stdout)
    self.assert_same_as_uninterrupted(model_dir)

  def test_a_finished_run_started_again_keeps_its_report(self):
    model_dir = self.model_dir()
    shutil.copytree(self.baseline, model_dir)
    report = os.path.join(model_dir, "metrics.json")
    def files():  # the run's own files; .lock is the rerun's, taken and given back
      return {k: v for k, v in cli.snapshot(model_dir).items() if k != ".lock"}
    before = files()
    result = self.rerun(model_dir)
    self.assertIn("holds a finished run", result.stdout)
    self.assertEqual(files(), before)
    with open(report) as f:
      self.assertIsNotNone(json.load(f)["final_train_loss"])

  def test_a_diverging_run_stops_with_one_line_and_no_bad_checkpoint(self):
    model_dir = self.model_dir()
    result = cli.finish(cli.spawn(*ARGS, "--gin_bindings=LEARNING_RATE = 1e6",
                                  "--gin_bindings=Runtime.nonfinite_retries = 1",
                                  f"--model_dir={model_dir}"))
    self.assertEqual(result.returncode, 3, msg=result.stderr[-3000:])
    self.assertLen(result.said, 1, msg=result.stderr[-3000:])
    self.assertRegex(result.said[0], r"^error: training diverged at step \d+ \(epoch \d\): "
                     r".* is (nan|inf).*after 1 retry on fresh data orders.*lower LEARNING_RATE")
    self.assertIn("rolled back to", result.stdout)
    self.assertFalse(os.path.exists(os.path.join(model_dir, "metrics.json")))
    checkpoints = tf.io.gfile.glob(os.path.join(model_dir, "checkpoints", "ckpt-*.index"))
    self.assertNotEmpty(checkpoints)
    for index in checkpoints:
      reader = tf.train.load_checkpoint(index[:-len(".index")])
      for name in reader.get_variable_to_shape_map():
        value = reader.get_tensor(name)
        if isinstance(value, np.ndarray) and value.dtype.kind == "f":
          self.assertTrue(np.isfinite(value).all(), msg=f"{index}: {name}")

  def test_a_one_off_non_finite_step_is_rolled_back_and_retried(self):
    model_dir = self.model_dir()
    result = self.interrupted("nan", 12, model_dir)  # epoch 2, step 4
    self.assertEqual(result.returncode, 0, msg=result.stderr[-3000:])
    self.assertIn("Step 11: the loss is nan; rolled back to", result.stdout)
    self.assertIn("ckpt-8 (epoch 1, step 0); retry 1 of 2", result.stdout)
    with open(os.path.join(model_dir, "metrics.json")) as f:
      metrics = json.load(f)  # strict JSON
    self.assertEqual(metrics["nonfinite_rollbacks"], 1)
    weights, _ = cli.final_weights(model_dir)
    # Epoch 2 was retrained on a fresh data order: not the baseline's weights.
    self.assertFalse(all(np.array_equal(weights[n], v) for n, v in self.weights.items()))

  def test_an_image_that_fails_to_decode_mid_run_is_named(self):
    folder = os.path.join(self.create_tempdir().full_path, "images")
    rng = np.random.default_rng(0)
    for c in range(2):
      os.makedirs(os.path.join(folder, f"c{c}"))
      for j in range(12):
        pixels = rng.integers(0, 255, [8, 8, 3], dtype=np.uint8)
        tf.io.write_file(os.path.join(folder, f"c{c}", f"{j}.png"), tf.io.encode_png(pixels))
    whole = tf.io.encode_jpeg(rng.integers(0, 255, [8, 8, 3], dtype=np.uint8)).numpy()
    cut = os.path.join(folder, "c1", "cut.jpg")  # its header passes the scan's check
    with open(cut, "wb") as f:
      f.write(whole[:len(whole) // 2])
    data = ["--gin_bindings=Task.data = @image_folder",
            f"--gin_bindings=image_folder.root = '{folder}'",
            "--gin_bindings=image_folder.test_per_class = 2", "--gin_bindings=NUM_CLASSES = 2",
            "--gin_bindings=Task.long_tail = None", "--gin_bindings=BATCH_SIZE = 4"]
    model_dir = self.model_dir()
    result = cli.finish(cli.spawn(cli.TINY, *data, f"--model_dir={model_dir}"))
    self.assertEqual(result.returncode, 2, msg=result.stderr[-3000:])
    # libjpeg writes its own complaint to stderr ("Improper call to JPEG library ...");
    # the run's own is one line, the last.
    self.assertEqual([l for l in result.said if "JPEG" not in l], result.said[-1:],
                     msg=result.stderr[-3000:])
    self.assertRegex(result.said[-1], f"^error: {cut} does not decode as an image .*"
                     "image_folder.on_bad_file = 'skip'; the checkpoints are intact")
    self.assertTrue(tf.train.latest_checkpoint(os.path.join(model_dir, "checkpoints")))
    skipping = self.model_dir()
    result = cli.finish(cli.spawn(cli.TINY, *data, "--gin_bindings=image_folder.on_bad_file = "
                                  "'skip'", f"--model_dir={skipping}"))
    self.assertEqual(result.returncode, 0, msg=result.stderr[-3000:])
    with open(os.path.join(skipping, "metrics.json")) as f:
      self.assertEqual(json.load(f)["skipped_files"], {"count": 1, "paths": [cut]})

  def test_two_runs_on_one_model_dir(self):
    model_dir = self.model_dir()
    # Long enough (8 epochs) that the second run is refused, not told the run finished.
    longer = (*ARGS, "--gin_bindings=EPOCHS = 8")
    first = cli.spawn(*longer, f"--model_dir={model_dir}")
    lock = os.path.join(model_dir, ".lock")
    deadline = time.time() + 120
    while time.time() < deadline and not (os.path.exists(lock) and os.path.getsize(lock)):
      time.sleep(0.2)
    second = cli.finish(cli.spawn(*longer, f"--model_dir={model_dir}"))
    self.assertEqual(second.returncode, 2, msg=second.stderr[-3000:])
    self.assertLen(second.said, 1)
    self.assertRegex(second.said[0], f"^error: model_dir .* is in use by pid {first.pid}")
    self.assertEqual(cli.finish(first).returncode, 0)
    with open(os.path.join(model_dir, "metrics.json")) as f:
      self.assertEqual(json.load(f)["epochs_trained"], 8)


if __name__ == "__main__":
  tf.test.main()
