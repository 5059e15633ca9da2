"""The three parts of a run: Gin builds them, Python splits flat settings into them."""

import dataclasses

import gin
import tensorflow as tf

from recipes import configurables  # pylint: disable=unused-import  (Gin names)
from recipes import experiment


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


if __name__ == "__main__":
  tf.test.main()
