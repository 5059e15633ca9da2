"""The weight EMA through a run (tf_keras's `use_ema`, tricks/weight_ema.py): a rollback
after a non-finite step puts the averages back to the restored checkpoint's; validation,
the best checkpoint, the test evaluation and the exported SavedModel all use the
averaged weights. (A run preempted and resumed ends with the uninterrupted run's
averages: //tests/recipes:fault_tolerance_test.)"""

import functools
import os
import re
from unittest import mock

import numpy as np
import tensorflow as tf
import tf_keras

from recipes import best
from recipes import checkpoints
from recipes import experiment
from recipes import train_step
from recipes import trainer
from recipes.data import digits
from recipes.data import long_tail
from recipes.data import pipeline
from recipes.methods import losses
from zoo import resnet_cifar

AVERAGE = re.compile(r"(^|/)average/")


def run(model_dir, **overrides):
  """Long-tailed digits on a CIFAR ResNet-8 at 16px, SGD with a weight average."""
  tf_keras.backend.clear_session()
  kwargs = dict(
      data=digits.digits,
      model=functools.partial(resnet_cifar.resnet_cifar, 8, num_classes=10,
                              input_shape=(16, 16, 3)),
      pipeline=pipeline.InputPipeline(batch_size=32, image_size=16),
      long_tail=long_tail.LongTail(rho=10), loss=losses.cross_entropy,
      optimizer=functools.partial(tf_keras.optimizers.SGD, momentum=0.9, use_ema=True,
                                  ema_momentum=0.8),
      learning_rate=lambda total_steps, steps_per_epoch: 0.1,
      epochs=3, seed=2, eval_every_epochs=1)
  kwargs.update(overrides)
  pipe = kwargs.pop("pipeline")
  return trainer.train_and_evaluate(model_dir, tf.distribute.OneDeviceStrategy("/cpu:0"),
                                    *experiment.split(pipeline=lambda: pipe, **kwargs))


def averages(optimizer):
  return [v.numpy() for v in optimizer.variables if AVERAGE.search(v.name)]


def saved_optimizer(path):
  """The optimizer's variables in checkpoint `path`, in `optimizer.variables` order (its
  step counter, variables[0], is saved as `_iterations`; the rest by position)."""
  reader = tf.train.load_checkpoint(path)
  found = {0: reader.get_tensor("optimizer/_iterations/.ATTRIBUTES/VARIABLE_VALUE")}
  for name in reader.get_variable_to_shape_map():
    match = re.match(r"^optimizer/_variables/([1-9]\d*)/\.ATTRIBUTES/VARIABLE_VALUE$", name)
    if match:
      found[int(match.group(1))] = reader.get_tensor(name)
  return [found[i] for i in sorted(found)]


