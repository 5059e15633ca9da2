"""benchmarks/rounds.py: every program once a round, the order flipped every other
round, an untimed call of each first unless told otherwise."""

from absl.testing import absltest

from benchmarks import rounds


class RoundsTest(absltest.TestCase):

  def test_alternates_the_order_after_an_untimed_call(self):
    calls = []
    runs = {name: (lambda name=name: calls.append(name) or 1.0) for name in "ab"}
    results = rounds.interleave(runs, 3)
    self.assertEqual("".join(calls), "ab" + "ab" + "ba" + "ab")
    self.assertEqual(results, {"a": [1.0] * 3, "b": [1.0] * 3})

  def test_without_warmup_and_with_progress(self):
    counter = iter(range(100))
    runs = {name: (lambda: next(counter)) for name in "xyz"}
    seen = []
    results = rounds.interleave(runs, 2, warmup=False,
                                on_result=lambda r, name, value: seen.append((r, name, value)))
    self.assertEqual(seen, [(0, "x", 0), (0, "y", 1), (0, "z", 2),
                            (1, "z", 3), (1, "y", 4), (1, "x", 5)])
    self.assertEqual(results, {"x": [0, 5], "y": [1, 4], "z": [2, 3]})


if __name__ == "__main__":
  absltest.main()
