"""benchmarks/stats.py against reference values that come from outside SciPy: printed
t tables, R's t.test on Student's sleep data, the binomial sums by hand, and a
simulation of the median interval's coverage."""

import math

from absl.testing import parameterized
import numpy as np
import tensorflow as tf

from benchmarks import stats

# Cushny and Peebles' sleep data, as Student (1908) analysed it (R's `sleep`): extra
# hours of sleep of 10 patients under two drugs.
DRUG1 = [0.7, -1.6, -0.2, -1.2, -0.1, 3.4, 3.7, 0.8, 0.0, 2.0]
DRUG2 = [1.9, 0.8, 1.1, 0.1, -0.1, 4.4, 5.5, 1.6, 4.6, 3.4]


class TTest(tf.test.TestCase, parameterized.TestCase):

  # Two-sided 95% critical values of Student's t (NIST/SEMATECH e-Handbook, table
  # 1.3.6.7.2, upper 0.025 column).
  @parameterized.parameters((1, 12.706), (2, 4.303), (3, 3.182), (4, 2.776),
                            (5, 2.571), (10, 2.228), (30, 2.042), (100, 1.984))
  def test_critical_values_match_the_printed_table(self, dof, value):
    self.assertAlmostEqual(stats.t_critical(dof), value, places=3)

  def test_paired_matches_r_on_students_sleep_data(self):
    # R 4.x: t.test(extra ~ group, data = sleep, paired = TRUE)
    #   t = -4.0621, df = 9, p-value = 0.002833
    #   95 percent confidence interval: -2.4598858 -0.7001142; mean difference -1.58
    c = stats.compare(DRUG1, DRUG2, paired=True)
    self.assertAlmostEqual(c.t, -4.0621, places=4)
    self.assertEqual(c.dof, 9)
    self.assertAlmostEqual(c.p, 0.002833, places=6)
    self.assertAllClose([c.low, c.high, c.difference], [-2.4598858, -0.7001142, -1.58])
    self.assertEqual(c.verdict, stats.BEHIND)
    self.assertEqual(stats.compare(DRUG2, DRUG1, paired=True).verdict, stats.AHEAD)

  def test_welch_matches_r_on_students_sleep_data(self):
    # R 4.x: t.test(extra ~ group, data = sleep)  (Welch)
    #   t = -1.8608, df = 17.776, p-value = 0.07939
    #   95 percent confidence interval: -3.3654832  0.2054832
    c = stats.compare(DRUG1, DRUG2, paired=False)
    self.assertAlmostEqual(c.t, -1.8608, places=4)
    self.assertAlmostEqual(c.dof, 17.776, places=3)
    self.assertAlmostEqual(c.p, 0.07939, places=5)
    self.assertAllClose([c.low, c.high], [-3.3654832, 0.2054832])
    self.assertEqual(c.verdict, stats.WITHIN_NOISE)  # the same data, unpaired

  @parameterized.parameters(0.3, 1.0, 2.5, 4.303, 9.0)
  def test_two_degrees_of_freedom_in_closed_form(self, t):
    """At 2 degrees of freedom Student's t has the CDF 1/2 + t / (2 sqrt(2 + t^2)), so
    three paired seeds with t statistic t have the two-sided p 1 - t / sqrt(2 + t^2)."""
    d = np.array([-1.0, 0.0, 1.0]) + t / np.sqrt(3)  # sample sd 1: t = mean * sqrt(3)
    c = stats.compare(d, np.zeros(3), paired=True)
    self.assertAlmostEqual(c.t, t)
    self.assertAlmostEqual(c.p, 1 - t / np.sqrt(2 + t * t))

  def test_three_seeds_two_standard_errors_is_not_enough(self):
    """The old rule ('beyond 2 standard errors') called this real; with 2 degrees of
    freedom the critical t is 4.30."""
    base = [0.80, 0.82, 0.84]
    method = [0.83, 0.84, 0.88]  # differences 0.03, 0.02, 0.04: t = 5.2
    self.assertEqual(stats.compare(method, base, paired=True).verdict, stats.AHEAD)
    c = stats.compare([0.81, 0.85, 0.87], base, paired=True)  # 0.01, 0.03, 0.03: t = 3.5
    self.assertGreater(abs(c.difference), 2 * c.standard_error)
    self.assertLess(abs(c.t), stats.t_critical(2))
    self.assertEqual(c.verdict, stats.WITHIN_NOISE)

  def test_square_root_sampling_on_the_digits_is_within_noise(self):
    """Issue 28's example: -0.036 with a standard error of 0.017 from 3 seeds a side
    (Welch's degrees of freedom about 3.4) has p about 0.12, not 'behind'."""
    a = [0.787 - 0.010, 0.787, 0.787 + 0.010]
    b = [0.823 - 0.028, 0.823, 0.823 + 0.028]
    c = stats.compare(a, b, paired=False)
    self.assertAlmostEqual(c.difference, -0.036, places=6)
    self.assertAlmostEqual(c.standard_error, 0.0172, places=4)
    self.assertGreater(c.p, 0.05)
    self.assertEqual(c.verdict, stats.WITHIN_NOISE)

  def test_compare_seeds_pairs_only_matching_seeds(self):
    a, b = {0: 0.9, 1: 0.8, 2: 0.85}, {0: 0.85, 1: 0.76, 2: 0.80}
    self.assertTrue(stats.compare_seeds(a, b).paired)
    self.assertFalse(stats.compare_seeds(a, {0: 0.85, 1: 0.76}).paired)

  def test_degenerate_cases(self):
    one = stats.compare([0.9], [0.8], paired=True)
    self.assertEqual(one.verdict, stats.NO_ESTIMATE)
    self.assertAlmostEqual(one.difference, 0.1)
    self.assertEqual(str(one), "+0.100: " + stats.NO_ESTIMATE)
    same = stats.compare([0.8, 0.9, 0.7], [0.8, 0.9, 0.7], paired=True)
    self.assertEqual((same.difference, same.p, same.verdict), (0.0, 1.0, stats.WITHIN_NOISE))
    shifted = stats.compare([0.81, 0.91, 0.71], [0.8, 0.9, 0.7], paired=True)
    self.assertEqual(shifted.verdict, stats.AHEAD)  # the same gain on every seed
    with self.assertRaisesRegex(ValueError, "as many values"):
      stats.compare([1, 2, 3], [1, 2], paired=True)
    # A NaN would make every figure NaN and the verdict "within noise": refused.
    for paired in (True, False):
      with self.assertRaisesRegex(ValueError, "finite values.*b has nan at run 1"):
        stats.compare([0.8, 0.9, 0.7], [0.8, math.nan, 0.7], paired=paired)
      with self.assertRaisesRegex(ValueError, "a has inf at run 0"):
        stats.compare([math.inf, 0.9, 0.7], [0.8, 0.9, 0.7], paired=paired)
    with self.assertRaisesRegex(ValueError, "finite values"):
      stats.compare_by_cluster([0.8, 0.9, 0.7, 0.6], [0.7, 0.8, math.nan, 0.5], [0, 0, 1, 1])

  def test_by_cluster_runs_over_the_draws_means(self):
    """Three draws of three seeds whose draws' mean differences are 0.1, 0.2 and 0.3:
    over the draws the mean is 0.2, sd 0.1, t = 2 sqrt(3) with 2 df, so (closed form
    above) p = 1 - t / sqrt(2 + t^2) = 1 - sqrt(12/14), and the interval 0.2 -+ 4.303
    x 0.1 / sqrt(3) holds 0. Over the nine runs as independent (8 df) the same
    differences, spread 0.01 within a draw, are far beyond the noise."""
    draws = [0, 0, 0, 1, 1, 1, 2, 2, 2]
    within = [-0.01, 0.0, 0.01]
    diffs = [m + w for m in (0.1, 0.2, 0.3) for w in within]
    base = [0.5, 0.6, 0.7, 0.4, 0.5, 0.6, 0.55, 0.65, 0.75]
    method = [b + d for b, d in zip(base, diffs)]
    c = stats.compare_by_cluster(method, base, draws)
    self.assertEqual((c.n, c.dof, c.paired), (3, 2, True))
    self.assertAlmostEqual(c.difference, 0.2)
    self.assertAlmostEqual(c.t, 2 * math.sqrt(3))
    self.assertAlmostEqual(c.p, 1 - math.sqrt(12 / 14))
    self.assertAllClose([c.low, c.high], [0.2 - 4.302653 * 0.1 / math.sqrt(3),
                                          0.2 + 4.302653 * 0.1 / math.sqrt(3)])
    self.assertEqual(c.verdict, stats.WITHIN_NOISE)
    self.assertEqual(stats.compare(method, base, paired=True).verdict, stats.AHEAD)
    # One run a cluster is the run-level rule; the order of the runs does not matter.
    self.assertEqual(stats.compare_by_cluster(DRUG1, DRUG2, list(range(10))),
                     stats.compare(DRUG1, DRUG2, paired=True))
    order = [8, 0, 4, 2, 6, 1, 3, 7, 5]
    shuffled = stats.compare_by_cluster([method[i] for i in order],
                                        [base[i] for i in order],
                                        [draws[i] for i in order])
    self.assertAlmostEqual(shuffled.p, c.p)
    with self.assertRaisesRegex(ValueError, "one cluster a pair"):
      stats.compare_by_cluster(method, base, draws[:-1])

  def test_string_says_what_the_plus_minus_is(self):
    c = stats.compare(DRUG2, DRUG1, paired=True)
    self.assertEqual(str(c), "+1.580 ± 0.389 (paired t, 9 df, p = 0.0028): ahead")


