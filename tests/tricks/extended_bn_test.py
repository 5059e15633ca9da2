"""Extended BN against NumPy of Luo et al.'s equations, in float32 and reduced precision,
eagerly and in tf.function; the BN swap; and global-batch moments under Mirrored."""

from absl.testing import parameterized
import numpy as np
import tensorflow as tf
import tf_keras

from tricks import extended_bn


def setUpModule():
  cpu = tf.config.list_physical_devices("CPU")[0]
  tf.config.set_logical_device_configuration(
      cpu, [tf.config.LogicalDeviceConfiguration()] * 2)


_STRATEGY = []


def mirrored():
  """One MirroredStrategy for the module: two in one process can mix up the
  instance keys of their collectives."""
  if not _STRATEGY:
    _STRATEGY.append(tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]))
  return _STRATEGY[0]


def numpy_ebn(x, gamma, beta, eps):
  """The paper's section 3, NHWC: mean over N,H,W per channel; variance over N,H,W,C."""
  mu = x.mean(axis=(0, 1, 2))
  var = ((x - mu) ** 2).mean()
  return gamma * (x - mu) / np.sqrt(var + eps) + beta, mu, var


def batch(seed=0, shape=(4, 3, 5, 6)):
  rng = np.random.default_rng(seed)
  # Channels with different means and scales: EBN and BN differ visibly.
  return (rng.normal(size=shape) * np.arange(1, shape[-1] + 1)
          + np.linspace(-3, 3, shape[-1])).astype(np.float32)


