"""The benchmarks' shared timing: interleaving and the noise estimate."""

import tensorflow as tf

from benchmarks import timing


class TimingTest(tf.test.TestCase):

  def test_interleave_alternates_order_after_an_untimed_chunk(self):
    calls = []
    runs = {name: (lambda name=name: calls.append(name) or 1.0) for name in "ab"}
    times = timing.interleave(runs, 3)
    self.assertEqual("".join(calls), "ab" + "ab" + "ba" + "ab")
    self.assertEqual(times, {"a": [1.0] * 3, "b": [1.0] * 3})
    self.assertAlmostEqual(timing.half_spread([1.0, 1.0, 2.0, 2.0]), 2 / 3)


if __name__ == "__main__":
  tf.test.main()
