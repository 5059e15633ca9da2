"""Recompute: same loss and gradients as the plain model, BN statistics updated once,
the same dropout / stochastic-depth masks, and the segment really run twice."""

from absl.testing import parameterized
import numpy as np
import tensorflow as tf
import tf_keras

from tricks import layer_rng
from tricks import recompute
from tricks import stochastic_depth

CALLS = {"count": 0}


def count_calls(x):
  CALLS["count"] += 1
  return x


def setUpModule():
  cpu = tf.config.list_physical_devices("CPU")[0]
  tf.config.set_logical_device_configuration(
      cpu, [tf.config.LogicalDeviceConfiguration()] * 2)


def residual_net(blocks=4, counter=False):
  """Conv-BN-ReLU-Dropout blocks with stochastic depth on the residual branch."""
  inputs = tf_keras.Input((6, 6, 3), name="images")
  x = tf_keras.layers.Conv2D(4, 1, name="stem")(inputs)
  for i in range(blocks):
    name = f"block_{i}/"
    y = tf_keras.layers.Conv2D(4, 3, padding="same", name=name + "conv")(x)
    if counter and i == 0:
      y = tf_keras.layers.Lambda(count_calls, name=name + "count")(y)
    y = tf_keras.layers.BatchNormalization(name=name + "bn")(y)
    y = tf_keras.layers.ReLU(name=name + "relu")(y)
    y = tf_keras.layers.Dropout(0.3, name=name + "dropout")(y)
    y = stochastic_depth.StochasticDepth(0.4, name=name + "drop_path")(y)
    x = tf_keras.layers.Add(name=name + "add")([x, y])
  x = tf_keras.layers.GlobalAveragePooling2D(name="pool")(x)
  return tf_keras.Model(inputs, tf_keras.layers.Dense(3, name="logits")(x))


def step(model, x, labels, graph):
  def loss_and_grads(x):
    with tf.GradientTape() as tape:
      logits = model(x, training=True)
      loss = tf.reduce_mean(tf_keras.losses.sparse_categorical_crossentropy(
          labels, tf.cast(logits, tf.float32), from_logits=True))
    return loss, tape.gradient(loss, model.trainable_variables)
  return (tf.function(loss_and_grads) if graph else loss_and_grads)(x)


class RecomputeTest(tf.test.TestCase, parameterized.TestCase):

  def setUp(self):
    super().setUp()
    tf_keras.backend.experimental.enable_tf_random_generator()
    tf_keras.utils.set_random_seed(0)

  def tearDown(self):
    tf_keras.mixed_precision.set_global_policy("float32")
    super().tearDown()

  @parameterized.product(every=[1, 2], graph=[False, True],
                         policy=["float32", "mixed_bfloat16"])
  def test_gradients_state_and_masks_equal_the_plain_model(self, every, graph, policy):
    tf_keras.mixed_precision.set_global_policy(policy)
    plain = residual_net()
    wrapped = recompute.recompute(plain, r"^(block_\d+)/", every=every)
    self.assertLen([l for l in wrapped.layers if isinstance(l, recompute.Recompute)],
                   4 // every)
    self.assertEqual(len(wrapped.trainable_variables), len(plain.trainable_variables))
    x = tf.constant(np.random.default_rng(1).normal(size=(8, 6, 6, 3)), tf.float32)
    labels = tf.constant([0, 1, 2, 0, 1, 2, 0, 1])

    generators = layer_rng.layer_random_generators(plain)
    self.assertLen(generators, 8)  # dropout and stochastic depth of 4 blocks
    rng_start = [g.state.numpy() for g in generators]
    state_start = [v.numpy() for v in plain.non_trainable_variables]
    loss, grads = step(plain, x, labels, graph)
    state_plain = [v.numpy() for v in plain.non_trainable_variables]
    rng_plain = [g.state.numpy() for g in generators]
    # Same starting point for the recomputed model (it shares the plain one's layers).
    for g, s in zip(generators, rng_start):
      g.state.assign(s)
    for v, s in zip(plain.non_trainable_variables, state_start):
      v.assign(s)
    loss_re, grads_re = step(wrapped, x, labels, graph)

    tol = 1e-5 if policy == "float32" else 1e-2
    self.assertAllClose(loss_re, loss, rtol=tol, atol=tol)
    for a, b, v in zip(grads_re, grads, plain.trainable_variables):
      self.assertAllClose(a, b, rtol=tol, atol=tol, msg=v.name)
    # BN moving statistics: exactly one update, as the plain step made.
    for v, want, start in zip(plain.non_trainable_variables, state_plain, state_start):
      self.assertAllClose(v, want, rtol=1e-6, atol=1e-7, msg=v.name)
      self.assertNotAllClose(want, start, msg=v.name)
    for g, want in zip(generators, rng_plain):
      self.assertAllEqual(g.state, want)

  def test_segment_runs_again_in_the_backward_pass(self):
    model = residual_net(counter=True)
    wrapped = recompute.recompute(model, r"^(block_\d+)/")
    x = tf.ones((2, 6, 6, 3))
    CALLS["count"] = 0
    step(model, x, tf.constant([0, 1]), graph=False)
    self.assertEqual(CALLS["count"], 1)
    CALLS["count"] = 0
    step(wrapped, x, tf.constant([0, 1]), graph=False)
    self.assertEqual(CALLS["count"], 2)  # forward, then recomputed for the gradient

  def test_inference_is_the_plain_model(self):
    plain = residual_net()
    wrapped = recompute.recompute(plain, r"^(block_\d+)/", every=3)
    self.assertLen([l for l in wrapped.layers if isinstance(l, recompute.Recompute)], 2)
    x = tf.constant(np.random.default_rng(2).normal(size=(2, 6, 6, 3)), tf.float32)
    self.assertAllClose(wrapped(x, training=False), plain(x, training=False))

  def test_trains_under_mirrored_strategy(self):
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    with strategy.scope():
      model = recompute.recompute(residual_net(), r"^(block_\d+)/", every=2)
      optimizer = tf_keras.optimizers.SGD(0.1)
      optimizer.build(model.trainable_variables)
    x = np.random.default_rng(3).normal(size=(8, 6, 6, 3)).astype(np.float32)
    labels = np.arange(8) % 3
    data = strategy.experimental_distribute_dataset(
        tf.data.Dataset.from_tensors((x, labels)).unbatch().batch(8).repeat(5))

    @tf.function
    def train_step(batch):
      def replica(images, labels):
        with tf.GradientTape() as tape:
          loss = tf.reduce_sum(tf_keras.losses.sparse_categorical_crossentropy(
              labels, model(images, training=True), from_logits=True)) / 8.0
        optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables),
                                      model.trainable_variables))
        return loss
      return strategy.reduce("SUM", strategy.run(replica, args=batch), axis=None)

    losses = [float(train_step(batch)) for batch in data]
    self.assertTrue(np.all(np.isfinite(losses)), msg=losses)

  def test_bad_patterns_are_refused(self):
    model = residual_net()
    with self.assertRaisesRegex(ValueError, "no layer .* matches"):
      recompute.recompute(model, r"^(stage_\d+)/")
    with self.assertRaisesRegex(ValueError, "positive number"):
      recompute.recompute(model, r"^(block_\d+)/", every=0)


if __name__ == "__main__":
  tf.test.main()
