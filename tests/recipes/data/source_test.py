"""Source helpers: selecting examples by index and holding out a balanced split."""

import numpy as np
import tensorflow as tf

from recipes.data import source as source_lib
from recipes.errors import ConfigError


class SourceTest(tf.test.TestCase):

  def test_select_keeps_the_indexed_examples_in_order(self):
    dataset = tf.data.Dataset.range(10).map(lambda i: i * 10)
    got = [int(x) for x in source_lib.select(dataset, [2, 5, 7], 10)]
    self.assertEqual(got, [20, 50, 70])
    self.assertLen(list(source_lib.select(dataset, None, 10)), 10)

  def test_select_refuses_an_order_or_repeats_it_cannot_give(self):
    dataset = tf.data.Dataset.range(10)
    for indices in ([7, 2, 5], [2, 2, 5]):  # it would yield [2, 5, 7] and [2, 5]
      with self.assertRaisesRegex(ValueError, "ascending, distinct indices"):
        source_lib.select(dataset, indices, 10)

  def test_balanced_holdout(self):
    labels = np.repeat(np.arange(3), [5, 6, 7])
    train, held = source_lib.balanced_holdout(labels, 2, seed=0)
    self.assertEqual(np.bincount(labels[held]).tolist(), [2, 2, 2])
    self.assertEqual(sorted(np.concatenate([train, held]).tolist()), list(range(18)))
    again, _ = source_lib.balanced_holdout(labels, 2, seed=0)
    self.assertAllEqual(train, again)  # a function of the seed
    with self.assertRaisesRegex(ConfigError, "class 0 has 5 examples, too few to hold out "
                                "5; lower Task.validation_per_class"):
      source_lib.balanced_holdout(labels, 5, 0, "Task.validation_per_class")


if __name__ == "__main__":
  tf.test.main()
