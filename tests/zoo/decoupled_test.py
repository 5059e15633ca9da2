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

  def _one_step(self, model, x, y):
    """One SGD step on `model`'s trainable variables, called in training mode."""
    with tf.GradientTape() as tape:
      logits = model(x, training=True)
      loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(y, logits))
    grads = tape.gradient(loss, model.trainable_variables)
    tf_keras.optimizers.SGD(0.1).apply_gradients(zip(grads, model.trainable_variables))

  def test_batch_norm_batch_reestimates_statistics_of_the_frozen_backbone(self):
    """Kang et al.'s stage 2 in train() mode: the backbone's weights stay, its
    BatchNorm normalises with the batch's statistics and moves its moving mean:
    m <- momentum m + (1 - momentum) batch mean."""
    x = np.random.default_rng(3).normal(size=(8, 6)).astype(np.float32)
    y = np.arange(8) % 3
    for transform in (lambda m: decoupled.crt(m, seed=1, batch_norm="batch"),
                      lambda m: decoupled.lws(m, batch_norm="batch")):
      model = small_model()
      norm = model.get_layer("norm")
      norm.moving_mean.assign([0.5, -0.25, 1.0, 0.0, 2.0])
      norm.moving_variance.assign([1.5, 0.5, 2.0, 1.0, 3.0])
      body = model.get_layer("body")
      kernel, bias = body.kernel.numpy(), body.bias.numpy()
      gamma, beta = norm.gamma.numpy(), norm.beta.numpy()
      m0, v0 = norm.moving_mean.numpy(), norm.moving_variance.numpy()
      new = transform(model)
      self.assertNotIn("norm/gamma:0", [v.name for v in new.trainable_variables])
      z = np.maximum(x @ kernel + bias, 0)  # the body's relu output, in NumPy
      mean, var = z.mean(0), z.var(0)
      features = decoupled.feature_model(new)(x, training=True).numpy()
      self.assertAllClose(features, gamma * (z - mean) / np.sqrt(var + norm.epsilon) + beta,
                          rtol=1e-4, atol=1e-5)
      norm.moving_mean.assign(m0)  # the feature call above moved it once already
      self._one_step(new, x, y)
      self.assertAllEqual(body.kernel.numpy(), kernel)
      self.assertAllEqual(body.bias.numpy(), bias)
      self.assertAllEqual(norm.gamma.numpy(), gamma)
      self.assertAllEqual(norm.beta.numpy(), beta)
      momentum = norm.momentum
      self.assertAllClose(norm.moving_mean.numpy(), momentum * m0 + (1 - momentum) * mean,
                          rtol=1e-5, atol=1e-6)
      self.assertNotAllClose(norm.moving_variance.numpy(), v0)

  def test_batch_norm_moving_keeps_the_statistics(self):
    x = np.random.default_rng(3).normal(size=(8, 6)).astype(np.float32)
    for transform in (lambda m: decoupled.crt(m, seed=1), decoupled.lws):
      model = small_model()
      norm = model.get_layer("norm")
      norm.moving_mean.assign([0.5, -0.25, 1.0, 0.0, 2.0])
      m0, v0 = norm.moving_mean.numpy(), norm.moving_variance.numpy()
      new = transform(model)
      z = np.maximum(x @ model.get_layer("body").kernel.numpy()
                     + model.get_layer("body").bias.numpy(), 0)
      features = decoupled.feature_model(new)(x, training=True).numpy()
      self.assertAllClose(features, norm.gamma.numpy() * (z - m0) / np.sqrt(
          v0 + norm.epsilon) + norm.beta.numpy(), rtol=1e-4, atol=1e-5)
      self._one_step(new, x, np.arange(8) % 3)
      self.assertAllEqual(norm.moving_mean.numpy(), m0)
      self.assertAllEqual(norm.moving_variance.numpy(), v0)

  def test_batch_norm_mode_is_checked(self):
    with self.assertRaisesRegex(ValueError, "'moving'.*'batch'"):
      decoupled.crt(small_model(), batch_norm="train")

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