class ExtendedBatchNormTest(tf.test.TestCase, parameterized.TestCase):

  def tearDown(self):
    tf_keras.mixed_precision.set_global_policy("float32")
    super().tearDown()

  @parameterized.product(policy=["float32", "mixed_float16", "mixed_bfloat16"],
                         graph=[False, True])
  def test_training_output_and_moving_statistics_follow_the_paper(self, policy, graph):
    tf_keras.mixed_precision.set_global_policy(policy)
    x = batch()
    layer = extended_bn.ExtendedBatchNormalization(momentum=0.9, epsilon=1e-3)
    layer.build(x.shape)
    gamma = np.linspace(0.5, 2.0, 6).astype(np.float32)
    beta = np.linspace(-1.0, 1.0, 6).astype(np.float32)
    layer.gamma.assign(gamma)
    layer.beta.assign(beta)
    call = tf.function(layer) if graph else layer
    compute = tf.as_dtype(layer.compute_dtype)
    y = call(tf.cast(x, compute), training=True)
    self.assertEqual(y.dtype, compute)
    x_seen = tf.cast(tf.cast(x, compute), tf.float32).numpy()  # what the layer saw
    want, mu, var = numpy_ebn(x_seen, gamma, beta, 1e-3)
    tol = {"float32": 1e-5, "mixed_float16": 5e-3, "mixed_bfloat16": 3e-2}[policy]
    self.assertAllClose(tf.cast(y, tf.float32), want, rtol=tol, atol=tol)
    # Moving statistics: m <- 0.9 m + 0.1 batch, from zeros / ones, in float32.
    self.assertEqual(layer.moving_variance.shape, ())
    self.assertAllClose(layer.moving_mean, 0.1 * mu, rtol=1e-5, atol=1e-6)
    self.assertAllClose(layer.moving_variance, 0.9 + 0.1 * var, rtol=1e-5)
    # Not BN: one pooled variance, not one a channel.
    bn = (x_seen - mu) / np.sqrt(x_seen.var(axis=(0, 1, 2)) + 1e-3) * gamma + beta
    self.assertGreater(np.abs(bn - want).max(), 0.1)

  def test_inference_uses_moving_statistics(self):
    x = batch(1)
    layer = extended_bn.ExtendedBatchNormalization(epsilon=1e-3)
    layer.build(x.shape)
    layer.moving_mean.assign(np.arange(6, dtype=np.float32))
    layer.moving_variance.assign(4.0)
    want = (x - np.arange(6)) / np.sqrt(4.0 + 1e-3)
    self.assertAllClose(layer(x, training=False), want, rtol=1e-5, atol=1e-5)
    layer.trainable = False  # frozen, as in fine-tuning: inference even when training
    self.assertAllClose(layer(x, training=True), want, rtol=1e-5, atol=1e-5)
    self.assertAllClose(layer.moving_variance, 4.0)

  def test_gradients_match_the_formula(self):
    x = tf.constant(batch(2, shape=(3, 2, 2, 4)))
    layer = extended_bn.ExtendedBatchNormalization(epsilon=1e-3)
    layer.build(x.shape)
    rng = np.random.default_rng(3)
    weights = tf.constant(rng.normal(size=x.shape), tf.float32)
    layer.gamma.assign(rng.uniform(0.5, 2.0, 4))
    layer.beta.assign(rng.normal(size=4))

    def by_formula(x, gamma, beta):
      mu = tf.reduce_mean(x, axis=[0, 1, 2])
      var = tf.reduce_mean(tf.square(x - mu))
      return gamma * (x - mu) / tf.sqrt(var + 1e-3) + beta

    with tf.GradientTape(persistent=True) as tape:
      tape.watch(x)
      got = tf.reduce_sum(layer(x, training=True) * weights)
      want = tf.reduce_sum(by_formula(x, layer.gamma, layer.beta) * weights)
    for a, b in zip(tape.gradient(got, [x, layer.gamma, layer.beta]),
                    tape.gradient(want, [x, layer.gamma, layer.beta])):
      self.assertAllClose(a, b, rtol=1e-4, atol=1e-5)

  def test_config_round_trip(self):
    layer = extended_bn.ExtendedBatchNormalization(momentum=0.8, epsilon=1e-5,
                                                   synchronized=False, name="ebn")
    again = extended_bn.ExtendedBatchNormalization.from_config(layer.get_config())
    self.assertEqual(again.get_config(), layer.get_config())

  def test_global_batch_moments_under_mirrored_strategy(self):
    x = batch(4, shape=(8, 3, 3, 5))
    x[4:] = x[4:] * 3.0 + 2.0  # the two replicas' halves have different moments
    strategy = mirrored()
    with strategy.scope():
      layer = extended_bn.ExtendedBatchNormalization(momentum=0.0, epsilon=1e-3)
      layer.build(x.shape)
    values = strategy.experimental_distribute_values_from_function(
        lambda ctx: tf.constant([x[:4], x[4:]][ctx.replica_id_in_sync_group]))
    outputs = strategy.run(tf.function(lambda v: layer(v, training=True)), args=(values,))
    got = np.concatenate([t.numpy() for t in strategy.experimental_local_results(outputs)])
    want, mu, var = numpy_ebn(x, 1.0, 0.0, 1e-3)
    self.assertAllClose(got, want, rtol=1e-4, atol=1e-4)
    self.assertAllClose(layer.moving_mean, mu, rtol=1e-5, atol=1e-5)
    self.assertAllClose(layer.moving_variance, var, rtol=1e-5)
    local_average = np.mean([numpy_ebn(h, 1.0, 0.0, 0.0)[2] for h in (x[:4], x[4:])])
    self.assertNotAllClose(var, local_average, rtol=0.05)

  def test_gradients_under_mirrored_strategy_are_the_global_batch_ones(self):
    x = batch(6, shape=(8, 2, 2, 3))
    x[4:] = x[4:] * 2.0 - 1.0
    w = np.random.default_rng(7).normal(size=x.shape).astype(np.float32)
    gamma = np.array([0.5, 1.5, 2.0], np.float32)

    def loss_grads(layer, xs, ws):
      xs = tf.convert_to_tensor(xs)
      with tf.GradientTape() as tape:
        tape.watch(xs)
        loss = tf.reduce_sum(layer(xs, training=True) * ws)
      return tape.gradient(loss, [xs, layer.gamma, layer.beta])

    single = extended_bn.ExtendedBatchNormalization()
    single.build(x.shape)
    single.gamma.assign(gamma)
    want_x, want_gamma, want_beta = loss_grads(single, x, w)

    strategy = mirrored()
    with strategy.scope():
      layer = extended_bn.ExtendedBatchNormalization()
      layer.build(x.shape)
      layer.gamma.assign(gamma)

    @tf.function
    def step():
      def replica():
        i = tf.distribute.get_replica_context().replica_id_in_sync_group
        xs = tf.gather(tf.constant(x), tf.range(4) + 4 * i)
        ws = tf.gather(tf.constant(w), tf.range(4) + 4 * i)
        dx, dgamma, dbeta = loss_grads(layer, xs, ws)
        ctx = tf.distribute.get_replica_context()
        return dx, ctx.all_reduce("SUM", dgamma), ctx.all_reduce("SUM", dbeta)
      return strategy.run(replica)

    dx, dgamma, dbeta = step()
    got_x = np.concatenate([t.numpy() for t in strategy.experimental_local_results(dx)])
    self.assertAllClose(got_x, want_x, rtol=1e-4, atol=1e-5)
    for got in strategy.experimental_local_results(dgamma):
      self.assertAllClose(got, want_gamma, rtol=1e-4, atol=1e-5)
    for got in strategy.experimental_local_results(dbeta):
      self.assertAllClose(got, want_beta, rtol=1e-4, atol=1e-5)


