"""Menon et al.'s synthetic experiment: the closed forms, and the bound issue 11 sets.

The closed-form balanced error of a linear rule is checked against a Monte Carlo
estimate, the Bayes formula against a brute-force scan over linear rules, and the
experiment on three seeds: the logit-adjusted loss within 0.005 of the Bayes balanced
error, ERM worse by more than 0.05 (it measures about 0.10 worse), post-hoc
adjustment (tau = 1) equal to the logit-adjusted loss within 1e-6 (for an affine model
the two coincide exactly; they measure 1e-10 apart), post-hoc with tau chosen on a
validation sample within 0.005 of Bayes.
"""

import contextlib
import io
import math

import numpy as np
import tensorflow as tf

from recipes.methods import losses
from recipes.reproduce import menon_synthetic as ms
from tricks import logit_adjustment

MEANS = ((-1.0, -1.0), (1.0, 1.0))


class ClosedFormTest(tf.test.TestCase):

  def test_balanced_error_matches_monte_carlo(self):
    rng = np.random.default_rng(7)
    n = 400_000  # per class: the estimate's standard error is at most 0.0008
    for means, sigma, w, c in [
        (MEANS, 1.0, (1.0, 1.0), 0.0),
        (MEANS, 1.0, (0.3, 2.0), -1.5),  # tilted and shifted
        (((0.0, 0.0), (2.0, 1.0)), 1.5, (-0.5, 1.0), 0.7),  # a poor rule, other means
    ]:
      errors = []
      for label, mu in enumerate(means):
        x = np.asarray(mu) + sigma * rng.standard_normal((n, 2))
        predicted = x @ np.asarray(w) + c > 0
        errors.append(np.mean(predicted != bool(label)))
      estimate = 0.5 * sum(errors)
      exact = ms.balanced_error(w, c, means, sigma)
      self.assertAllClose(exact, estimate, atol=0.003, msg=f"{means} {w} {c}")
    self.assertEqual(ms.balanced_error((0.0, 0.0), 1.0, MEANS, 1.0), 0.5)

  def test_normal_cdf(self):
    self.assertAllClose(ms.normal_cdf(0.0), 0.5)
    self.assertAllClose(ms.normal_cdf(1.959963984540054), 0.975, atol=1e-12)
    self.assertAllClose(ms.normal_cdf(-8.0), 6.22096057427178e-16, rtol=1e-8)

  def test_bayes_error_is_the_best_linear_rule(self):
    """No rule of a direction and threshold scan beats the formula, and the best
    comes within the scan's resolution of it."""
    for means, sigma in [(MEANS, 1.0), (((0.0, 0.0), (2.0, 1.0)), 1.5)]:
      bayes = ms.bayes_balanced_error(means, sigma)
      best = min(
          ms.balanced_error((math.cos(a), math.sin(a)), c, means, sigma)
          for a in np.linspace(0.0, 2 * math.pi, 721)
          for c in np.linspace(-4.0, 4.0, 161))
      self.assertGreaterEqual(best, bayes - 1e-12)
      self.assertLess(best - bayes, 2e-4)
      w, c = ms.bayes_rule(means)
      self.assertAllClose(ms.balanced_error(w, c, means, sigma), bayes, atol=1e-12)
    # Phi(-|mu_1 - mu_0| / (2 sigma)) = Phi(-sqrt(2)) in the paper's setup.
    self.assertAllClose(ms.bayes_balanced_error(MEANS, 1.0), 0.07864960352514258)

  def test_balanced_softmax_is_the_logit_adjusted_loss(self):
    """Ren et al.'s cross-entropy of f(x) + log(n_y) equals LogitAdjustedLoss(tau=1)."""
    counts = [950, 50]
    logits = tf.constant([[0.3, -1.2], [2.0, 0.5], [-0.4, 0.1]])
    labels = tf.constant([0, 1, 1])
    ren = tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=labels, logits=logits + np.log(counts).astype(np.float32))
    ours = logit_adjustment.LogitAdjustedLoss(counts, tau=1.0)(labels, logits)
    self.assertAllClose(ren, ours, rtol=1e-6)


