"""recipes/lifecycle.py: one run's life in its model_dir. A finished run is returned
without running the body; config.gin is written before the body runs; a second run on
a locked model_dir is refused before writing; the body gets a RunDir; a data file that
fails to decode mid-run is named in one ConfigError line."""

import json
import os
import types

import tensorflow as tf
import tf_keras

from recipes import build
from recipes import experiment
from recipes import lifecycle
from recipes import run_lock
from recipes import train_step
from recipes.errors import ConfigError


def built_run(model_dir, data=None):
  inputs = tf_keras.Input([2])
  model = tf_keras.Model(inputs, tf_keras.layers.Dense(1)(inputs))
  optimizer = tf_keras.optimizers.SGD(0.1)
  optimizer.build(model.trainable_variables)
  strategy = tf.distribute.get_strategy()
  step = train_step.TrainStep(train_step.StepParts(
      strategy=strategy, model=model, optimizer=optimizer,
      loss_fn=lambda labels, logits: tf.zeros([1]), global_batch=1))
  return types.SimpleNamespace(
      model_dir=model_dir, strategy=strategy, model=model, optimizer=optimizer,
      step=step, config_text="SEED = 1\n", data=data,
      runtime=experiment.Runtime(keep_checkpoints=2),
      length=build.Length(epochs=1, steps_per_epoch=1, total_steps=1, spans=[],
                          phased=False))


class LifecycleTest(tf.test.TestCase):

  def test_the_body_runs_once_with_config_gin_written(self):
    model_dir = self.get_temp_dir()
    seen = []

    def body(run_dir):
      seen.append(run_dir)
      with open(os.path.join(model_dir, "config.gin")) as f:
        self.assertEqual(f.read(), "SEED = 1\n")
      self.assertTrue(run_dir.chief)
      self.assertEqual(run_dir.root, model_dir)
      with open(os.path.join(model_dir, "metrics.json"), "w") as f:
        json.dump({"top1": 0.5}, f)
      return {"top1": 0.5}

    self.assertEqual(lifecycle.run_in_model_dir(built_run(model_dir), body), {"top1": 0.5})
    self.assertLen(seen, 1)
    # Finished: the report as it is, and the body is not run again.
    self.assertEqual(lifecycle.run_in_model_dir(built_run(model_dir), seen.append), {"top1": 0.5})
    self.assertLen(seen, 1)

  def test_a_locked_model_dir_is_refused_before_anything_is_written(self):
    model_dir = self.get_temp_dir()
    with run_lock.acquire(model_dir):
      with self.assertRaisesRegex(ConfigError, "is in use by"):
        lifecycle.run_in_model_dir(built_run(model_dir), lambda run_dir: self.fail("ran"))
    self.assertFalse(os.path.exists(os.path.join(model_dir, "config.gin")))

  def test_a_file_that_fails_to_decode_is_named(self):
    source = types.SimpleNamespace(
        find_bad_files=lambda split, indices: ["/data/b.jpg"] if split == "train" else [])
    data = types.SimpleNamespace(source=source, validation_split="train")

    def body(run_dir):
      raise tf.errors.InvalidArgumentError(None, None, "Invalid JPEG data")

    with self.assertRaisesRegex(ConfigError, r"^/data/b.jpg does not decode as an image"):
      lifecycle.run_in_model_dir(built_run(self.get_temp_dir(), data), body)

  def test_finished_report(self):
    model_dir = self.get_temp_dir()
    self.assertIsNone(lifecycle.finished_report(model_dir))
    with open(os.path.join(model_dir, "metrics.json"), "w") as f:
      f.write("{damaged")
    self.assertIsNone(lifecycle.finished_report(model_dir))  # finish writes it again


  def test_resume_config(self):
    model_dir = self.get_temp_dir()
    lifecycle.check_model_dir(model_dir, "A = 1\n")  # nothing there yet
    with open(os.path.join(model_dir, "config.gin"), "w") as f:
      f.write("A = 1\nB = 2\n")
    lifecycle.check_model_dir(model_dir, "A = 1\nB = 2\n")
    with self.assertRaisesRegex(ConfigError, "has 'B = 2' where this run has 'B = 3'"):
      lifecycle.check_model_dir(model_dir, "A = 1\nB = 3\n")

  def test_model_dir_must_be_writable(self):
    file_path = os.path.join(self.get_temp_dir(), "a_file")
    with open(file_path, "w") as f:
      f.write("x")
    with self.assertRaisesRegex(ConfigError, r"model_dir .*a_file/run.* cannot be created: "
                                r".*a_file' is a file; choose another --model_dir"):
      lifecycle.check_model_dir(os.path.join(file_path, "run"), "A = 1\n")


if __name__ == "__main__":
  tf.test.main()
