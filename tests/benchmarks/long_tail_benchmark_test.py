"""//benchmarks:long_tail: every method's bindings train the tiny flagship end to end
(2 epochs, the deferred ones switching at epoch 1), and the summary's arithmetic."""

import json
import os
import re

import numpy as np
import tensorflow as tf

from benchmarks import long_tail_benchmark as bench

TINY = "tests/recipes/configs/nfnet_long_tail_tiny.gin"  # a test-only recipe
# The validation split the stages choosing tau need (the benchmark's recipe has one).
HOLDOUT = ["Task.validation_per_class = 3"]


class LongTailBenchmarkTest(tf.test.TestCase):

  def test_every_method_trains_and_a_rerun_skips_what_is_done(self):
    root = self.create_tempdir().full_path
    known = bench.methods(epochs=2)
    order = sorted(known, key=lambda m: (m != bench.BASELINE, bench.is_stage2(known[m][0])))
    self.assertEqual(order[0], bench.BASELINE)  # the stage-2 methods start from it
    for method in order:
      with self.subTest(method):
        stage2 = bench.is_stage2(known[method][0])
        model_dir = os.path.join(root, bench.slug(method))
        files, bindings = known[method]
        metrics = bench.train(TINY, (files, bindings + HOLDOUT), 0, 2, model_dir,
                              os.path.join(root, bench.slug(bench.stage1_of(method)))
                              if stage2 else None)
        self.assertEqual(metrics["epochs_trained"], metrics["epochs"])  # 0: untrained
        for key in bench.METRICS:
          self.assertBetween(metrics[key], 0.0, 1.0)
    # A finished run is read back, not run again (no python to run it with).
    ldam = os.path.join(root, bench.slug("LDAM-DRW"))
    again = bench.train(TINY, known["LDAM-DRW"], 0, 2, ldam, python="/nonexistent/python")
    with open(os.path.join(ldam, "metrics.json")) as f:
      self.assertEqual(again, json.load(f))

  def test_every_method_has_a_short_name(self):
    names = [bench.slug(m) for m in bench.methods(epochs=10)]
    self.assertLen(set(names), len(names))
    self.assertTrue(all(re.fullmatch(r"[a-z0-9_]+", n) for n in names), names)

  def test_ldam_drw_weights_as_cao_et_al(self):
    """The benchmark's LDAM-DRW rows bind the class-balanced loss as Cao et al.'s own
    reproduce recipe does (their code's F.cross_entropy(weight=...): the weighted mean),
    apart from the epoch DRW starts at."""
    with open("recipes/reproduce/cao2019_cifar10_lt_r100_ldam_drw.gin") as f:
      theirs = {line.split("=")[0].strip(): line.split("=")[1].split("#")[0].strip()
                for line in f if line.startswith("class_balanced.")}
    for method in ("LDAM-DRW", "LDAM-DRW + SAM (rho = 0.8)"):
      with self.subTest(method):
        ours = dict((b.split("=")[0].strip(), b.split("=")[1].strip())
                    for b in bench.methods(epochs=10)[method][1]
                    if b.startswith("class_balanced."))
        self.assertEqual(ours.pop("class_balanced.start_epoch"), "8")
        theirs_now = dict(theirs)
        self.assertEqual(theirs_now.pop("class_balanced.start_epoch"), "160")
        theirs_now.pop("class_balanced.beta")  # 0.9999, the loss's default
        self.assertEqual(ours, theirs_now)

  def test_plot_and_epochs(self):
    table = bench.summarise({bench.BASELINE: [{"balanced_accuracy": 0.7}],
                             "LDAM-DRW": [{"balanced_accuracy": 0.8}]})
    path = os.path.join(self.create_tempdir().full_path, "p.png")
    bench.plot(table, path, "t")
    with open(path, "rb") as f:
      self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")
    self.assertEqual(bench.recipe_epochs("recipes/fashion_mnist_long_tail.gin"), 12)
    self.assertEqual(bench.recipe_epochs("recipes/nfnet_long_tail.gin"), 60)

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
    one = bench.summarise({k: v[:1] for k, v in runs.items()})
    self.assertEqual(bench.versus(one, "LDAM-DRW")[2], "one seed: no noise estimate")
    self.assertIn("| LDAM-DRW | 1 | 0.800 | 1.000 | 0.500 | 0.200 | +0.100: one seed: no "
                  "noise estimate |", bench.render(one, ["0"]))
    text = bench.render(table, ["0", "1", "2"])
    self.assertIn("| LDAM-DRW | 3 | 0.810 ± 0.010 |", text)
    self.assertIn("+0.090 (± 0.013): ahead |", text)


if __name__ == "__main__":
  tf.test.main()
