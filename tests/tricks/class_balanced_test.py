"""Effective-number weights (Cui et al. 2019, Sec. 3-4) against the paper's definitions."""

from absl.testing import parameterized
import numpy as np
import tensorflow as tf

from tricks import class_balanced

CIFAR10_LT = [5000, 2997, 1796, 1077, 645, 387, 232, 139, 83, 50]


def recursive_effective_number(n, beta):
  """The recursion of the paper's proof of Proposition 1: E_1 = 1, E_n = 1 + beta E_{n-1}."""
  e = 1.0
  for _ in range(int(n) - 1):
    e = 1.0 + beta * e
  return e


class EffectiveNumberTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.parameters(0.9, 0.99, 0.999, 0.9999)
  def test_matches_the_recursion(self, beta):
    got = class_balanced.effective_number(CIFAR10_LT, beta)
    want = [recursive_effective_number(n, beta) for n in CIFAR10_LT]
    self.assertAllClose(got, want, rtol=1e-10)

  def test_limits(self):
    # beta = 0: E_n = 1 (every class one prototype); beta -> 1: E_n -> n.
    self.assertAllEqual(class_balanced.effective_number([7, 3], 0.0), [1.0, 1.0])
    self.assertAllClose(class_balanced.effective_number([7, 3], 1 - 1e-9), [7.0, 3.0],
                        rtol=1e-6)
    self.assertAllEqual(class_balanced.effective_number([7, 3], 1.0), [7.0, 3.0])
    # E_n is at most n and at most 1 / (1 - beta) (Proposition 1's bound N).
    e = class_balanced.effective_number(CIFAR10_LT, 0.999)
    self.assertTrue(np.all(e <= np.asarray(CIFAR10_LT)) and np.all(e < 1000))


class WeightsTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.parameters(0.9, 0.99, 0.999, 0.9999)
  def test_weights(self, beta):
    got = class_balanced.weights(CIFAR10_LT, beta)
    raw = (1.0 - beta) / (1.0 - np.power(beta, np.asarray(CIFAR10_LT, np.float64)))
    self.assertAllClose(got, raw / raw.sum() * 10, rtol=1e-6)
    self.assertAllClose(np.sum(got), 10.0, rtol=1e-6)

  def test_beta_zero_is_uniform(self):
    self.assertAllEqual(class_balanced.weights(CIFAR10_LT, 0.0), np.ones(10))

  def test_beta_one_is_inverse_frequency(self):
    inverse = 1.0 / np.asarray(CIFAR10_LT, np.float64)
    self.assertAllClose(class_balanced.weights(CIFAR10_LT, 1.0),
                        inverse / inverse.sum() * 10, rtol=1e-6)
    # beta close to 1 approaches it.
    self.assertAllClose(class_balanced.weights(CIFAR10_LT, 1 - 1e-8),
                        inverse / inverse.sum() * 10, rtol=1e-4)

  def test_rejects_bad_arguments(self):
    with self.assertRaisesRegex(ValueError, "positive training count"):
      class_balanced.weights([3, 0], 0.9)
    with self.assertRaisesRegex(ValueError, r"beta=1.5 must be a number in \[0, 1\]"):
      class_balanced.weights([3, 1], 1.5)


class ReadWeightsTest(tf.test.TestCase):

  def test_constant_variable_and_callable(self):
    self.assertIsNone(class_balanced.read_weights(None, 2))
    self.assertAllEqual(class_balanced.read_weights([1, 2], 2), [1.0, 2.0])
    v = tf.Variable([0.5, 1.5])
    self.assertAllEqual(class_balanced.read_weights(v, 2), [0.5, 1.5])
    self.assertAllEqual(class_balanced.read_weights(lambda: v * 2, 2), [1.0, 3.0])
    with self.assertRaisesRegex(ValueError, r"shape \[3\]"):
      class_balanced.read_weights([1.0, 2.0], 3)

  def test_weights_config(self):
    v = tf.Variable([0.5, 1.5])
    self.assertEqual(class_balanced.weights_config(v), [0.5, 1.5])
    v.assign([2.0, 3.0])  # the value when saved
    self.assertEqual(class_balanced.weights_config(v), [2.0, 3.0])
    self.assertEqual(class_balanced.weights_config(np.array([1, 2])), [1.0, 2.0])
    self.assertIsInstance(class_balanced.weights_config(np.array([1, 2]))[0], float)
    self.assertIsNone(class_balanced.weights_config(None))
    self.assertIsNone(class_balanced.weights_config(lambda: v))

  def test_check_weights(self):
    class_balanced.check_weights([0.0, 2.0], 2)
    with self.assertRaisesRegex(ValueError, "2 finite numbers >= 0"):
      class_balanced.check_weights([-1.0, 2.0], 2)

  def test_targets(self):
    self.assertAllEqual(class_balanced.as_targets([2, 0], 3), [[0, 0, 1], [1, 0, 0]])
    self.assertAllEqual(class_balanced.as_targets([[2], [0]], 3), [[0, 0, 1], [1, 0, 0]])
    soft = [[0.2, 0.8, 0.0]]
    self.assertAllClose(class_balanced.as_targets(soft, 3), soft)


if __name__ == "__main__":
  tf.test.main()
