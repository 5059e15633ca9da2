"""Post-hoc logit adjustment (Menon et al. 2021, eq. 9) and tau chosen on validation."""

import numpy as np
import tensorflow as tf

from tricks import posthoc


class AdjustTest(tf.test.TestCase):

  def test_subtracts_tau_log_priors(self):
    counts = [90, 9, 1]
    logits = np.array([[1.0, 0.5, -0.5]], np.float32)
    got = posthoc.adjust(logits, counts, tau=1.5)
    want = logits - 1.5 * np.log(np.array([0.9, 0.09, 0.01]))
    self.assertAllClose(got, want, rtol=1e-6)
    self.assertAllEqual(posthoc.adjust(logits, counts, tau=0.0), logits)

  def test_rejects_wrong_class_count(self):
    with self.assertRaisesRegex(ValueError, r"logits must be \[examples, 3\]"):
      posthoc.adjust(np.zeros([2, 2]), [3, 2, 1], 1.0)


class ChooseTauTest(tf.test.TestCase):

  def test_constructed_validation_set(self):
    """Two classes, counts 9:1: the adjusted rule predicts 0 iff f_0 - f_1 > tau log 9
    (2.197 tau). Class-1 margins 1.5 and 2.0 are right from tau >= 0.91; class-0 margins
    3.0 and 5.0 stay right below tau 1.37 and 2.28. Balanced accuracy over the grid
    0, 0.5, 1, 1.5, 2 is 0.5, 0.5, 1.0, 0.75, 0.75: tau = 1."""
    margins = np.array([3.0, 5.0, 1.5, 2.0])
    labels = np.array([0, 0, 1, 1])
    logits = np.stack([margins, np.zeros(4)], axis=1)
    counts = [9, 1]
    taus = [0.0, 0.5, 1.0, 1.5, 2.0]
    for tau, want in zip(taus, [0.5, 0.5, 1.0, 0.75, 0.75]):
      predictions = posthoc.adjust(logits, counts, tau).argmax(axis=1)
      self.assertAllClose(posthoc.balanced_accuracy(predictions, labels), want)
    self.assertEqual(posthoc.choose_tau(logits, labels, counts, taus), 1.0)
    # Grid order does not matter.
    self.assertEqual(posthoc.choose_tau(logits, labels, counts, taus[::-1]), 1.0)

  def test_ties_go_to_the_smallest_tau(self):
    logits = np.array([[2.0, 0.0], [0.0, 2.0]], np.float32)
    self.assertEqual(posthoc.choose_tau(logits, [0, 1], [2, 1], [0.5, 0.0, 0.25]), 0.0)

  def test_bayes_posterior_logits_choose_tau_near_one(self):
    """f = log p(y | x) under the training prior (Gaussian classes): eq. 8 says tau = 1
    maximises balanced accuracy; a large validation sample finds it within a step."""
    rng = np.random.default_rng(0)
    prior = np.array([0.95, 0.05])
    means = np.array([-1.0, 1.0])

    def sample(n):
      y = np.repeat([0, 1], n // 2)  # a balanced validation split
      x = rng.normal(means[y], 1.0)
      log_lik = -0.5 * (x[:, None] - means[None, :]) ** 2
      return log_lik + np.log(prior), y

    logits, labels = sample(200_000)
    tau = posthoc.choose_tau(logits, labels, [950, 50], np.arange(0.0, 2.01, 0.1))
    self.assertAllClose(tau, 1.0, atol=0.1 + 1e-9)

  def test_balanced_accuracy_by_hand(self):
    # Class 0: 2 of 3 right, class 2: 1 of 1 right -> (2/3 + 1) / 2.
    self.assertAllClose(posthoc.balanced_accuracy([0, 0, 1, 2], [0, 0, 0, 2]), 5 / 6)

  def test_rejects_bad_input(self):
    with self.assertRaisesRegex(ValueError, "at least one tau"):
      posthoc.choose_tau(np.zeros([1, 2]), [0], [1, 1], [])
    with self.assertRaisesRegex(ValueError, "same examples"):
      posthoc.choose_tau(np.zeros([2, 2]), [0], [1, 1], [1.0])


if __name__ == "__main__":
  tf.test.main()
