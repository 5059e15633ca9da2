"""The trainer's fine-tuning schedules: two phases (head, then everything at a lower
rate), per-layer-group learning rates, and runs measured in steps."""

import functools
import os
from unittest import mock

import tensorflow as tf
import tf_keras

from recipes import experiment
from recipes import trainer
from recipes.data import digits
from recipes.data import long_tail
from recipes.data import pipeline
from recipes.errors import ConfigError
from recipes.methods import losses
from zoo import finetune
from zoo import registry

RATE = 0.05


class Recorder:
  """Builds the model and keeps it, with its initial weights by variable name."""

  def __init__(self, name="resnet20_cifar"):
    self.name = name
    self.model = None
    self.initial = None

  def __call__(self):
    self.model = registry.build(self.name, num_classes=10, input_shape=(16, 16, 3))
    self.initial = weights(self.model)
    return self.model


def weights(model):
  return {v.name: v.numpy() for v in model.weights}


def run(model_dir, model, **overrides):
  tf_keras.backend.clear_session()
  kwargs = dict(
      data=digits.digits, model=model,
      pipeline=pipeline.InputPipeline(batch_size=32, image_size=16),
      long_tail=long_tail.LongTail(rho=20), loss=losses.cross_entropy,
      optimizer=functools.partial(tf_keras.optimizers.SGD, momentum=0.9),
      learning_rate=lambda total_steps, steps_per_epoch: RATE,
      epochs=2, seed=3, eval_every_epochs=0)
  kwargs.update(overrides)
  pipe = kwargs.pop("pipeline")
  on_step = kwargs.pop("on_step", None)
  return trainer.train_and_evaluate(model_dir, tf.distribute.OneDeviceStrategy("/cpu:0"),
                                    *experiment.split(pipeline=lambda: pipe, **kwargs),
                                    on_step=on_step)


class TrainerFinetuneTest(tf.test.TestCase):

  def test_two_phases_head_then_everything_at_a_lower_rate(self):
    recorder = Recorder()
    seen = []  # (epoch, weights after it, learning rate of its last step)
    original = trainer.Trainer.train_epoch

    def train_epoch(self, epoch, *args, **kwargs):
      done = original(self, epoch, *args, **kwargs)
      built = self.built
      seen.append((epoch, weights(built.model),
                   float(built.optimizer.learning_rate),
                   len(built.model.trainable_variables)))
      return done

    with mock.patch.object(trainer.Trainer, "train_epoch", train_epoch):
      run(os.path.join(self.get_temp_dir(), "run"), recorder, phases=experiment.head_then_all(1, 0.1))
    (_, head_phase, head_rate, head_count), (_, full_phase, full_rate, full_count) = seen
    self.assertAllClose(head_rate, RATE)
    self.assertAllClose(full_rate, 0.1 * RATE)
    self.assertEqual(head_count, 2)  # the head's kernel and bias
    self.assertEqual(full_count, len(recorder.model.trainable_variables))
    for name, value in recorder.initial.items():
      if name.startswith("logits/"):
        self.assertNotAllClose(value, head_phase[name])
      else:  # frozen, BatchNorm in inference mode: its moving statistics too
        self.assertAllEqual(value, head_phase[name], msg=name)
    moved = [n for n in recorder.initial if "moving_mean" in n or n.endswith("kernel:0")]
    for name in moved:
      self.assertNotAllClose(head_phase[name], full_phase[name], msg=name)

  def test_two_phase_run_resumed_in_its_first_phase_finishes_alike(self):
    tmp = self.get_temp_dir()
    kwargs = dict(epochs=3, phases=experiment.head_then_all(2, 0.1),
                  layer_learning_rates={"stage1": 0.5})
    straight = run(os.path.join(tmp, "straight"), Recorder(), **kwargs)
    original = trainer.Trainer.train_epoch

    def preempted(self, epoch, *args, **kwargs):
      if epoch == 1:
        raise KeyboardInterrupt("preempted")
      return original(self, epoch, *args, **kwargs)

    resumed_dir = os.path.join(tmp, "resumed")
    with mock.patch.object(trainer.Trainer, "train_epoch", preempted):
      with self.assertRaises(KeyboardInterrupt):
        run(resumed_dir, Recorder(), **kwargs)
    recorder = Recorder()
    resumed = run(resumed_dir, recorder, **kwargs)
    for key in ("top1", "per_class_accuracy", "final_train_loss"):
      self.assertEqual(resumed[key], straight[key], msg=key)

  def test_layer_learning_rates_hold_a_group_still(self):
    recorder = Recorder()
    run(os.path.join(self.get_temp_dir(), "run"), recorder, epochs=1,
        layer_learning_rates={"logits": 1.0, "stage3": 0.5, ".*": 0.0})
    after = weights(recorder.model)
    for name, value in recorder.initial.items():
      trainable = any(name == v.name for v in recorder.model.trainable_variables)
      if name.startswith(("logits/", "stage3/")):
        self.assertNotAllClose(value, after[name], msg=name)
      elif trainable:
        self.assertAllEqual(value, after[name], msg=name)

  def test_a_run_measured_in_steps_ends_mid_epoch(self):
    recorder = Recorder()
    steps_seen = []
    metrics = run(os.path.join(self.get_temp_dir(), "run"), recorder, steps=7,
                  on_step=lambda step, *_: steps_seen.append(step))
    per_epoch = metrics["num_train_examples"] // 32
    self.assertLess(7, 2 * per_epoch)
    self.assertEqual(metrics["steps"], 7)
    self.assertEqual(metrics["epochs"], -(-7 // per_epoch))
    self.assertEqual(steps_seen, list(range(7)))

  def test_bad_fine_tuning_settings(self):
    tmp = self.get_temp_dir()
    with self.assertRaisesRegex(ConfigError, "phases cover 3 epochs but the run has 2"):
      run(os.path.join(tmp, "a"), Recorder(), phases=[experiment.Phase(3, "head")])
    with self.assertRaisesRegex(ConfigError, "Optimization.layer_learning_rates: 'conv9' matches no"):
      run(os.path.join(tmp, "b"), Recorder(), layer_learning_rates={"conv9": 0.1})
    with self.assertRaisesRegex(ConfigError, "layer_learning_rates: .* not a regex"):
      run(os.path.join(tmp, "c"), Recorder(), layer_learning_rates={"(": 0.1})
    with self.assertRaisesRegex(ConfigError, r"Runtime.steps=0 must be a whole number >= 1"):
      run(os.path.join(tmp, "d"), Recorder(), steps=0)
    frozen = lambda: finetune.freeze_backbone(Recorder()())
    with self.assertRaisesRegex(ConfigError, "HEAD_EPOCHS.* or FREEZE_BACKBONE"):
      run(os.path.join(tmp, "e"), frozen, phases=experiment.head_then_all(1))
    for name in "abcde":
      self.assertFalse(os.path.exists(os.path.join(tmp, name)))


if __name__ == "__main__":
  tf.test.main()
