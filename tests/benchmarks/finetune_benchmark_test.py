"""//benchmarks:finetune: the arms are the recipe plus one binding each, paired by
SEED; the verdicts are stats.py's paired t at the Bonferroni level for two
comparisons, checked against the formula; a sitting never overwrites a record."""

import json
import math
import os

from absl.testing import flagsaver
import numpy as np
from scipy import stats as scipy_stats
import tensorflow as tf

from benchmarks import finetune_benchmark as bench
from benchmarks import tables

FT = {"0": 0.60, "1": 0.70, "2": 0.65}
SCRATCH = {"0": 0.30, "1": 0.35, "2": 0.32}
PROBE = {"0": 0.59, "1": 0.72, "2": 0.62}


def results():
  runs = {arm: {s: {"balanced_accuracy": v} for s, v in values.items()}
          for arm, values in ((bench.FINE_TUNE, FT), (bench.SCRATCH, SCRATCH),
                              (bench.PROBE, PROBE))}
  return {"recipe": "efficientnet_lite0_finetune", "seeds": ["0", "1", "2"],
          "runs": runs, "revision": "2237b10abcdef0123+changes", "date": "2026-12-02"}


class FinetuneBenchmarkTest(tf.test.TestCase):

  def test_arms_differ_by_one_binding_and_share_the_seed(self):
    root = self.create_tempdir().full_path
    runs = {arm: bench.arm_run("efficientnet_lite0_finetune", arm, 2, root, ("X = 1",))
            for arm in bench.ARMS}
    base = runs[bench.FINE_TUNE].bindings
    self.assertIn("SEED = 2", base)
    self.assertEqual(base[-1], "X = 1")  # the user's bindings before the arm's own
    self.assertEqual(runs[bench.SCRATCH].bindings, base + ("WEIGHTS = None",))
    self.assertEqual(runs[bench.PROBE].bindings, base + ("FREEZE_BACKBONE = True",))
    self.assertLen({r.model_dir for r in runs.values()}, 3)
    for run in runs.values():
      self.assertEqual(run.gin_files, ("recipes/efficientnet_lite0_finetune.gin",))
      self.assertTrue(os.path.isfile(os.path.join(bench.runs_lib.ROOT, run.gin_files[0])))

  def test_verdicts_are_the_paired_t_at_the_corrected_level(self):
    found = tables.finetune_verdicts(results())
    self.assertCountEqual(found, [bench.SCRATCH, bench.PROBE])
    for arm, other in ((bench.SCRATCH, SCRATCH), (bench.PROBE, PROBE)):
      d = np.array([FT[s] - other[s] for s in "012"])
      se = d.std(ddof=1) / math.sqrt(3)
      half = scipy_stats.t.ppf(1 - 0.05 / 4, 2) * se  # two-sided, alpha 0.05 / 2
      c = found[arm]
      self.assertAllClose([c.difference, c.low, c.high, c.p],
                          [d.mean(), d.mean() - half, d.mean() + half,
                           2 * scipy_stats.t.sf(abs(d.mean() / se), 2)])
      self.assertTrue(c.paired)
    self.assertEqual(found[bench.SCRATCH].verdict, "ahead")
    self.assertEqual(found[bench.PROBE].verdict, "within noise")
    text = tables.finetune(results()).splitlines()
    self.assertLen(text, 5)  # a marked table: no blank line
    self.assertIn("(97.5% paired t, Bonferroni over 2) |", text[0])
    self.assertEqual(text[2], "| fine-tune | 3 | 0.650 ± 0.050 | 0.600, 0.700, 0.650 | — |")
    self.assertRegex(text[3], r"^\| scratch \| 3 \| 0.323 ± 0.025 \| 0.300, 0.350, 0.320 "
                     r"\| \+0.327 \[\+0.\d{3}, \+0.\d{3}\], p (< 0.001|= 0.00\d+): ahead \|$")
    self.assertIs(tables.RENDERERS["finetune"], tables.finetune)

  def test_bad_seeds_exit_2(self):
    for seeds in (["0"], ["0", "x"], ["1", "1"]):
      with flagsaver.flagsaver(seeds=seeds), self.assertRaises(SystemExit) as caught:
        bench.main([])
      self.assertEqual(caught.exception.code, 2)


if __name__ == "__main__":
  tf.test.main()
