"""The benchmarks' shared timing: interleaving, the noise estimate, and ratio
intervals."""

from absl.testing import parameterized
import tensorflow as tf

from benchmarks import timing


class TimingTest(tf.test.TestCase, parameterized.TestCase):

  def test_interleave_alternates_order_after_an_untimed_chunk(self):
    calls = []
    runs = {name: (lambda name=name: calls.append(name) or 1.0) for name in "ab"}
    times = timing.interleave(runs, 3)
    self.assertEqual("".join(calls), "ab" + "ab" + "ba" + "ab")
    self.assertEqual(times, {"a": [1.0] * 3, "b": [1.0] * 3})
    self.assertAlmostEqual(timing.half_spread([1.0, 1.0, 2.0, 2.0]), 2 / 3)

  def test_two_rounds_interval_is_their_two_ratios(self):
    """Ratios 0.9 and 1.1: a resampled median is 0.9 (1/4 of draws), 1.0 (1/2) or 1.1
    (1/4), so the 2.5% and 97.5% quantiles are 0.9 and 1.1."""
    interval = timing.ratio_interval(ours=[2.0, 1.0], theirs=[1.8, 1.1])
    self.assertAllClose([interval.ratio, interval.low, interval.high],
                        [1.0, 0.9, 1.1])
    self.assertEqual((interval.smallest, interval.largest, interval.rounds),
                     (0.9, 1.1, 2))

  def test_three_rounds_interval(self):
    """Per-round ratios 1.0, 1.2, 1.5: each extreme is the resampled median in 7/27 of
    draws (two or three of the three draws on it), beyond the 2.5% tails."""
    interval = timing.ratio_interval([2.0, 2.0, 2.0], [2.0, 2.4, 3.0])
    self.assertAllClose([interval.ratio, interval.low, interval.high], [1.2, 1.0, 1.5])
    self.assertEqual(interval.verdict, "no verdict (fewer than 6 rounds)")

  @parameterized.parameters(
      # Six rounds (the fewest with a verdict); the resampled median lies between the
      # third and fourth smallest ratios of a draw.
      ([1.1, 1.1, 1.2, 1.2, 1.3, 1.3], "ahead"),  # every median >= 1.1
      ([0.7, 0.7, 0.8, 0.8, 0.9, 0.9], "behind"),  # every median <= 0.9
      # A median below 1.0 needs four of six draws on 0.9: P = 0.089 > 2.5%; above 1.0
      # likewise: the interval holds 1.0.
      ([0.9, 0.9, 1.0, 1.1, 1.2, 1.2], "parity (interval includes 1.0)"))
  def test_verdict_from_the_interval(self, ratios, verdict):
    interval = timing.ratio_interval([1.0] * 6, ratios)
    self.assertEqual(interval.verdict, verdict)
    self.assertEqual(interval.as_dict()["verdict"], verdict)

  def test_printed_form(self):
    self.assertEqual(str(timing.ratio_interval([1.0] * 3, [1.1, 1.2, 1.3])),
                     "1.20x [1.10, 1.30]")

  def test_identical_rounds_have_no_width(self):
    interval = timing.ratio_interval([0.5] * 8, [0.6] * 8)
    self.assertAllClose([interval.low, interval.high], [1.2, 1.2])

  def test_unequal_rounds_are_refused(self):
    with self.assertRaisesRegex(ValueError, "equally many rounds"):
      timing.ratio_interval([1.0, 1.0], [1.0])


if __name__ == "__main__":
  tf.test.main()
