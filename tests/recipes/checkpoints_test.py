"""recipes/checkpoints.py: checkpoints numbered by global step, restored newest first,
a damaged one moved to damaged/ and the one before it used, never a non-finite one
written, nothing rewritten in place."""

import os

import numpy as np
import tensorflow as tf
import tf_keras

from recipes import build
from recipes import checkpoints as checkpoints_lib
from recipes import nonfinite
from recipes.errors import ConfigError

LENGTH = build.Length(epochs=3, steps_per_epoch=10, total_steps=30, spans=[], phased=False)


class CheckpointsTest(tf.test.TestCase):

  def make(self, model_dir):
    inputs = tf_keras.Input([2])
    model = tf_keras.Model(inputs, tf_keras.layers.Dense(1)(inputs))
    optimizer = tf_keras.optimizers.SGD(0.1, momentum=0.9)
    optimizer.build(model.trainable_variables)
    ckpt = checkpoints_lib.Checkpoints(
        model_dir=model_dir, root=model_dir, chief=True,
        strategy=tf.distribute.get_strategy(), model=model, optimizer=optimizer,
        trackables={}, length=LENGTH, keep=5)
    return ckpt, model

  def test_numbered_by_global_step_and_restored_newest_first(self):
    model_dir = self.get_temp_dir()
    ckpt, model = self.make(model_dir)
    self.assertEqual(ckpt.restore(), (0, 0))
    self.assertEqual(os.path.basename(ckpt.save(0)), "ckpt-0")
    model.weights[0].assign([[5.0], [6.0]])
    self.assertEqual(os.path.basename(ckpt.save(1, 4)), "ckpt-14")  # 1 * 10 + 4
    self.assertEqual(ckpt.save(1, 4), ckpt.restored)  # nothing new: not rewritten
    again, model2 = self.make(model_dir)
    self.assertEqual(again.restore(), (1, 4))
    self.assertAllEqual(model2.weights[0], [[5.0], [6.0]])

  def test_a_damaged_checkpoint_is_set_aside(self):
    model_dir = self.get_temp_dir()
    ckpt, model = self.make(model_dir)
    ckpt.save(1)
    model.weights[0].assign([[7.0], [8.0]])
    newest = ckpt.save(2)
    for path in tf.io.gfile.glob(newest + ".data*"):
      with open(path, "wb") as f:
        f.write(b"")
    again, model2 = self.make(model_dir)
    self.assertEqual(again.restore(), (1, 0))
    self.assertTrue(os.path.exists(os.path.join(model_dir, "checkpoints", "damaged",
                                                "ckpt-20.index")))
    self.assertNotAllEqual(model2.weights[0], [[7.0], [8.0]])
    for path in tf.io.gfile.glob(os.path.join(model_dir, "checkpoints", "ckpt-10.data*")):
      with open(path, "wb") as f:
        f.write(b"")
    with self.assertRaisesRegex(ConfigError, r"^every checkpoint in .* is damaged"):
      self.make(model_dir)[0].restore()

  def test_a_non_finite_weight_is_never_saved(self):
    ckpt, model = self.make(self.get_temp_dir())
    model.weights[0].assign([[np.nan], [1.0]])
    with self.assertRaises(nonfinite.NonFinite):
      ckpt.save(1)
    self.assertEqual(ckpt.candidates(), [])

  def test_roll_back_counts_the_rollback(self):
    ckpt, _ = self.make(self.get_temp_dir())
    ckpt.save(1)
    self.assertEqual(ckpt.roll_back(), (1, 0))
    self.assertEqual(int(ckpt.rollbacks.numpy()), 1)
    self.assertEqual(ckpt.roll_back(), (1, 0))
    self.assertEqual(int(ckpt.rollbacks.numpy()), 2)  # not reset by the restore


if __name__ == "__main__":
  tf.test.main()
