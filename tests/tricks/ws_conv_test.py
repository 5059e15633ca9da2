"""Scaled weight standardisation against eq. (2) of Brock, De, Smith 2021."""

from absl.testing import parameterized
import numpy as np
import tensorflow as tf

from tricks import ws_conv


def numpy_ws(kernel, gain, eps=1e-4):
  fan_in = np.prod(kernel.shape[:-1])
  mean = kernel.mean(axis=(0, 1, 2), keepdims=True)
  var = kernel.var(axis=(0, 1, 2), keepdims=True)
  return gain * (kernel - mean) / np.sqrt(np.maximum(fan_in * var, eps))


class WsConvTest(tf.test.TestCase, parameterized.TestCase):

  def test_standardized_kernel_matches_formula(self):
    rng = np.random.default_rng(0)
    kernel = rng.normal(2.0, 3.0, size=(3, 3, 4, 5)).astype(np.float32)
    gain = rng.uniform(0.5, 2.0, size=(5,)).astype(np.float32)
    got = ws_conv.standardize_kernel(tf.constant(kernel), tf.constant(gain))
    self.assertAllClose(got, numpy_ws(kernel, gain), rtol=1e-5, atol=1e-6)
    # Each output unit: zero mean, variance gain^2 / fan_in.
    self.assertAllClose(got.numpy().mean(axis=(0, 1, 2)), np.zeros(5), atol=1e-6)
    self.assertAllClose(got.numpy().var(axis=(0, 1, 2)), gain ** 2 / 36, rtol=1e-4)

  def test_variance_eps_is_timms_batch_norm_over_the_fan_in(self):
    """timm's ScaledStdConv2d: F.batch_norm over each unit's fan-in (biased variance,
    eps added to it) times gain / sqrt(N); a near-constant unit shows the offset."""
    rng = np.random.default_rng(2)
    kernel = rng.normal(0.0, 0.05, size=(3, 3, 4, 5)).astype(np.float32)
    kernel[..., 1] = 0.5 + rng.normal(0.0, 1e-3, size=(3, 3, 4))
    gain = rng.uniform(0.5, 2.0, size=(5,)).astype(np.float32)
    flat = kernel.reshape(36, 5).astype(np.float64)
    batch_norm = (flat - flat.mean(0)) / np.sqrt(flat.var(0) + 1e-5)
    want = (batch_norm * gain / 6.0).reshape(kernel.shape)
    got = ws_conv.standardize_kernel(tf.constant(kernel), tf.constant(gain),
                                     variance_eps=1e-5)
    # float32 centring of 0.5 + 1e-3 noise: 6e-8 / 1e-3 of the unit's scale (0.14).
    self.assertAllClose(got, want, rtol=1e-5, atol=2e-5)
    # DeepMind's floor gives other numbers here: both forms are needed.
    self.assertGreater(np.abs(numpy_ws(kernel, gain) - want).max(), 1e-2)

  def test_variance_eps_gradient_equals_automatic_differentiation(self):
    rng = np.random.default_rng(3)
    kernel = tf.constant(rng.normal(0.1, 0.02, size=(3, 3, 6, 5)).astype(np.float32))
    gain = tf.constant(rng.uniform(0.5, 2.0, size=(5,)).astype(np.float32))
    upstream = tf.constant(rng.normal(size=(3, 3, 6, 5)).astype(np.float32))

    def formula(w, g):
      mean = tf.reduce_mean(w, axis=[0, 1, 2], keepdims=True)
      var = tf.reduce_mean(tf.square(w - mean), axis=[0, 1, 2], keepdims=True)
      return g * (w - mean) / tf.sqrt(54.0 * (var + 1e-3))

    def ours(w, g):
      return ws_conv.standardize_kernel(w, g, variance_eps=1e-3)

    grads = []
    for fn in (ours, formula):
      with tf.GradientTape() as tape:
        tape.watch([kernel, gain])
        loss = tf.reduce_sum(fn(kernel, gain) * upstream)
      grads.append(tape.gradient(loss, [kernel, gain]))
    (got_w, got_g), (want_w, want_g) = grads
    self.assertAllClose(got_w, want_w, rtol=1e-4, atol=1e-5)
    self.assertAllClose(got_g, want_g, rtol=1e-4, atol=1e-5)

  @parameterized.parameters("float32", "bfloat16")
  def test_gradient_equals_automatic_differentiation_of_the_formula(self, dtype):
    """The written-out backward pass against TensorFlow differentiating eq. (2) in
    float32 (on the same bfloat16-rounded numbers for a bfloat16 kernel, as mixed
    precision reads it), with a constant output unit (N var = 0 < eps: the floor is
    active) among normal ones."""
    rng = np.random.default_rng(1)
    kernel = rng.normal(0.3, 0.5, size=(3, 3, 6, 5)).astype(np.float32)
    kernel[..., 2] = 0.75
    kernel = tf.cast(tf.cast(kernel, dtype), tf.float32)
    gain = tf.constant(rng.uniform(0.5, 2.0, size=(5,)).astype(np.float32))
    upstream = tf.cast(tf.cast(rng.normal(size=(3, 3, 6, 5)), dtype), tf.float32)
    tol = 1e-4 if dtype == "float32" else 1e-2

    def formula(w, g, eps=1e-4):
      mean = tf.reduce_mean(w, axis=[0, 1, 2], keepdims=True)
      var = tf.reduce_mean(tf.square(w - mean), axis=[0, 1, 2], keepdims=True)
      return g * (w - mean) / tf.sqrt(tf.maximum(54.0 * var, eps))

    def ours(w, g):
      return tf.cast(ws_conv.standardize_kernel(tf.cast(w, dtype), g), tf.float32)

    grads = []
    for fn in (ours, formula):
      with tf.GradientTape() as tape:
        tape.watch([kernel, gain])
        loss = tf.reduce_sum(fn(kernel, gain) * upstream)
      grads.append(tape.gradient(loss, [kernel, gain]))
    (got_w, got_g), (want_w, want_g) = grads
    self.assertAllClose(got_w, want_w, rtol=tol, atol=tol * 0.1)
    self.assertAllClose(got_g, want_g, rtol=tol, atol=tol * 0.1)
    # The floored unit: the scale is constant, so dW = s (dY - mean(dY)).
    scale = gain[2] / np.sqrt(1e-4)
    self.assertAllClose(got_w[..., 2], scale * (upstream[..., 2]
                                                - tf.reduce_mean(upstream[..., 2])),
                        rtol=tol, atol=1e-3)

  @parameterized.parameters(
      dict(groups=1, strides=1, dtype="float32"),
      dict(groups=2, strides=2, dtype="float32"),
      dict(groups=4, strides=1, dtype="mixed_bfloat16"),
  )
  def test_layer_convolves_with_the_standardised_kernel(self, groups, strides, dtype):
    layer = ws_conv.WSConv2D(8, 3, strides=strides, groups=groups, padding="same",
                             dtype=dtype)
    x = tf.random.stateless_normal([2, 9, 9, 4], seed=[1, 2])
    y = tf.function(layer)(x)
    kernel = numpy_ws(layer.kernel.numpy(), layer.gain.numpy())
    want = tf.nn.conv2d(x[..., :4 // groups], kernel[..., :8 // groups],
                        strides=strides, padding="SAME") + layer.bias.numpy()[:8 // groups]
    tol = 5e-2 if dtype == "mixed_bfloat16" else 1e-4
    self.assertAllClose(tf.cast(y[..., :8 // groups], tf.float32), want, rtol=tol, atol=tol)
    self.assertEqual(len(layer.trainable_weights), 3)  # kernel, bias, gain

  def test_unit_variance_signal_at_init(self):
    layer = ws_conv.WSConv2D(64, 3, padding="same")
    x = tf.random.stateless_normal([8, 16, 16, 32], seed=[3, 4])
    y = layer(x)
    self.assertAllClose(float(tf.math.reduce_variance(y)), 1.0, rtol=0.1)

  def test_config_round_trip(self):
    layer = ws_conv.WSConv2D(4, 1, eps=1e-3, variance_eps=1e-5, name="c")
    clone = ws_conv.WSConv2D.from_config(layer.get_config())
    self.assertEqual(clone.eps, 1e-3)
    self.assertEqual(clone.variance_eps, 1e-5)
    self.assertTrue(clone.use_bias)


if __name__ == "__main__":
  tf.test.main()
