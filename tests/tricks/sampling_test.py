"""Class-aware sampling (Kang et al. 2020, eqs. 1-2) against its formulas, and the
epoch draw's determinism, per-class cycling and deferral (DRS)."""

from absl.testing import parameterized
import numpy as np
import tensorflow as tf

from tricks import sampling

COUNTS = np.array([400, 100, 25, 9, 1])


def labels_of(counts):
  return np.repeat(np.arange(len(counts)), counts)


class SamplingTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.parameters(("instance", COUNTS / COUNTS.sum()),
                            ("class", np.full(5, 0.2)),
                            ("sqrt", np.sqrt(COUNTS) / np.sqrt(COUNTS).sum()))
  def test_probabilities_are_eq_1(self, kind, want):
    self.assertAllClose(sampling.Sampler(kind).probabilities(COUNTS, 0), want)

  def test_progressive_is_eq_2(self):
    sampler = sampling.Sampler("progressive", epochs=10)
    instance, balanced = COUNTS / COUNTS.sum(), np.full(5, 0.2)
    for t in (0, 3, 10, 12):
      w = min(t / 10, 1)
      self.assertAllClose(sampler.probabilities(COUNTS, t),
                          (1 - w) * instance + w * balanced)

  @parameterized.parameters("class", "sqrt", "progressive")
  def test_drawn_class_frequencies_follow_the_probabilities(self, kind):
    sampler = sampling.Sampler(kind, epochs=4)
    labels = labels_of(COUNTS)  # 535 examples an epoch
    drawn = np.concatenate([labels[sampler.epoch_order(labels, 5, 2, seed)]
                            for seed in range(40)])
    freq = np.bincount(drawn, minlength=5) / len(drawn)
    p = sampler.probabilities(COUNTS, 2)
    # Binomial standard error over 21400 draws: below 0.0035 for every class.
    self.assertAllClose(freq, p, atol=4 * np.sqrt(p * (1 - p) / len(drawn)).max())

  def test_a_class_cycles_through_its_examples_before_repeating(self):
    labels = labels_of(COUNTS)
    order = sampling.Sampler("class").epoch_order(labels, 5, 0, 7)
    self.assertLen(order, len(labels))
    rare = order[labels[order] == 3]  # 9 examples, about 107 draws: whole cycles first
    for start in range(0, len(rare) - 9 + 1, 9):
      self.assertEqual(sorted(rare[start:start + 9]), list(np.flatnonzero(labels == 3)))

  def test_an_epoch_is_a_function_of_seed_and_epoch(self):
    labels = labels_of(COUNTS)
    sampler = sampling.Sampler("sqrt")
    first = sampler.epoch_order(labels, 5, 3, 11)
    self.assertAllEqual(sampler.epoch_order(labels, 5, 3, 11), first)
    self.assertNotAllEqual(sampler.epoch_order(labels, 5, 4, 11), first)
    self.assertNotAllEqual(sampler.epoch_order(labels, 5, 3, 12), first)

  def test_deferred_re_sampling(self):
    sampler = sampling.Sampler("class", start_epoch=160)
    self.assertFalse(sampler.active(159))
    self.assertTrue(sampler.active(160))
    self.assertFalse(sampling.Sampler("instance").active(0))

  def test_bad_settings(self):
    with self.assertRaisesRegex(ValueError, "Sampler.kind='balanced'; choose one of"):
      sampling.Sampler("balanced")
    with self.assertRaisesRegex(ValueError, "Sampler.start_epoch=-1 must be"):
      sampling.Sampler("class", start_epoch=-1)
    with self.assertRaisesRegex(ValueError, "progressive sampling needs the run's epoch"):
      sampling.Sampler("progressive")


if __name__ == "__main__":
  tf.test.main()
