"""Optimization.layer_decay through the run's build and training step: each variable's
rate is decay^(num_layers + 1 - layer_id) of the base rate (BEiT's rule; the head 1),
with layer ids worked out here from a CIFAR ResNet's layer names, and one step of the
trainer's own step moves every weight by exactly -lr * scale * gradient."""

import functools
import re

import numpy as np
import tensorflow as tf
import tf_keras

from recipes import build
from recipes import experiment
from recipes.data import pipeline
from recipes.errors import ConfigError
from recipes.methods import losses
from zoo import registry

LR = 0.1
DECAY = 0.5
NUM_LAYERS = 9  # ResNet-20: 3 stages of 3 blocks


def layer_id(name):
  """ResNet-20's layer id by name: stem 0, stage s block b -> 1 + 3 (s - 1) + b, head 10."""
  if name.startswith("stem/"):
    return 0
  if name.startswith("logits/"):
    return NUM_LAYERS + 1
  stage, block = re.match(r"^stage(\d)/block(\d)/", name).groups()
  return 1 + 3 * (int(stage) - 1) + int(block)


def optimizing(strategy, model, **settings):
  settings = {"optimizer": tf_keras.optimizers.SGD, "layer_decay": DECAY, **settings}
  optimization = experiment.Optimization(**settings)
  data = build.Data(None, np.arange(8), np.zeros([0], np.int64), np.full([10], 1))
  feed = pipeline.InputPipeline(batch_size=8)
  runtime = experiment.Runtime(epochs=1)
  with strategy.scope():
    length = build.run_length(optimization, runtime, data, feed, None, model)
    made = build.build_optimizer(optimization, runtime, model, length,
                                 lambda total_steps, steps_per_epoch: LR)
  return optimization, runtime, made


class LayerDecayTest(tf.test.TestCase):

  def test_rates_by_depth_and_one_step_is_lr_times_scale(self):
    strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
    tf_keras.utils.set_random_seed(0)
    with strategy.scope():
      model = registry.build("resnet20_cifar", num_classes=10, input_shape=(8, 8, 3))
    optimization, runtime, made = optimizing(strategy, model)
    rates = made.layer_rates
    scale = {}
    for v in model.trainable_variables:
      scale[v.name] = DECAY ** (NUM_LAYERS + 1 - layer_id(v.name))
      self.assertEqual(rates.multiplier(v.name), scale[v.name], msg=v.name)
    self.assertEqual(scale["logits/kernel:0"], 1.0)
    self.assertEqual(scale["stem/conv/kernel:0"], DECAY ** 10)
    self.assertIn("layer decay 0.5: stem, 9 blocks, head", made.notes[0])

    rng = np.random.default_rng(1)
    x = rng.normal(size=[8, 8, 8, 3]).astype(np.float32)
    y = np.arange(8, dtype=np.int32) % 10
    before = {v.name: v.numpy() for v in model.trainable_variables}
    with tf.GradientTape() as tape:  # the step's loss: mean cross-entropy, BN in training
      loss = tf.reduce_mean(tf_keras.losses.sparse_categorical_crossentropy(
          y, model(x, training=True), from_logits=True))
    grads = dict(zip(before, (g.numpy() for g in tape.gradient(
        loss, model.trainable_variables))))

    step = build.build_step(strategy, optimization, runtime, model, made,
                            losses.cross_entropy(np.ones(10)),
                            pipeline.InputPipeline(batch_size=8))
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(8)
    step.loop(iter(strategy.experimental_distribute_dataset(dataset)), 1)
    for v in model.trainable_variables:
      want = before[v.name] - LR * scale[v.name] * grads[v.name]  # plain SGD, by hand
      self.assertAllClose(v.numpy(), want, rtol=1e-5, atol=1e-7, msg=v.name)
    moved = [n for n in before if np.abs(grads[n]).max() > 0]
    self.assertGreater(len(moved), 40)

  def test_bad_layer_decay(self):
    strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
    with strategy.scope():
      model = registry.build("resnet20_cifar", num_classes=10, input_shape=(8, 8, 3))
    with self.assertRaisesRegex(ConfigError, r"Optimization.layer_decay=1.5: layer decay 1.5 "
                                r"must be a number in \(0, 1\].*check LAYER_DECAY"):
      optimizing(strategy, model, layer_decay=1.5)
    with self.assertRaisesRegex(ConfigError, "both set the layers' rates; keep one"):
      optimizing(strategy, model, layer_learning_rates={"logits": 1.0})
    overwriting = functools.partial(tf_keras.optimizers.SGD, use_ema=True,
                                    ema_overwrite_frequency=10)
    with self.assertRaisesRegex(ConfigError, "unset ema_overwrite_frequency"):
      optimizing(strategy, model, optimizer=overwriting)


if __name__ == "__main__":
  tf.test.main()
