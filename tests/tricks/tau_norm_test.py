"""The tau-normalised classifier (Kang et al. 2020, Sec. 4, as their tau_norm.py's
`pnorm`) against the formula computed here with explicit loops, and tau's choice on a
validation split by balanced accuracy."""

import math

import numpy as np
import tensorflow as tf

from tricks import tau_norm


def reference_pnorm(weight_rows, p):
  """Their `pnorm` on a PyTorch-layout weight [classes, features], with Python loops."""
  out = []
  for row in weight_rows:
    norm = math.sqrt(sum(float(v) ** 2 for v in row))
    out.append([float(v) / norm ** p for v in row])
  return np.array(out)


class TauNormTest(tf.test.TestCase):

  def test_columns_divided_by_their_norm_to_the_tau(self):
    rng = np.random.default_rng(0)
    kernel = rng.normal(size=(6, 4)) * np.array([3.0, 1.0, 0.2, 0.05])  # [features, K]
    for tau in (0.0, 0.3, 1.0, 1.7, 2.0):
      want = reference_pnorm(kernel.T, tau).T  # their rows are our columns
      self.assertAllClose(tau_norm.normalize(kernel, tau), want, rtol=1e-12, atol=0)
    self.assertAllClose(tau_norm.normalize(kernel, 0.0), kernel)
    unit = tau_norm.normalize(kernel, 1.0)
    self.assertAllClose(np.linalg.norm(unit, axis=0), np.ones(4))

  def test_logits_drop_the_bias(self):
    rng = np.random.default_rng(1)
    kernel, features = rng.normal(size=(5, 3)), rng.normal(size=(7, 5))
    tau = 0.6
    want = np.array([[sum(f[i] * kernel[i, j] for i in range(5)) /
                      math.sqrt(sum(kernel[i, j] ** 2 for i in range(5))) ** tau
                      for j in range(3)] for f in features])
    self.assertAllClose(tau_norm.logits(features, kernel, tau), want, rtol=1e-12)

  def test_grid_is_their_sweep(self):
    self.assertEqual(len(tau_norm.GRID), 21)
    self.assertAllClose(tau_norm.GRID, np.linspace(0, 2, 21))

  def test_balanced_accuracy_is_the_mean_per_class_accuracy(self):
    labels = [0, 0, 0, 0, 1, 2, 2]
    predictions = [0, 0, 0, 1, 1, 0, 2]
    self.assertAlmostEqual(tau_norm.balanced_accuracy(labels, predictions, 4),
                           (3 / 4 + 1 + 1 / 2) / 3)

  def test_choose_tau_picks_the_best_balanced_accuracy(self):
    # Class 0's weight is long (a head class), class 1's short: features on the
    # diagonal. tau = 0 predicts class 0 for everything; tau >= 1 separates them.
    kernel = np.array([[10.0, 0.0], [0.0, 1.0]])
    features = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.5, 1.0]])
    labels = np.array([0, 0, 1, 1])
    tau, scores = tau_norm.choose_tau(features, labels, kernel)
    for t, score in scores.items():  # class 1's example (0.5, 1): 5 * 10^-t vs 1
      want = (1 + (0.5 + 0.5 * (5 * 10 ** -t < 1))) / 2 if t > 0 else 0.75
      self.assertAlmostEqual(score, want, msg=f"tau {t}")
    self.assertAlmostEqual(tau, 0.7)  # the first tau with 5 * 10^-tau < 1
    self.assertEqual(max(scores.values()), 1.0)


if __name__ == "__main__":
  tf.test.main()
