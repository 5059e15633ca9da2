"""Adaptive gradient clipping against eq. (3) of Brock et al. 2021, in NumPy."""

from absl.testing import parameterized
import numpy as np
import tensorflow as tf
import tf_keras

from tricks import agc


def numpy_agc(grad, param, clipping, eps, axes):
  """Eq. (3), written out independently: unit-wise Frobenius norms."""
  g_norm = np.sqrt(np.sum(grad.astype(np.float64) ** 2, axis=axes, keepdims=True))
  w_norm = np.sqrt(np.sum(param.astype(np.float64) ** 2, axis=axes, keepdims=True))
  max_norm = clipping * np.maximum(w_norm, eps)
  ratio_too_big = g_norm / np.maximum(w_norm, eps) > clipping
  return np.where(ratio_too_big, grad * max_norm / np.maximum(g_norm, 1e-6), grad)


def setUpModule():
  cpu = tf.config.list_physical_devices("CPU")[0]
  tf.config.set_logical_device_configuration(
      cpu, [tf.config.LogicalDeviceConfiguration()] * 2)


class AgcTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.named_parameters(
      ("dense", (5, 7), (0,)),
      ("conv1d", (3, 4, 6), (0, 1)),
      ("conv2d", (3, 3, 4, 6), (0, 1, 2)),
      ("conv3d", (2, 3, 3, 4, 6), (0, 1, 2, 3)),
      ("bias", (6,), None),
      ("scalar", (), None),
  )
  def test_matches_formula_per_kernel_layout(self, shape, axes):
    rng = np.random.default_rng(0)
    param = rng.normal(size=shape).astype(np.float32)
    # Mix of units that must be clipped (big gradients) and ones that must not.
    grad = (rng.normal(size=shape) * rng.choice([1e-4, 10.0], size=shape)).astype(np.float32)
    var = tf.Variable(param, name="layer/kernel")
    self.assertEqual(agc.unit_axes(var), axes)
    clip = agc.AdaptiveGradClip(clipping=0.05, eps=1e-3, exclude=())
    got = clip([tf.constant(grad)], [var])[0]
    want = numpy_agc(grad, param, 0.05, 1e-3, axes)
    self.assertAllClose(got, want, rtol=1e-5, atol=1e-7)

  def test_clipped_units_have_ratio_lambda_and_others_untouched(self):
    param = np.ones([4, 3], np.float32)          # each unit (column) has norm 2
    grad = np.array([[1.0, 0.001, 0.0]] * 4, np.float32)  # norms 2, 0.002, 0
    var = tf.Variable(param, name="dense/kernel")
    got = agc.AdaptiveGradClip(clipping=0.1, exclude=())([tf.constant(grad)], [var])[0]
    # Unit 0: ||G||/||W|| = 1 > 0.1, so its norm becomes 0.1 * 2 = 0.2.
    self.assertAllClose(np.linalg.norm(got[:, 0]), 0.2, rtol=1e-6)
    self.assertAllClose(got[:, 1:], grad[:, 1:])

  def test_eps_lets_zero_weights_move(self):
    var = tf.Variable(tf.zeros([3, 2]), name="dense/kernel")
    grad = tf.ones([3, 2])
    got = agc.AdaptiveGradClip(clipping=0.01, eps=1e-3, exclude=())([grad], [var])[0]
    self.assertAllClose(tf.norm(got, axis=0), [1e-5, 1e-5], rtol=1e-5)

  def test_excluded_layers_pass_through(self):
    kernel = tf.Variable(tf.ones([3, 2]), name="logits/kernel")
    other = tf.Variable(tf.ones([3, 2]), name="hidden/kernel")
    grad = tf.fill([3, 2], 100.0)
    out = agc.AdaptiveGradClip(clipping=0.01)([grad, grad], [kernel, other])
    self.assertAllEqual(out[0], grad)
    self.assertLess(float(tf.reduce_max(out[1])), 1.0)

  def test_depthwise_and_transposed_kernels(self):
    model = tf_keras.Sequential([
        tf_keras.Input((8, 8, 3)),
        tf_keras.layers.DepthwiseConv2D(3, depth_multiplier=2, name="dw"),
        tf_keras.layers.Conv2DTranspose(5, 3, name="up"),
    ])
    clip = agc.AdaptiveGradClip(exclude=()).build(model)
    dw, up = model.get_layer("dw").depthwise_kernel, model.get_layer("up").kernel
    self.assertEqual(agc.unit_axes(dw), (0, 1))     # (H, W, I, M): a unit per (i, m)
    self.assertEqual(agc.unit_axes(up, transposed=True), (0, 1, 3))  # (H, W, O, I)
    rng = np.random.default_rng(1)
    grads = [tf.constant(rng.normal(size=v.shape).astype(np.float32) * 5)
             for v in (dw, up)]
    out = clip(grads, [dw, up])
    self.assertAllClose(out[0], numpy_agc(grads[0].numpy(), dw.numpy(), 0.01, 1e-3, (0, 1)),
                        rtol=1e-5)
    self.assertAllClose(out[1], numpy_agc(grads[1].numpy(), up.numpy(), 0.01, 1e-3,
                                          (0, 1, 3)), rtol=1e-5)

  @parameterized.parameters(tf.float16, tf.bfloat16)
  def test_reduced_precision_inside_tf_function(self, dtype):
    rng = np.random.default_rng(2)
    param = rng.normal(size=(3, 3, 4, 6)).astype(np.float32)
    grad = (rng.normal(size=param.shape) * 3).astype(np.float32)
    var = tf.Variable(param, name="conv/kernel")
    clip = agc.AdaptiveGradClip(clipping=0.02, exclude=())
    got = tf.function(lambda g: clip([g], [var])[0])(tf.cast(grad, dtype))
    self.assertEqual(got.dtype, dtype)
    want = numpy_agc(tf.cast(tf.cast(grad, dtype), tf.float32).numpy(), param, 0.02, 1e-3,
                     (0, 1, 2))
    self.assertAllClose(tf.cast(got, tf.float32), want, rtol=1e-2, atol=1e-3)

  def test_rejects_non_positive_clipping(self):
    with self.assertRaisesRegex(ValueError, "clipping must be > 0"):
      agc.AdaptiveGradClip(clipping=0.0)

  def test_clips_the_all_reduced_gradient_under_mirrored_strategy(self):
    """Two replicas, half the batch each: AGC sees the global-batch gradient."""
    rng = np.random.default_rng(5)
    x = rng.normal(size=(8, 3)).astype(np.float32)
    x[4:] *= 10.0  # the halves' gradients differ a lot in size
    y = rng.normal(size=(8, 2)).astype(np.float32)
    w0 = rng.normal(size=(3, 2)).astype(np.float32) * 0.1
    clip = agc.AdaptiveGradClip(clipping=0.05, exclude=())
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    with strategy.scope():
      w = tf.Variable(w0)

    def replica_grad(ctx):
      i = ctx.replica_id_in_sync_group
      return tf.constant(x[4 * i:4 * i + 4]), tf.constant(y[4 * i:4 * i + 4])

    @tf.function
    def step(inputs):
      def replica(xs, ys):
        with tf.GradientTape() as tape:
          loss = tf.reduce_sum(tf.square(xs @ w - ys)) / 8.0  # global-batch mean
        grad = tf.distribute.get_replica_context().all_reduce("SUM", tape.gradient(loss, w))
        return clip([grad], [w])[0]
      return strategy.run(replica, args=inputs)

    inputs = strategy.experimental_distribute_values_from_function(replica_grad)
    clipped = [t.numpy() for t in strategy.experimental_local_results(step(inputs))]
    full = 2 * x.T @ (x @ w0 - y) / 8.0  # gradient of the whole batch's loss
    want = numpy_agc(full, w0, 0.05, 1e-3, (0,))
    self.assertNotAllClose(want, full)  # clipping acted
    for got in clipped:  # every replica applies the same clipped global gradient
      self.assertAllClose(got, want, rtol=1e-5, atol=1e-6)
    halves = [2 * x[s].T @ (x[s] @ w0 - y[s]) / 8.0 for s in (slice(0, 4), slice(4, 8))]
    per_replica = sum(numpy_agc(h, w0, 0.05, 1e-3, (0,)) for h in halves)
    self.assertNotAllClose(per_replica, want)  # not the sum of locally clipped ones


if __name__ == "__main__":
  tf.test.main()