class SwapBatchNormTest(tf.test.TestCase):

  def small_model(self):
    inputs = tf_keras.Input((6, 6, 3))
    x = tf_keras.layers.Conv2D(4, 3, name="conv")(inputs)
    x = tf_keras.layers.BatchNormalization(name="bn", momentum=0.8)(x)
    x = tf_keras.layers.ReLU()(x)
    inner_in = tf_keras.Input((4, 4, 4))
    inner = tf_keras.Model(inner_in, tf_keras.layers.BatchNormalization(name="inner_bn")(
        tf_keras.layers.Conv2D(4, 1, name="inner_conv")(inner_in)), name="inner")
    x = inner(x)
    outputs = tf_keras.layers.Dense(2, name="head")(tf_keras.layers.Flatten()(x))
    model = tf_keras.Model(inputs, outputs)
    rng = np.random.default_rng(0)
    for layer in (model.get_layer("bn"), inner.get_layer("inner_bn")):
      gamma, beta, mean, var = [w.numpy() for w in layer.weights]
      layer.set_weights([rng.normal(size=gamma.shape), rng.normal(size=beta.shape),
                         rng.normal(size=mean.shape), np.full(var.shape, 2.5)])
    return model

  def test_swaps_every_bn_and_carries_weights(self):
    model = self.small_model()
    swapped = extended_bn.swap_batch_norm(model)
    kinds = lambda m: [type(l).__name__ for l in extended_bn._all_layers(m)]  # pylint: disable=protected-access
    self.assertNotIn("BatchNormalization", kinds(swapped))
    self.assertEqual(kinds(swapped).count("ExtendedBatchNormalization"), 2)
    self.assertIn("BatchNormalization", kinds(model))  # the original is untouched
    ebn = swapped.get_layer("bn")
    self.assertEqual(ebn.momentum, 0.8)
    bn = model.get_layer("bn")
    self.assertAllEqual(ebn.gamma, bn.gamma)
    self.assertAllEqual(ebn.moving_mean, bn.moving_mean)
    self.assertAllClose(ebn.moving_variance, 2.5)
    self.assertAllEqual(swapped.get_layer("head").kernel, model.get_layer("head").kernel)
    # Equal per-channel moving variances: inference is unchanged by the swap.
    x = batch(5, shape=(2, 6, 6, 3))
    self.assertAllClose(swapped(x, training=False), model(x, training=False),
                        rtol=1e-5, atol=1e-5)
    # And a training step runs and moves the swapped statistics only.
    before = bn.moving_mean.numpy()
    swapped(x, training=True)
    self.assertNotAllClose(ebn.moving_mean, before)
    self.assertAllEqual(bn.moving_mean, before)

  def test_model_without_bn_is_refused(self):
    inputs = tf_keras.Input((4,))
    model = tf_keras.Model(inputs, tf_keras.layers.Dense(2)(inputs))
    with self.assertRaisesRegex(ValueError, "no BatchNormalization"):
      extended_bn.swap_batch_norm(model)


if __name__ == "__main__":
  tf.test.main()