class WeightEmaRunTest(tf.test.TestCase):

  def test_a_rollback_puts_the_averages_back_to_the_checkpoints(self):
    seen = {}
    loop, roll_back = train_step.TrainStep.loop, checkpoints.Checkpoints.roll_back
    calls = [0]

    def one_nan_loop(self, iterator, steps):  # as tests/recipes/interrupt.py's "nan"
      result = loop(self, iterator, steps)
      calls[0] += 1
      if calls[0] != 16:  # epoch 2's third step (13 steps an epoch), after ckpt-13
        return result
      return train_step.LoopResult(result.losses[:1], result.accuracies[:1], 0,
                                   float("nan"), 1.0)

    def spied_roll_back(ckpt):
      optimizer = ckpt.checkpoint.optimizer
      seen["before"] = [v.numpy() for v in optimizer.variables]
      position = roll_back(ckpt)
      seen["after"] = [v.numpy() for v in optimizer.variables]
      seen["names"] = [v.name for v in optimizer.variables]
      seen["restored"] = ckpt.restored
      return position

    model_dir = os.path.join(self.get_temp_dir(), "run")
    with mock.patch.object(train_step.TrainStep, "loop", one_nan_loop), \
         mock.patch.object(checkpoints.Checkpoints, "roll_back", spied_roll_back):
      metrics = run(model_dir)
    self.assertEqual(metrics["nonfinite_rollbacks"], 1)
    self.assertEqual(metrics["steps"] // metrics["epochs"], 13)
    self.assertRegex(seen["restored"], r"ckpt-13$")
    saved = saved_optimizer(seen["restored"])
    self.assertLen(saved, len(seen["after"]))
    ema = [i for i, n in enumerate(seen["names"]) if AVERAGE.search(n)]
    self.assertGreater(len(ema), 10)
    for i, name in enumerate(seen["names"]):  # the averages, momenta and step counter
      self.assertAllEqual(seen["after"][i], saved[i], msg=name)
    self.assertEqual(int(saved[0]), 13)
    self.assertTrue(any(not np.array_equal(seen["before"][i], saved[i]) for i in ema))

  def test_validation_best_test_and_export_use_the_averages(self):
    seen = {"best": []}
    update, original_score = best.Best.update, trainer.Trainer.score

    def spied_update(self, done, value, steps_per_epoch):  # inside validate()'s swap
      optimizer = seen["trainer"].built.optimizer
      seen["best"].append(([v.numpy() for v in self.model.trainable_variables],
                           averages(optimizer)))
      return update(self, done, value, steps_per_epoch)

    def spied_score(self, split="test"):
      seen["trainer"] = self
      return original_score(self, split)

    model_dir = os.path.join(self.get_temp_dir(), "run")
    with mock.patch.object(best.Best, "update", spied_update), \
         mock.patch.object(trainer.Trainer, "score", spied_score):
      metrics = run(model_dir, validation_per_class=3, best_metric="balanced_accuracy",
                    export_saved_model=True)
    built = seen["trainer"].built
    model, optimizer = built.model, built.optimizer
    trained = [v.numpy() for v in model.trainable_variables]
    final = averages(optimizer)
    self.assertLen(final, len(trained))
    self.assertTrue(any(not np.allclose(a, w) for a, w in zip(final, trained)))

    # Validation (and the best checkpoint it keeps) saw the averages, not the weights.
    self.assertLen(seen["best"], 3)
    for weights, ema in seen["best"]:
      for w, a in zip(weights, ema):
        self.assertAllEqual(w, a)
    fresh = resnet_cifar.resnet_cifar(8, num_classes=10, input_shape=(16, 16, 3))
    tf.train.Checkpoint(model=fresh).read(
        tf.train.latest_checkpoint(os.path.join(model_dir, "best"))).expect_partial()
    at_best = seen["best"][metrics["best_on_validation"]["epoch"] - 1][1]
    for v, a in zip(fresh.trainable_variables, at_best):
      self.assertAllEqual(v, a, msg=v.name)

    # The final test metrics: the averaged weights' predictions.
    def test_top1(weights):
      for v, w in zip(model.trainable_variables, weights):
        v.assign(w)
      labels, predicted = seen["trainer"].predict()
      return float(np.mean(predicted == labels)), labels, predicted

    top1, _, with_averages = test_top1(final)
    self.assertEqual(metrics["top1"], top1)
    _, _, with_weights = test_top1(trained)
    self.assertFalse(np.array_equal(with_averages, with_weights))

    # The export serves the averaged model on the evaluation preprocessing.
    pixels = np.random.default_rng(0).integers(0, 256, [6, 16, 16, 3], dtype=np.uint8)
    feed = built.pipeline
    x = feed.device_inputs(tf.stack([feed.eval_image(p) for p in pixels]))
    served = tf.saved_model.load(os.path.join(model_dir, "export")).signatures[
        "serving_default"](images=tf.constant([tf.io.encode_png(p).numpy() for p in pixels]))
    self.assertNotAllClose(served["logits"], model(x, training=False), rtol=1e-3, atol=1e-4)
    test_top1(final)
    self.assertAllClose(served["logits"], model(x, training=False), rtol=1e-4, atol=1e-5)


if __name__ == "__main__":
  tf.test.main()
