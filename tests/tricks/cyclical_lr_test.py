"""Cyclical learning rates against Smith 2017, section 3.1 (and its figure 2)."""

import os

from absl.testing import parameterized
import numpy as np
import tensorflow as tf
import tf_keras

from tricks import cyclical_lr


def smith(t, base, top, step_size, mode, gamma=1.0):
  """Smith's reference formulas, in plain Python."""
  cycle = np.floor(1 + t / (2 * step_size))
  x = abs(t / step_size - 2 * cycle + 1)
  scale = {"triangular": 1.0, "triangular2": 1 / 2 ** (cycle - 1),
           "exp_range": gamma ** t}[mode]
  return base + (top - base) * max(0.0, 1 - x) * scale


class CyclicalLrTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.parameters("triangular", "triangular2", "exp_range")
  def test_matches_formula(self, mode):
    schedule = cyclical_lr.CyclicalLearningRate(0.001, 0.006, 10, mode=mode, gamma=0.99)
    for t in range(0, 85, 3):
      self.assertAllClose(schedule(t), smith(t, 0.001, 0.006, 10, mode, 0.99), rtol=1e-5)

  def test_shape_of_the_triangle(self):
    schedule = cyclical_lr.CyclicalLearningRate(1.0, 3.0, 4)
    # Starts at base, peaks at max after step_size steps, back at base after 2x.
    self.assertAllClose([schedule(t) for t in (0, 2, 4, 6, 8, 12)],
                        [1.0, 2.0, 3.0, 2.0, 1.0, 3.0])

  def test_triangular2_halves_each_cycle(self):
    schedule = cyclical_lr.CyclicalLearningRate(0.0, 8.0, 5, mode="triangular2")
    self.assertAllClose([schedule(5), schedule(15), schedule(25)], [8.0, 4.0, 2.0])

  def test_inside_tf_function_with_variable_step(self):
    schedule = cyclical_lr.CyclicalLearningRate(0.1, 0.5, 3, mode="triangular2")
    step = tf.Variable(0, dtype=tf.int64)
    fn = tf.function(lambda: schedule(step))
    for t in range(12):
      step.assign(t)
      self.assertAllClose(fn(), smith(t, 0.1, 0.5, 3, "triangular2"), rtol=1e-6)

  def test_serialises_with_optimizer_and_checkpoint(self):
    schedule = cyclical_lr.CyclicalLearningRate(0.01, 0.1, 7, mode="exp_range", gamma=0.9)
    restored = tf_keras.optimizers.schedules.deserialize(
        tf_keras.optimizers.schedules.serialize(schedule))
    self.assertEqual(restored.get_config(), schedule.get_config())
    model = tf_keras.Sequential([tf_keras.Input((2,)), tf_keras.layers.Dense(1)])
    model.compile(tf_keras.optimizers.SGD(schedule), "mse")
    model.fit(np.ones((4, 2)), np.ones((4, 1)), epochs=3, verbose=0)
    path = os.path.join(self.get_temp_dir(), "model.keras")
    model.save(path)
    loaded = tf_keras.models.load_model(path)
    saved = loaded.optimizer.get_config()["learning_rate"]
    self.assertEqual(saved["class_name"], "CyclicalLearningRate")
    self.assertEqual(saved["config"], schedule.get_config())
    self.assertEqual(int(loaded.optimizer.iterations), 3)  # restored with the model
    rebuilt = tf_keras.optimizers.schedules.deserialize(saved)
    self.assertAllClose(rebuilt(loaded.optimizer.iterations),
                        smith(int(loaded.optimizer.iterations), 0.01, 0.1, 7, "exp_range",
                              0.9), rtol=1e-5)

  def test_rejects_unknown_mode(self):
    with self.assertRaisesRegex(ValueError, "unknown cyclical LR mode"):
      cyclical_lr.CyclicalLearningRate(0.1, 1.0, 10, mode="cosine")


if __name__ == "__main__":
  tf.test.main()
