"""The logit-adjusted loss against Menon et al. 2021, eq. (10), in NumPy."""

from absl.testing import parameterized
import numpy as np
import tensorflow as tf

from tricks import logit_adjustment


def numpy_loss(labels, logits, counts, tau):
  adjusted = logits + tau * np.log(np.asarray(counts) / np.sum(counts))
  adjusted = adjusted - adjusted.max(axis=1, keepdims=True)
  log_softmax = adjusted - np.log(np.exp(adjusted).sum(axis=1, keepdims=True))
  return -log_softmax[np.arange(len(labels)), labels]


class LogitAdjustmentTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.product(tau=[0.0, 1.0, 1.5], dtype=[tf.float32, tf.bfloat16])
  def test_matches_formula(self, tau, dtype):
    rng = np.random.default_rng(0)
    counts = [500, 120, 30, 5]
    logits = rng.normal(size=(6, 4)).astype(np.float32)
    labels = np.array([0, 1, 2, 3, 3, 0])
    loss = logit_adjustment.LogitAdjustedLoss(counts, tau=tau)
    got = tf.function(loss)(labels, tf.cast(logits, dtype))
    want = numpy_loss(labels, tf.cast(tf.cast(logits, dtype), tf.float32).numpy(), counts, tau)
    self.assertAllClose(got, want, rtol=1e-5)

  @parameterized.parameters(False, True)
  def test_soft_targets_are_the_expected_loss(self, graph):
    """MixUp targets t: -sum_k t_k log softmax(f + tau log pi)_k = sum_k t_k loss(k)."""
    rng = np.random.default_rng(1)
    counts = [50, 20, 5]
    logits = rng.normal(size=(4, 3)).astype(np.float32)
    targets = rng.dirichlet(np.ones(3), size=4).astype(np.float32)
    loss = logit_adjustment.LogitAdjustedLoss(counts, tau=1.0)
    got = (tf.function(loss) if graph else loss)(targets, logits)
    per_class = np.stack([numpy_loss(np.full(4, k), logits, counts, 1.0)
                          for k in range(3)], axis=1)
    self.assertAllClose(got, (targets * per_class).sum(axis=1), rtol=1e-5)

  def test_tau_zero_is_cross_entropy(self):
    logits = tf.constant([[2.0, -1.0, 0.5]])
    loss = logit_adjustment.LogitAdjustedLoss([9, 3, 1], tau=0.0)([1], logits)
    want = tf.nn.sparse_softmax_cross_entropy_with_logits([1], logits)
    self.assertAllClose(loss, want)

  def test_rare_classes_cost_more_when_not_predicted(self):
    # Same logits, equal scores: the adjusted loss is higher for the rare label.
    loss = logit_adjustment.LogitAdjustedLoss([100, 1], tau=1.0)
    per_example = loss([0, 1], tf.zeros([2, 2]))
    self.assertLess(float(per_example[0]), float(per_example[1]))

  def test_rejects_empty_class(self):
    with self.assertRaisesRegex(ValueError, "positive training count for every class"):
      logit_adjustment.LogitAdjustedLoss([10, 0, 3])


if __name__ == "__main__":
  tf.test.main()