class ExperimentTest(tf.test.TestCase):

  def test_three_seeds_meet_the_bound(self):
    setup = ms.Setup()
    bayes = ms.bayes_balanced_error(setup.means, setup.sigma)
    for seed in (0, 1, 2):
      r = ms.run_seed(seed, setup)
      print(f"seed {seed}: " + ", ".join(f"{k} {r[k]:.4f}" for k, _ in ms.ROWS)
            + f", Bayes {bayes:.4f}")
      self.assertBetween(r["la_loss"] - bayes, 0.0, 0.005, msg=f"seed {seed}")
      self.assertGreater(r["erm"] - bayes, 0.05, msg=f"seed {seed}")
      self.assertLess(abs(r["post_hoc"] - r["la_loss"]), 1e-6, msg=f"seed {seed}")
      self.assertLess(r["post_hoc_val"] - bayes, 0.005, msg=f"seed {seed}")
      self.assertAllClose(r["balanced_softmax"], r["la_loss"], atol=1e-6)

  def test_a_separating_fit_is_refused_however_newton_stopped(self):
    # Newton's method stopped after one step (tol as large as can be), as it does on a
    # CPU where the float32 loss underflows to 0: its rule already separates this
    # sample, so the loss has no minimiser, and the fit says so.
    features = np.array([[-1.0, -1.0], [-2.0, -1.0], [1.0, 1.0], [2.0, 1.0]], np.float32)
    labels = np.array([0, 0, 1, 1], np.int32)
    loss = losses.cross_entropy(class_counts=[2, 2])
    with self.assertRaisesRegex(ms.NoMinimiser, "classifies every training example"):
      ms.fit_linear(features, labels, loss, tol=1e9)
    # Not separable (a point of each class on the other side): a minimiser, found.
    w, c = ms.fit_linear(np.concatenate([features, [[1.5, 1.0], [-1.5, -1.0]]]),
                         np.array([0, 0, 1, 1, 0, 1], np.int32),
                         losses.cross_entropy(class_counts=[3, 3]))
    self.assertTrue(np.all(np.isfinite(w)) and np.isfinite(c))

  def test_command_line(self):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), self.assertRaises(SystemExit) as done:
      ms.cli(["menon_synthetic", "--seeds=4", "--train_size=3000", "--val_size=1000"])
    self.assertIn(done.exception.code, (None, 0))
    self.assertIn("| (b) logit-adjusted loss, tau = 1 | 0.0", out.getvalue())
    self.assertIn("| Bayes-optimal (closed form) | 0.0786 |", out.getvalue())
    for bad, says in [("--seeds=a,1", "--seeds"), ("--train_size=0", "train_size"),
                      ("--rare_prior=1", "--rare_prior"), ("--nonsense=1", "nonsense")]:
      err = io.StringIO()
      with contextlib.redirect_stderr(err), self.assertRaises(SystemExit) as done:
        ms.cli(["menon_synthetic", bad])
      self.assertEqual(done.exception.code, 2, bad)
      lines = err.getvalue().strip().splitlines()
      self.assertLen(lines, 1, err.getvalue())
      self.assertIn(says, lines[0])
    # A training sample with no rare example, and a linearly separable one (no
    # minimiser to fit): one line each, exit 2.
    for args, says in [(["--train_size=2", "--rare_prior=0.001"], "no example of a class"),
                       (["--seeds=1", "--train_size=6", "--rare_prior=0.4", "--val_size=50"],
                        "seed 1: the loss has no minimiser")]:
      err = io.StringIO()
      with contextlib.redirect_stderr(err), self.assertRaises(SystemExit) as done:
        ms.cli(["menon_synthetic", "--seeds=0"] + args)
      self.assertEqual(done.exception.code, 2, args)
      self.assertIn(says, err.getvalue())
      self.assertLen(err.getvalue().strip().splitlines(), 1)


if __name__ == "__main__":
  tf.test.main()
