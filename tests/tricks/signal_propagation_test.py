"""Gamma constants against 1/sqrt(Var[g(z)]), z ~ N(0, 1), by quadrature; SkipInit."""

from absl.testing import parameterized
import numpy as np
import tensorflow as tf

from tricks import signal_propagation


def gamma_by_quadrature(fn):
  """1 / std of fn(z) under the standard normal, by Gauss-Hermite quadrature."""
  nodes, weights = np.polynomial.hermite_e.hermegauss(201)
  weights = weights / weights.sum()
  values = fn(tf.constant(nodes, tf.float64)).numpy()
  mean = np.sum(weights * values)
  return 1.0 / np.sqrt(np.sum(weights * (values - mean) ** 2))


class SignalPropagationTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.parameters(sorted(signal_propagation.ACTIVATIONS))
  def test_gamma_is_the_inverse_std(self, name):
    fn, gamma = signal_propagation.ACTIVATIONS[name]
    # DeepMind's constants were estimated by sampling: within 0.5% of the integral.
    self.assertAllClose(gamma, gamma_by_quadrature(fn), rtol=5e-3)

  def test_relu_gamma_closed_form(self):
    _, gamma = signal_propagation.ACTIVATIONS["relu"]
    self.assertAllClose(gamma, 1 / np.sqrt(0.5 - 1 / (2 * np.pi)), rtol=1e-3)

  @parameterized.parameters(tf.float32, tf.bfloat16)
  def test_scaled_activation_preserves_unit_variance(self, dtype):
    z = tf.cast(tf.random.stateless_normal([200000], seed=[0, 1]), dtype)
    policy = "mixed_bfloat16" if dtype == tf.bfloat16 else "float32"
    out = tf.function(signal_propagation.ScaledActivation("gelu", dtype=policy))(z)
    self.assertEqual(out.dtype, dtype)
    self.assertAllClose(float(tf.math.reduce_std(tf.cast(out, tf.float32))), 1.0, rtol=2e-2)

  def test_unknown_activation(self):
    with self.assertRaisesRegex(ValueError, "unknown activation 'swish2'"):
      signal_propagation.ScaledActivation("swish2")

  def test_skip_gain_starts_at_zero_and_learns(self):
    layer = signal_propagation.SkipGain()
    x = tf.ones([2, 3])
    self.assertAllEqual(layer(x), tf.zeros([2, 3]))
    with tf.GradientTape() as tape:
      y = tf.reduce_sum(layer(x))
    self.assertAllClose(tape.gradient(y, layer.gain), 6.0)


if __name__ == "__main__":
  tf.test.main()