class MedianIntervalTest(tf.test.TestCase, parameterized.TestCase):

  # j and the coverage 1 - 2 P(B(n, 1/2) <= j - 1), the binomial sums by hand:
  # n = 6: 1 - 2/64; n = 10: 1 - 2 (1 + 10)/1024; n = 16: 1 - 2 (1 + 16 + 120 + 560)/65536.
  @parameterized.parameters((5, 0, 0.0), (6, 1, 1 - 2 / 64), (10, 2, 1 - 22 / 1024),
                            (16, 4, 1 - 2 * 697 / 65536))
  def test_rank_and_coverage(self, n, j, coverage):
    self.assertEqual(stats.order_statistic_rank(n)[0], j)
    self.assertAlmostEqual(stats.order_statistic_rank(n)[1], coverage)

  def test_interval_from_order_statistics(self):
    ours = np.ones(10)
    theirs = np.array([1.5, 1.1, 1.3, 1.2, 1.9, 1.4, 1.0, 1.6, 1.7, 1.8])
    r = stats.ratio_interval(ours, theirs)
    self.assertAlmostEqual(r.ratio, 1.45)
    self.assertEqual((r.low, r.high), (1.1, 1.8))  # the 2nd smallest and 2nd largest
    self.assertEqual(r.verdict, stats.AHEAD)
    self.assertEqual(str(r), "1.45x [1.10, 1.80]")
    few = stats.ratio_interval(ours[:5], theirs[:5])
    self.assertEqual(few.verdict, stats.TOO_FEW_ROUNDS)
    self.assertTrue(math.isnan(few.low))
    self.assertEqual(stats.ratio_interval([1, 1, 1, 1, 1, 1],
                                          [0.9, 1.1, 1.0, 1.2, 0.95, 1.05]).verdict,
                     stats.PARITY)

  @parameterized.parameters(6, 8, 11, 16)
  def test_coverage_by_simulation(self, n):
    """Rounds drawn from a skewed distribution whose median is known: the interval
    holds the true median ratio in at least 95% of 20,000 simulated benchmarks
    (binomial standard error of the estimate about 0.0015)."""
    rng = np.random.default_rng(n)
    true_median = 1.3
    hits = 0
    sims = 20000
    for _ in range(sims):
      ours = rng.lognormal(0.0, 0.1, n)
      theirs = ours * true_median * rng.lognormal(0.0, 0.2, n)  # median ratio 1.3
      r = stats.ratio_interval(ours, theirs)
      hits += r.low <= true_median <= r.high
    self.assertGreaterEqual(hits / sims, 0.95 - 3 * 0.0015)
    self.assertAlmostEqual(hits / sims, stats.order_statistic_rank(n)[1], delta=0.01)

  def test_a_figures_median_and_noise(self):
    # Ten rounds: j = 2, the 2nd smallest and 2nd largest; noise the half-width over
    # the median.
    seconds = [0.030, 0.021, 0.025, 0.022, 0.029, 0.024, 0.020, 0.026, 0.027, 0.028]
    m = stats.median_interval(seconds)
    self.assertAlmostEqual(m.median, 0.0255)
    self.assertEqual((m.low, m.high, m.rounds), (0.021, 0.029, 10))
    self.assertAlmostEqual(m.noise, (0.029 - 0.021) / 2 / 0.0255)
    self.assertEqual(m.format(scale=1e3), "25.5 [21.0, 29.0]")
    self.assertEqual(m.as_dict()["noise"], round(m.noise, 4))
    self.assertEqual(stats.noise_text([m.noise, 0.01]), f"{m.noise:.1%}")
    self.assertAlmostEqual(stats.largest_noise([seconds, [1.0] * 6]), round(m.noise, 4))
    few = stats.median_interval(seconds[:5])
    self.assertTrue(math.isnan(few.noise))
    self.assertEqual(few.as_dict()["noise"], None)  # JSON has no NaN
    self.assertEqual(few.format(scale=1e3), "25.0 [no 95% interval from 5 rounds]")
    self.assertEqual(stats.noise_text([few.as_dict()["noise"], 0.01]), "n/a")
    self.assertIsNone(stats.largest_noise([seconds, seconds[:5]]))
    for bad in ([], [1.0, math.nan], [[1.0]]):
      with self.assertRaisesRegex(ValueError, "one finite value a round"):
        stats.median_interval(bad)

  def test_ratio_is_the_median_interval_of_the_rounds_ratios(self):
    ours = np.array([1.0, 2.0, 1.0, 2.0, 1.0, 2.0, 1.0])
    theirs = ours * np.array([1.3, 1.1, 1.2, 1.6, 1.4, 1.5, 1.25])
    r, m = stats.ratio_interval(ours, theirs), stats.median_interval(theirs / ours)
    self.assertEqual((r.ratio, r.low, r.high, r.coverage), (m.median, m.low, m.high,
                                                            m.coverage))
    self.assertEqual(stats.ratio_text(r.as_dict()), str(r))
    self.assertEqual(str(r), "1.30x [1.10, 1.60]")


