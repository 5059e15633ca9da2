"""The three parts of a run: Gin builds them, Python splits flat settings into them, and
each one's validate() turns every bad value into one ConfigError naming the setting."""

import dataclasses

from absl.testing import parameterized
import gin
import numpy as np
import tensorflow as tf

from recipes import configurables  # pylint: disable=unused-import  (Gin names)
from recipes import experiment
from recipes.errors import ConfigError


class ExperimentTest(tf.test.TestCase):

  def tearDown(self):
    gin.clear_config()
    super().tearDown()

  def test_gin_builds_each_part(self):
    gin.parse_config("""
        Task.data = @digits
        Task.model = @zoo.build
        Task.validation_per_class = 4
        Optimization.l2 = 0.001
        Optimization.phases = @head_then_all()
        head_then_all.head_epochs = 2
        head_then_all.lr_scale = 0.3
        Runtime.epochs = 7
        Runtime.steps_per_loop = 5
    """)
    task, optimization, runtime = (experiment.Task(), experiment.Optimization(),
                                   experiment.Runtime())
    self.assertEqual(task.validation_per_class, 4)
    self.assertEqual(optimization.l2, 0.001)
    self.assertEqual(list(optimization.phases), [experiment.Phase(2, "head", 1.0),
                                                 experiment.Phase(None, "all", 0.3)])
    self.assertEqual((runtime.epochs, runtime.steps_per_loop), (7, 5))
    with self.assertRaises(dataclasses.FrozenInstanceError):
      runtime.epochs = 8  # a Gin-built part is never changed

  def test_a_task_needs_data_and_model(self):
    with self.assertRaisesRegex(RuntimeError, "Required bindings .*Task"):
      experiment.Task()

  def test_no_head_phase_is_no_phases(self):
    self.assertEqual(experiment.head_then_all(0, 0.1), [])

  def test_split_routes_each_field_to_its_part(self):
    task, optimization, runtime = experiment.split(
        data="d", model="m", l2=0.5, epochs=3, seed=9, name="x")
    self.assertEqual((task.data, task.model, task.name), ("d", "m", "x"))
    self.assertEqual(optimization.l2, 0.5)
    self.assertEqual((runtime.epochs, runtime.seed), (3, 9))
    with self.assertRaisesRegex(TypeError, "no Task, Optimization or Runtime field named "
                                "'epochz'"):
      experiment.split(data="d", model="m", epochz=3)



class ValidateTest(tf.test.TestCase, parameterized.TestCase):

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
      experiment.Runtime(**settings).validate()

  def test_good_runtime(self):
    good = experiment.Runtime(steps=10, steps_per_loop=4, best_metric="top1",
                              early_stopping_patience=2, eval_every_epochs=1)
    given = dataclasses.asdict(good)
    self.assertIsNone(good.validate())
    # Checked, not normalised: the Runtime is frozen and every value stays as given,
    # `steps` beside the default `epochs` it overrides (the trainer derives the length).
    self.assertEqual(dataclasses.asdict(good), given)
    self.assertEqual((good.steps, good.epochs, good.steps_per_loop), (10, 30, 4))
    with self.assertRaises(dataclasses.FrozenInstanceError):
      good.steps = 20
    # The defaults are a good runtime too: no early stopping, no best checkpoint.
    default = experiment.Runtime()
    self.assertIsNone(default.validate())
    self.assertEqual((default.best_metric, default.early_stopping_patience,
                      default.eval_every_epochs), (None, None, 5))
    # Each whole-number setting at the least value it allows (test_bad_runtime has
    # the values just below), numpy integers as Gin or a sweep may pass them, every
    # precision and every metric: all accepted.
    least = experiment.Runtime(
        seed=0, epochs=1, steps=1, steps_per_loop=1, checkpoint_every_epochs=1,
        eval_every_epochs=1, keep_checkpoints=1, nonfinite_retries=0,
        best_metric="balanced_accuracy", early_stopping_patience=1)
    self.assertIsNone(least.validate())
    experiment.Runtime(eval_every_epochs=0).validate()  # at the end only
    experiment.Runtime(epochs=np.int64(3), seed=np.int32(7)).validate()
    for precision in (None, "mixed_float16", "mixed_bfloat16"):
      experiment.Runtime(mixed_precision=precision).validate()
    for metric in ("top1", "balanced_accuracy", "many_shot_accuracy",
                   "medium_shot_accuracy", "few_shot_accuracy"):
      experiment.Runtime(best_metric=metric, early_stopping_patience=1).validate()

  def test_task_and_optimization(self):
    task = experiment.Task(data=dict, model=dict)
    task.validate()
    with self.assertRaisesRegex(ConfigError, r"shot_thresholds=\(5, 20\)"):
      dataclasses.replace(task, shot_thresholds=(5, 20)).validate()
    with self.assertRaisesRegex(ConfigError, "Task.examples_per_class=0 must be"):
      dataclasses.replace(task, examples_per_class=0).validate()
    with self.assertRaisesRegex(ConfigError, "Task.data=None must be a configurable "
                                "reference, e.g. @digits"):
      dataclasses.replace(task, data=None).validate()
    with self.assertRaisesRegex(ConfigError, "Optimization.l2=-0.1 must be a number >= 0"):
      experiment.Optimization(l2=-0.1).validate()
    with self.assertRaisesRegex(ConfigError, r"Optimization.phases\[0\].lr_scale=0 must"):
      experiment.Optimization(phases=[experiment.Phase(2, "head", 0)]).validate()
    with self.assertRaisesRegex(ConfigError, "Optimization.l2='0.1' must be a number; fix"):
      experiment.Optimization(l2="0.1").validate()
    experiment.Optimization(l2=0.0, phases=experiment.head_then_all(2)).validate()


if __name__ == "__main__":
  tf.test.main()
