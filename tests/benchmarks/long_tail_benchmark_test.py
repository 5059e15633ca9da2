"""//benchmarks:long_tail: every method's bindings train the tiny flagship end to end
(2 epochs, the deferred ones switching at epoch 1), and the summary's arithmetic."""

import os

import numpy as np
import tensorflow as tf

from benchmarks import long_tail_benchmark as bench

TINY = "tests/recipes/configs/nfnet_long_tail_tiny.gin"  # a test-only recipe


class LongTailBenchmarkTest(tf.test.TestCase):

  def test_every_method_trains(self):
    root = self.create_tempdir().full_path
    for index, (method, bindings) in enumerate(bench.methods(epochs=2).items()):
      with self.subTest(method):
        metrics = bench.train(TINY, bindings, 0, 2, os.path.join(root, str(index)))
        self.assertEqual(metrics["epochs_trained"], 2)
        for key in bench.METRICS:
          self.assertBetween(metrics[key], 0.0, 1.0)

  def test_summary_and_noise(self):
    runs = {"cross-entropy": [{"balanced_accuracy": a, "many_shot_accuracy": 1.0,
                               "medium_shot_accuracy": 0.5, "few_shot_accuracy": None}
                              for a in (0.70, 0.72, 0.74)],
            "LDAM-DRW": [{"balanced_accuracy": a, "many_shot_accuracy": 1.0,
                          "medium_shot_accuracy": 0.5, "few_shot_accuracy": 0.2}
                         for a in (0.80, 0.81, 0.82)],
            "focal": [{"balanced_accuracy": a, "many_shot_accuracy": 1.0,
                       "medium_shot_accuracy": 0.5, "few_shot_accuracy": 0.2}
                      for a in (0.71, 0.73, 0.75)]}
    table = bench.summarise(runs)
    mean, std, values = table["cross-entropy"]["balanced_accuracy"]
    self.assertAllClose([mean, std], [0.72, 0.02])
    self.assertEqual(table["cross-entropy"]["few_shot_accuracy"][2], [])
    diff, error, verdict = bench.versus(table, "LDAM-DRW")
    self.assertAllClose([diff, error], [0.09, np.sqrt(0.02 ** 2 / 3 + 0.01 ** 2 / 3)])
    self.assertEqual(verdict, "ahead")
    self.assertEqual(bench.versus(table, "focal")[2], "within noise")
    text = bench.render(table, ["0", "1", "2"])
    self.assertIn("| LDAM-DRW | 0.810 ± 0.010 |", text)
    self.assertIn("+0.090 (± 0.013): ahead |", text)


if __name__ == "__main__":
  tf.test.main()