class HolmTest(tf.test.TestCase):

  def test_the_textbook_example(self):
    # Holm-Bonferroni's usual worked example (four hypotheses, alpha 0.05): p = 0.01,
    # 0.04, 0.03, 0.005 step down to 0.03, 0.06, 0.06, 0.02: H1 and H4 rejected.
    adjusted = stats.holm([0.01, 0.04, 0.03, 0.005])
    self.assertAllClose(adjusted, [0.03, 0.06, 0.06, 0.02])
    self.assertEqual([a < 0.05 for a in adjusted], [True, False, False, True])

  def test_five_methods_against_one_baseline(self):
    # The flagship's five verdicts against cross-entropy: the smallest p, 0.0101, needs
    # 0.0100 under Holm over five, so none rejects (issue 58).
    adjusted = stats.holm([0.038, 0.0101, 0.023, 0.2, 0.06])
    self.assertAllClose(min(adjusted), 0.0505)
    self.assertTrue(all(a >= 0.05 for a in adjusted))

  def test_holm_verdicts_at_the_family_wise_level(self):
    """p = 0.001 (a difference below 0), 0.04 and 0.3 adjust to 0.003, 0.08, 0.3 (Holm
    1979): only the first rejects at 95%, as "behind"; 0.04 alone would have been
    "ahead". A comparison without an estimate keeps its words and stays out."""
    def comparison(difference, p):
      return stats.Comparison(difference, 0.1, 1.0, 2.0, p, 0.0, 1.0, True, 3, 0.95,
                              stats.AHEAD if p < 0.05 else stats.WITHIN_NOISE)
    none = stats.compare([0.5], [0.4], paired=True)
    found = stats.holm_verdicts([comparison(-0.2, 0.001), comparison(0.1, 0.04), none,
                                 comparison(0.1, 0.3)])
    self.assertAllClose([p for p, _ in found], [0.003, 0.08, float("nan"), 0.3])
    self.assertEqual([v for _, v in found], [stats.BEHIND, stats.WITHIN_NOISE,
                                            stats.NO_ESTIMATE, stats.WITHIN_NOISE])
    self.assertEqual(stats.format_p(0.0505, 3), "0.0505")
    self.assertEqual(stats.format_p(0.0505), "0.051")

  def test_monotone_capped_and_nan_left_out(self):
    self.assertAllClose(stats.holm([0.4, 0.3]), [0.6, 0.6])  # 0.4 x 1 < 0.3 x 2: not down
    self.assertEqual(stats.holm([0.6, 0.7, 0.8]), [1.0, 1.0, 1.0])
    got = stats.holm([0.02, float("nan"), 0.04])
    self.assertAllClose([got[0], got[2]], [0.04, 0.04])
    self.assertTrue(math.isnan(got[1]))
    self.assertEqual(stats.holm([]), [])
    with self.assertRaisesRegex(ValueError, r"lie in \[0, 1\]"):
      stats.holm([1.5])


if __name__ == "__main__":
  tf.test.main()
