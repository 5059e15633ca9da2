"""Decoupled training's stage-2 model transforms (zoo/decoupled.py) on a small model
with a "logits" head: cRT re-initialises the head as PyTorch's nn.Linear and freezes
the rest; LWS puts scales of 1 on the logits and freezes everything else; tau-norm
rewrites the head in place; load_stage1 reads a trainer-style checkpoint."""

import os

import numpy as np
import tensorflow as tf
import tf_keras

from zoo import decoupled


def small_model(seed=0):
  tf_keras.utils.set_random_seed(seed)
  inputs = tf_keras.Input((6,))
  x = tf_keras.layers.Dense(5, activation="relu", name="body")(inputs)
  x = tf_keras.layers.BatchNormalization(name="norm")(x)
  return tf_keras.Model(inputs, tf_keras.layers.Dense(3, name="logits")(x), name="small")


class DecoupledTransformsTest(tf.test.TestCase):

  def test_crt_reinitialises_the_head_and_freezes_the_rest(self):
    model = small_model()
    body = model.get_layer("body").kernel.numpy()
    new = decoupled.crt(model, seed=7)
    self.assertEqual(sorted(v.name for v in new.trainable_variables),
                     ["logits/bias:0", "logits/kernel:0"])
    self.assertFalse(new.get_layer("norm").trainable)  # inference-mode BatchNorm
    self.assertAllEqual(new.get_layer("body").kernel.numpy(), body)  # shared, kept
    # PyTorch's nn.Linear(5, 3): weight [3, 5] and bias ~ U(-1/sqrt(5), 1/sqrt(5)).
    rng = np.random.default_rng(7)
    bound = 1 / np.sqrt(5)
    weight = rng.uniform(-bound, bound, size=(3, 5))
    bias = rng.uniform(-bound, bound, size=(3,))
    head = new.get_layer("logits")
    self.assertAllClose(head.kernel.numpy(), weight.T.astype(np.float32))
    self.assertAllClose(head.bias.numpy(), bias.astype(np.float32))
    x = np.random.default_rng(1).normal(size=(4, 6)).astype(np.float32)
    features = decoupled.feature_model(new)(x).numpy()
    self.assertAllClose(new(x), features @ weight.T + bias, rtol=1e-5, atol=1e-6)

  def test_train_head_keeps_the_head_and_freezes_the_rest(self):
    model = small_model()
    kernel = model.get_layer("logits").kernel.numpy()
    trained = decoupled.train_head(model)
    self.assertAllEqual(trained.get_layer("logits").kernel, kernel)  # not re-initialised
    self.assertEqual(sorted(v.name for v in trained.trainable_variables),
                     ["logits/bias:0", "logits/kernel:0"])
    self.assertFalse(trained.get_layer("norm").trainable)  # inference-mode BatchNorm

  def test_lws_scales_start_at_one_and_train_alone(self):
    model = small_model()
    x = np.random.default_rng(2).normal(size=(4, 6)).astype(np.float32)
    before = model(x).numpy()
    new = decoupled.lws(model)
    self.assertEqual([v.name for v in new.trainable_variables], ["logit_scales/scales:0"])
    self.assertAllClose(new(x), before)
    new.get_layer(decoupled.SCALES).scales.assign([2.0, 0.5, 1.0])
    self.assertAllClose(new(x), before * [2.0, 0.5, 1.0], rtol=1e-6)

  def test_tau_normalize_rewrites_the_head(self):
    model = small_model()
    kernel = model.get_layer("logits").kernel.numpy().astype(np.float64)
    decoupled.tau_normalize(model, 0.5)
    head = model.get_layer("logits")
    self.assertAllClose(head.kernel.numpy(),
                        kernel / np.sqrt(np.sqrt((kernel ** 2).sum(axis=0))), rtol=1e-6)
    self.assertAllEqual(head.bias.numpy(), np.zeros(3))

  def test_load_stage1_reads_every_weight(self):
    trained = small_model(seed=1)
    path = tf.train.Checkpoint(model=trained, step=tf.Variable(3)).write(
        os.path.join(self.get_temp_dir(), "ckpt-3"))
    fresh = decoupled.load_stage1(small_model(seed=2), checkpoint=path)
    for a, b in zip(fresh.weights, trained.weights):
      self.assertAllEqual(a.numpy(), b.numpy())
    with self.assertRaisesRegex(ValueError, "load_stage1.checkpoint is not set"):
      decoupled.load_stage1(small_model())

  def test_a_model_without_a_head_is_refused(self):
    inputs = tf_keras.Input((2,))
    model = tf_keras.Model(inputs, tf_keras.layers.Dense(2, name="out")(inputs))
    for transform in (decoupled.crt, decoupled.lws):
      with self.assertRaisesRegex(ValueError, "no 'logits' head"):
        transform(model)


if __name__ == "__main__":
  tf.test.main()
