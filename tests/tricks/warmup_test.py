"""Linear warm-up composed with cyclical rates: values, and a round trip of its config."""

import os

import numpy as np
import tensorflow as tf
import tf_keras

from tricks import cyclical_lr
from tricks import warmup


class WarmupTest(tf.test.TestCase):

  def test_ramps_to_the_wrapped_schedule(self):
    clr = cyclical_lr.CyclicalLearningRate(0.1, 0.5, step_size=10)
    lr = warmup.LinearWarmup(clr, warmup_steps=4)
    # clr(4) = 0.1 + 0.4 * 0.4 = 0.26; warm-up reaches it linearly from 0.
    self.assertAllClose([lr(0), lr(1), lr(2), lr(4), lr(10), lr(15)],
                        [0.0, 0.065, 0.13, 0.26, 0.5, 0.3], rtol=1e-5)
    self.assertAllClose(tf.function(lr)(tf.constant(3)), 0.195, rtol=1e-5)

  def test_zero_warmup_is_the_schedule(self):
    clr = cyclical_lr.CyclicalLearningRate(0.1, 0.5, step_size=10)
    lr = warmup.LinearWarmup(clr, warmup_steps=0)
    self.assertAllClose([lr(t) for t in range(0, 30, 7)], [clr(t) for t in range(0, 30, 7)])

  def test_round_trip_through_a_saved_model(self):
    lr = warmup.LinearWarmup(
        cyclical_lr.CyclicalLearningRate(0.01, 0.1, 5, mode="triangular2"), 3)
    restored = tf_keras.optimizers.schedules.deserialize(
        tf_keras.optimizers.schedules.serialize(lr))
    self.assertIsInstance(restored.schedule, cyclical_lr.CyclicalLearningRate)
    self.assertAllClose([restored(t) for t in range(20)], [lr(t) for t in range(20)])
    model = tf_keras.Sequential([tf_keras.Input((2,)), tf_keras.layers.Dense(1)])
    model.compile(tf_keras.optimizers.SGD(lr), "mse")
    model.fit(np.ones((4, 2)), np.ones((4, 1)), epochs=2, verbose=0)
    path = os.path.join(self.get_temp_dir(), "saved_model")
    model.save(path, save_format="tf")
    loaded = tf_keras.models.load_model(path)
    config = loaded.optimizer.get_config()["learning_rate"]
    self.assertEqual(config["class_name"], "LinearWarmup")
    again = tf_keras.optimizers.schedules.deserialize(config)
    self.assertAllClose([again(t) for t in range(20)], [lr(t) for t in range(20)])


if __name__ == "__main__":
  tf.test.main()
