"""recipes/checkpoints.py: checkpoints numbered by global step, restored newest first,
a damaged one moved to damaged/ and the one before it used, never a non-finite one
written, nothing rewritten in place; the progress record's round trip; a checkpoint
written before the layout was gathered in one place (checkpoint_fixture/) still read."""

import os
import shutil

import numpy as np
import tensorflow as tf
import tf_keras

from recipes import best as best_lib
from recipes import best_on_test
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
        length=LENGTH, keep=5)
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
    self.assertEqual(int(ckpt.progress.rollbacks.numpy()), 1)
    self.assertEqual(ckpt.roll_back(), (1, 0))
    self.assertEqual(int(ckpt.progress.rollbacks.numpy()), 2)  # not reset by the restore


  def test_the_progress_record_round_trips(self):
    model_dir = self.get_temp_dir()
    ckpt, _ = self.make(model_dir)
    progress = ckpt.progress
    self.assertEqual((progress.position, progress.epochs_done), ((0, 0), 0))
    ckpt.save(0)
    ckpt.roll_back()
    ckpt.roll_back()  # two rollbacks: the next epoch's data order is the third
    progress.begin_epoch()
    self.assertEqual(progress.data_seed(7), nonfinite.data_seed(7, 2))
    ckpt.save(1, 4)  # preempted four steps into epoch 2
    again, _ = self.make(model_dir)
    self.assertEqual(again.restore(), (1, 4))
    self.assertEqual(again.progress.position, (1, 4))
    self.assertEqual(int(again.progress.rollbacks.numpy()), 2)
    self.assertEqual(again.progress.data_seed(7), nonfinite.data_seed(7, 2))
    again.progress.end_epoch(2)
    self.assertEqual((again.progress.position, again.progress.epochs_done), ((2, 0), 2))

  def test_a_checkpoint_of_the_earlier_layout_is_read(self):
    """checkpoint_fixture/ckpt-14: written 2026-11-27 by checkpoints.py at b6ef00f
    (before Progress and `layout`), with Best, BestOnTest ("Cao et al. 2019's"), the
    step metrics and the generators as lifecycle.py assembled them: a Dense(2 -> 3)
    "logits" model, SGD with momentum, at epoch 1 step 4, 2 rollbacks, epoch order 1,
    best 0.5 at epoch 1, best on test 0.625 / 0.375 at epoch 1, loss mean of [1, 2]."""
    fixture = os.path.join(os.path.dirname(os.path.abspath(__file__)), "checkpoint_fixture")
    model_dir = self.get_temp_dir()
    shutil.copytree(fixture, os.path.join(model_dir, "checkpoints"))
    inputs = tf_keras.Input([2])
    model = tf_keras.Model(inputs, tf_keras.layers.Dense(3, name="logits")(inputs))
    optimizer = tf_keras.optimizers.SGD(0.1, momentum=0.9)
    optimizer.build(model.trainable_variables)
    strategy = tf.distribute.get_strategy()
    best = best_lib.Best(root=model_dir, chief=True, strategy=strategy, model=model,
                         metric="top1", patience=3, eval_every=1)
    on_test = best_on_test.BestOnTest(strategy=strategy, paper="Cao et al. 2019's")
    loss = tf_keras.metrics.Mean("loss")
    accuracy = tf_keras.metrics.SparseCategoricalAccuracy("accuracy")
    ckpt = checkpoints_lib.Checkpoints(
        model_dir=model_dir, root=model_dir, chief=True, strategy=strategy, model=model,
        optimizer=optimizer, length=LENGTH, keep=5,
        kept=checkpoints_lib.Kept(best=best, best_on_test=on_test, loss_metric=loss,
                                  accuracy_metric=accuracy, layer_rngs=[]))
    self.assertEqual(ckpt.restore(), (1, 4))
    self.assertAllClose(model.get_layer("logits").kernel,
                        np.arange(6, dtype=np.float32).reshape(2, 3) / 10)
    self.assertAllClose(model.get_layer("logits").bias, [0.5, -0.5, 0.25])
    self.assertEqual(int(optimizer.iterations.numpy()), 14)
    self.assertEqual(int(ckpt.progress.rollbacks.numpy()), 2)
    self.assertEqual(int(ckpt.progress.epoch_order.numpy()), 1)
    self.assertEqual((float(best.value.numpy()), int(best.epoch.numpy())), (0.5, 1))
    self.assertEqual((float(on_test.top1.numpy()), float(on_test.balanced.numpy()),
                      int(on_test.epoch.numpy())), (0.625, 0.375, 1))
    self.assertAllClose(loss.result(), 1.5)
    self.assertAllClose(accuracy.result(), 0.5)


if __name__ == "__main__":
  tf.test.main()
