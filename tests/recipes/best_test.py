"""recipes/best.py: a value is kept when it beats the best so far, with the weights
that scored it; `patience` evaluations without a new best stop the run."""

import os

import numpy as np
import tensorflow as tf
import tf_keras

from recipes import best as best_lib
from recipes.errors import ConfigError


def tiny_model():
  inputs = tf_keras.Input([2])
  return tf_keras.Model(inputs, tf_keras.layers.Dense(1, name="logits")(inputs))


class BestTest(tf.test.TestCase):

  def make(self, patience, eval_every=1):
    self.model = tiny_model()
    self.root = self.get_temp_dir()
    return best_lib.Best(root=self.root, chief=True, strategy=tf.distribute.get_strategy(),
                         model=self.model, metric="balanced_accuracy", patience=patience,
                         eval_every=eval_every)

  def test_patience_counts_evaluations_since_the_best(self):
    best = self.make(patience=2, eval_every=2)
    # Evaluations after epochs 2, 4, 6, 8: the best at 4, none better at 6 and 8.
    stops = [best.update(done, value, steps_per_epoch=5)
             for done, value in ((2, 0.5), (4, 0.7), (6, 0.7), (8, 0.6))]
    self.assertEqual(stops, [False, False, False, True])  # (8 - 4) / 2 = 2 evaluations
    self.assertTrue(bool(best.stopped.numpy()))
    self.assertEqual(best.summary(), {"epoch": 4, "validation_balanced_accuracy": 0.7,
                                      "checkpoint": os.path.join(self.root, "best",
                                                                 "ckpt-4")})

  def test_the_kept_weights_are_those_that_scored(self):
    best = self.make(patience=None)
    kernel = self.model.get_layer("logits").kernel
    kernel.assign([[1.0], [2.0]])
    best.update(1, 0.5, steps_per_epoch=1)
    kernel.assign([[3.0], [4.0]])
    self.assertFalse(best.update(2, 0.4, steps_per_epoch=1))  # worse: not kept
    restored = tiny_model()
    tf.train.Checkpoint(model=restored).read(best.summary()["checkpoint"]).expect_partial()
    self.assertAllEqual(restored.get_layer("logits").kernel, [[1.0], [2.0]])

  def test_after_a_rollback_a_later_best_is_forgotten(self):
    best = self.make(patience=None)
    best.update(1, 0.5, steps_per_epoch=1)
    best.update(3, 0.6, steps_per_epoch=1)
    best.epoch.assign(1)  # the checkpoint the run rolled back to held best epoch 1
    best.value.assign(0.5)
    best.forget_later()
    self.assertIsNone(best.summary())
    self.assertEqual(float(best.value.numpy()), -1.0)
    self.assertFalse(tf.io.gfile.glob(os.path.join(self.root, "best", "ckpt-3*")))

  def test_no_metric_no_summary(self):
    best = best_lib.Best(root=self.get_temp_dir(), chief=True,
                         strategy=tf.distribute.get_strategy(), model=tiny_model(),
                         metric=None, patience=None, eval_every=0)
    self.assertIsNone(best.summary())


  def test_the_best_metric_needs_validation_and_classes_in_its_group(self):
    balanced = np.array([50] * 10)
    with self.assertRaisesRegex(ConfigError, "needs a validation split"):
      best_lib.check_metric("top1", 0, balanced, (20, 5))
    best_lib.check_metric("top1", 20, balanced, (20, 5))  # a hold-out or the source's list
    best_lib.check_metric(None, 0, balanced, (20, 5))
    best_lib.check_metric("many_shot_accuracy", 20, balanced, (20, 5))
    best_lib.check_metric("balanced_accuracy", 20, balanced, (20, 5))
    with self.assertRaisesRegex(ConfigError, "best_metric='few_shot_accuracy' but no class"):
      best_lib.check_metric("few_shot_accuracy", 20, balanced, (20, 5))
    with self.assertRaisesRegex(ConfigError, "best_metric='medium_shot_accuracy' but no"):
      best_lib.check_metric("medium_shot_accuracy", 20, balanced, (20, 5))
    # The groups are evaluation's: 20 (= many_shot_above) is medium, 5 (= few_shot_below)
    # medium, 4 few.
    best_lib.check_metric("medium_shot_accuracy", 20, np.array([20, 50]), (20, 5))
    best_lib.check_metric("medium_shot_accuracy", 20, np.array([5, 50]), (20, 5))
    best_lib.check_metric("few_shot_accuracy", 20, np.array([4, 50]), (20, 5))
    with self.assertRaisesRegex(ConfigError, "few_shot_accuracy"):
      best_lib.check_metric("few_shot_accuracy", 20, np.array([5, 50]), (20, 5))


if __name__ == "__main__":
  tf.test.main()
