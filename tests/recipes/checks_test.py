"""Settings checks: each bad value is one ConfigError naming the setting; good ones pass."""

import dataclasses
import os
import socket

from absl.testing import parameterized
import numpy as np
import tensorflow as tf

from recipes import checks
from recipes import experiment
from recipes.data import pipeline as pipeline_lib
from recipes.errors import ConfigError


class ChecksTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.parameters(
      (dict(epochs=0), "Runtime.epochs=0 must be a whole number >= 1"),
      (dict(epochs=2.5), "Runtime.epochs=2.5 must be a whole number"),
      (dict(epochs=True), "Runtime.epochs=True must be a whole number"),
      (dict(steps=-3), "Runtime.steps=-3 must be a whole number >= 1 or None"),
      (dict(seed=-1), "Runtime.seed=-1"),
      (dict(steps_per_loop="8"), "Runtime.steps_per_loop='8'"),
      (dict(eval_every_epochs=-1), "Runtime.eval_every_epochs=-1 must be .* >= 0"),
      (dict(keep_checkpoints=0), "Runtime.keep_checkpoints=0"),
      (dict(mixed_precision="float16"), "Runtime.mixed_precision='float16'"),
      (dict(best_metric="loss"), "Runtime.best_metric='loss'; choose one of top1"),
      (dict(early_stopping_patience=3), "needs Runtime.best_metric"),
      (dict(early_stopping_patience=3, best_metric="top1", eval_every_epochs=0),
       "needs Runtime.eval_every_epochs >= 1"),
  )
  def test_bad_runtime(self, settings, message):
    with self.assertRaisesRegex(ConfigError, message):
      checks.runtime(experiment.Runtime(**settings))

  def test_good_runtime(self):
    good = experiment.Runtime(steps=10, steps_per_loop=4, best_metric="top1",
                              early_stopping_patience=2, eval_every_epochs=1)
    given = dataclasses.asdict(good)
    self.assertIsNone(checks.runtime(good))
    # Checked, not normalised: the Runtime is frozen and every value stays as given,
    # `steps` beside the default `epochs` it overrides (the trainer derives the length).
    self.assertEqual(dataclasses.asdict(good), given)
    self.assertEqual((good.steps, good.epochs, good.steps_per_loop), (10, 30, 4))
    with self.assertRaises(dataclasses.FrozenInstanceError):
      good.steps = 20
    # The defaults are a good runtime too: no early stopping, no best checkpoint.
    default = experiment.Runtime()
    self.assertIsNone(checks.runtime(default))
    self.assertEqual((default.best_metric, default.early_stopping_patience,
                      default.eval_every_epochs), (None, None, 5))
    # Each whole-number setting at the least value it allows (test_bad_runtime has
    # the values just below), numpy integers as Gin or a sweep may pass them, every
    # precision and every metric: all accepted.
    least = experiment.Runtime(
        seed=0, epochs=1, steps=1, steps_per_loop=1, checkpoint_every_epochs=1,
        eval_every_epochs=1, keep_checkpoints=1, nonfinite_retries=0,
        best_metric="balanced_accuracy", early_stopping_patience=1)
    self.assertIsNone(checks.runtime(least))
    checks.runtime(experiment.Runtime(eval_every_epochs=0))  # at the end only
    checks.runtime(experiment.Runtime(epochs=np.int64(3), seed=np.int32(7)))
    for precision in (None, "mixed_float16", "mixed_bfloat16"):
      checks.runtime(experiment.Runtime(mixed_precision=precision))
    for metric in ("top1", "balanced_accuracy", "many_shot_accuracy",
                   "medium_shot_accuracy", "few_shot_accuracy"):
      checks.runtime(experiment.Runtime(best_metric=metric, early_stopping_patience=1))

  def test_a_batch_needs_one_step_an_epoch_echoes_counted(self):
    small = pipeline_lib.InputPipeline(batch_size=20)
    with self.assertRaisesRegex(ConfigError, r"^the training split has 5 examples, fewer "
                                "than one global batch of 20; lower InputPipeline"):
      checks.batch(small, 5, replicas=1)
    # Echoed 4 times before augmentation: 20 examples an epoch, one batch.
    checks.batch(pipeline_lib.InputPipeline(batch_size=20, echo_factor=4), 5, replicas=1)
    with self.assertRaisesRegex(ConfigError, r"5 examples \(echoed x3: before_augmentation"
                                r"\), fewer than one global batch of 20; .* raise "
                                "InputPipeline.echo_factor"):
      checks.batch(pipeline_lib.InputPipeline(batch_size=20, echo_factor=3), 5, replicas=1)

  def test_task_and_optimization(self):
    with self.assertRaisesRegex(ConfigError, "needs a validation split"):
      checks.best_metric_has_validation("top1", 0)
    checks.best_metric_has_validation("top1", 20)  # a hold-out or the source's own list
    checks.best_metric_has_validation(None, 0)
    with self.assertRaisesRegex(ConfigError, r"shot_thresholds=\(5, 20\)"):
      checks.task(experiment.Task(data=None, model=None, shot_thresholds=(5, 20)),
                  experiment.Runtime())
    with self.assertRaisesRegex(ConfigError, "Optimization.l2=-0.1 must be a number >= 0"):
      checks.optimization(experiment.Optimization(l2=-0.1))

  def test_best_metric_needs_classes_in_its_group(self):
    balanced = np.array([50] * 10)
    checks.best_metric_has_classes("many_shot_accuracy", balanced, (20, 5))
    checks.best_metric_has_classes("balanced_accuracy", balanced, (20, 5))
    with self.assertRaisesRegex(ConfigError, "best_metric='few_shot_accuracy' but no class"):
      checks.best_metric_has_classes("few_shot_accuracy", balanced, (20, 5))

  def test_data_service_must_answer(self):
    checks.data_service_answers(None)
    listening = socket.create_server(("localhost", 0))
    port = listening.getsockname()[1]
    checks.data_service_answers(f"grpc://localhost:{port}")  # something answers
    listening.close()  # now nothing listens on that port
    with self.assertRaisesRegex(ConfigError, rf"InputPipeline.data_service='grpc://localhost:"
                                rf"{port}': no dispatcher answers there \(.*\); start one"):
      checks.data_service_answers(f"grpc://localhost:{port}", timeout=2)

  def test_resume_config(self):
    model_dir = self.get_temp_dir()
    checks.resume_config(model_dir, "A = 1\n")  # nothing there yet
    with open(os.path.join(model_dir, "config.gin"), "w") as f:
      f.write("A = 1\nB = 2\n")
    checks.resume_config(model_dir, "A = 1\nB = 2\n")
    with self.assertRaisesRegex(ConfigError, "has 'B = 2' where this run has 'B = 3'"):
      checks.resume_config(model_dir, "A = 1\nB = 3\n")


if __name__ == "__main__":
  tf.test.main()
