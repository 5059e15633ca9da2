"""recipes/nonfinite.py: the rollback policy (at most `limit` retries in a row, the
count restarting once the run saves past the checkpoint it went back to), the data
order's seed, and the finite check."""

import numpy as np
import tensorflow as tf

from recipes import nonfinite
from recipes.errors import Diverged


def bad(step=7, epoch=1):
  return nonfinite.NonFinite(step, epoch, loss=float("nan"))


class RollbacksTest(tf.test.TestCase):

  def test_limit_in_a_row_then_diverged(self):
    policy = nonfinite.RollbackPolicy(limit=2)
    for expected in (1, 2):
      policy.count_one(bad(), "ckpt-10")
      policy.went_back_to("ckpt-10")
      self.assertEqual(policy.in_a_row, expected)
    with self.assertRaisesRegex(Diverged, r"^training diverged at step 7 \(epoch 2\): the "
                                r"loss is nan; the last good checkpoint is ckpt-10 \(after 2 "
                                r"retries on fresh data orders\)"):
      policy.count_one(bad(), "ckpt-10")
    self.assertEqual(policy.count, 2)

  def test_a_checkpoint_past_the_rollback_starts_a_new_count(self):
    policy = nonfinite.RollbackPolicy(limit=1)
    policy.count_one(bad(), "ckpt-10")
    policy.went_back_to("ckpt-10")
    policy.count_one(bad(step=30), "ckpt-20")  # saved ckpt-20 since: a new divergence
    self.assertEqual((policy.in_a_row, policy.count), (1, 2))

  def test_no_retries(self):
    with self.assertRaisesRegex(Diverged, r"no retries: Runtime.nonfinite_retries = 0"):
      nonfinite.RollbackPolicy(limit=0).count_one(bad(), "ckpt-0")


class DetectionTest(tf.test.TestCase):

  def test_data_seed_moves_by_a_billion_a_rollback(self):
    self.assertEqual([nonfinite.data_seed(3, r) for r in range(3)],
                     [3, 1_000_000_003, 2_000_000_003])

  def test_first_non_finite_names_the_variable(self):
    good = tf.Variable([1.0, 2.0], name="good")
    steps = tf.Variable([1, 2], name="steps")  # integers are never checked
    inf = tf.Variable([1.0, np.inf], name="inf")
    nan = tf.Variable([np.nan], name="nan")
    self.assertIsNone(nonfinite.first_non_finite([good, steps]))
    self.assertEqual(nonfinite.first_non_finite([good, steps, inf, nan]),
                     ("inf:0", "inf"))
    with self.assertRaises(nonfinite.NonFinite) as caught:
      nonfinite.check_finite([nan], step=4, epoch=0)
    self.assertEqual((caught.exception.step, caught.exception.what),
                     (4, "weight 'nan:0' is nan"))

  def test_messages(self):
    self.assertEqual(nonfinite.NonFinite(1, 0, loss=2.0, grad_norm=float("inf")).what,
                     "the gradient norm is inf (loss 2)")


if __name__ == "__main__":
  tf.test.main()
