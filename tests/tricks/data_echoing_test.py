"""Data echoing against Choi et al. 2019's definition: e copies per element on average."""

from absl.testing import parameterized
import numpy as np
import tensorflow as tf

from tricks import data_echoing


class DataEchoingTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.parameters(1, 2, 3)
  def test_integer_factor_repeats_each_element(self, factor):
    ds = data_echoing.echo(tf.data.Dataset.range(5), factor)
    self.assertEqual(list(ds.as_numpy_iterator()), list(np.repeat(np.arange(5), factor)))

  def test_fractional_factor_averages_to_it(self):
    n = 4000
    ds = data_echoing.echo(tf.data.Dataset.range(n), 1.5, seed=7)
    counts = np.bincount(list(ds.as_numpy_iterator()), minlength=n)
    self.assertTrue(set(np.unique(counts)) <= {1, 2})
    # Binomial(4000, 0.5) extra copies: 3 sigma is about 95.
    self.assertAllClose(counts.sum(), 1.5 * n, atol=100)
    self.assertEqual(data_echoing.echoed_count(n, 1.5), 6000)
    again = np.bincount(list(data_echoing.echo(tf.data.Dataset.range(n), 1.5, seed=7)
                             .as_numpy_iterator()), minlength=n)
    self.assertAllEqual(counts, again)  # seeded: the same echo every build

  def test_tuples_and_batches(self):
    ds = tf.data.Dataset.from_tensor_slices((np.arange(4), np.arange(4) * 10)).batch(2)
    out = list(data_echoing.echo(ds, 2).as_numpy_iterator())
    self.assertLen(out, 4)
    self.assertAllEqual(out[0][0], out[1][0])
    self.assertAllEqual(out[2][1], [20, 30])

  def test_rejects_factor_below_one(self):
    with self.assertRaisesRegex(ValueError, "echo factor must be >= 1"):
      data_echoing.echo(tf.data.Dataset.range(2), 0.5)


if __name__ == "__main__":
  tf.test.main()
