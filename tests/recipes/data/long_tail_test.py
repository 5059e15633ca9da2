"""The exponential long-tail profile n_i = floor(n_max * rho^(-i/(C-1)))."""

from absl.testing import parameterized
import numpy as np
import tensorflow as tf

from recipes.data import long_tail
from recipes.errors import ConfigError


class LongTailTest(tf.test.TestCase, parameterized.TestCase):

  def test_profile_cifar10_lt(self):
    # CIFAR-10-LT at rho = 100 (Cao et al. 2019): 5000 ... 50.
    self.assertEqual(long_tail.profile(5000, 10, 100),
                     [5000, 2997, 1796, 1077, 645, 387, 232, 139, 83, 50])

  @parameterized.parameters((500, 100, 100), (1280, 1000, 256), (108, 10, 100))
  def test_profile_formula_and_ratio(self, n_max, classes, rho):
    counts = long_tail.profile(n_max, classes, rho)
    want = [int(np.floor(n_max * rho ** (-i / (classes - 1)) + 1e-9))
            for i in range(classes)]
    self.assertEqual(counts, want)
    self.assertEqual(counts[0], n_max)
    self.assertEqual(counts[-1], int(np.floor(n_max / rho + 1e-9)))
    self.assertTrue(all(a >= b for a, b in zip(counts, counts[1:])))

  def test_select_draws_the_profile_from_each_class(self):
    labels = np.repeat(np.arange(5), 40)
    np.random.default_rng(0).shuffle(labels)
    indices = long_tail.LongTail(rho=10, seed=3).select(labels, 5)
    self.assertEqual(np.bincount(labels[indices]).tolist(), long_tail.profile(40, 5, 10))
    self.assertEqual(len(set(indices.tolist())), len(indices))
    self.assertAllEqual(indices, np.sort(indices))
    # Seeded: the same draw twice, another for another seed.
    self.assertAllEqual(indices, long_tail.LongTail(rho=10, seed=3).select(labels, 5))
    self.assertNotAllEqual(indices, long_tail.LongTail(rho=10, seed=4).select(labels, 5))

  def test_default_n_max_is_the_largest_the_pool_allows(self):
    # Class 0 has 30, class 2 only 4: n_max * 10^-1 <= 4 forces n_max = 40 > 30,
    # so class 0's 30 binds.
    counts = long_tail.LongTail(rho=10).counts([30, 30, 4])
    self.assertEqual(counts, long_tail.profile(30, 3, 10))
    # Here class 2 binds: n_max <= 2 * 10 = 20.
    self.assertEqual(long_tail.LongTail(rho=10).counts([50, 50, 2]), [20, 6, 2])

  def test_rho_is_lowered_to_what_the_data_allows(self):
    counts = long_tail.LongTail(rho=100).counts([20, 20, 20])
    self.assertEqual(counts, long_tail.profile(20, 3, 20))
    self.assertEqual(counts[-1], 1)

  def test_errors(self):
    with self.assertRaisesRegex(ConfigError, "rho must be a number >= 1"):
      long_tail.LongTail(rho=0.5)
    with self.assertRaisesRegex(ConfigError, r"classes \[1\] have no training examples"):
      long_tail.LongTail().counts([10, 0])
    with self.assertRaisesRegex(ConfigError, "n_max=500 asks for more examples"):
      long_tail.LongTail(rho=10, n_max=500).counts([100, 100])


if __name__ == "__main__":
  tf.test.main()
