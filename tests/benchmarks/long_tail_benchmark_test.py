"""//benchmarks:long_tail: every method's bindings take effect in a real run of the tiny
flagship (2 epochs, the deferred ones switching at epoch 1), runs are keyed on what was
run (a stale run is refused, not reported), and the table comes from the JSON alone."""

import json
import os
import re

import numpy as np
import tensorflow as tf

from benchmarks import long_tail_benchmark as bench
from benchmarks import runs as runs_lib
from benchmarks import stats
from benchmarks import tables
from tests.benchmarks.operative import operative_values
from tests.benchmarks.operative import same_value
from tests.benchmarks.operative import short_name

TINY = "tests/recipes/configs/nfnet_long_tail_tiny.gin"  # a test-only recipe
# The validation split the stages choosing tau need (the benchmark's recipe has one).
HOLDOUT = ("Task.validation_per_class = 3",)


class LongTailBenchmarkTest(tf.test.TestCase):

  def test_every_method_trains_with_its_bindings_in_effect(self):
    root = self.create_tempdir().full_path
    known = bench.methods(epochs=2)
    order = sorted(known, key=lambda m: (m != bench.BASELINE, bench.is_stage2(known[m][0])))
    planned = bench.plan(TINY, known, order, ["0"], 2, root, HOLDOUT)
    digest = runs_lib.code_digest()
    losses = {}
    for (method, _), run in planned.items():
      with self.subTest(method):
        metrics = runs_lib.train(run, digest)
        self.assertEqual(metrics["epochs_trained"], metrics["epochs"])  # 0: untrained
        for key in bench.METRICS:
          self.assertBetween(metrics[key], 0.0, 1.0)
        # A binding that does nothing (a misspelt parameter of a configurable that is
        # never called, a macro no file reads) is missing from the operative config.
        stage = "stage2" if run.stage1 else ""
        operative = operative_values(os.path.join(run.model_dir, stage,
                                                  "operative_config.gin"))
        for binding in known[method][1]:
          name, value = (p.strip() for p in binding.split("=", 1))
          name = short_name(name)
          self.assertIn(name, operative, msg=f"{binding!r} did not reach the run")
          self.assertTrue(same_value(operative[name], value),
                          msg=f"{binding!r}: the run used {operative[name]}")
        if not run.stage1:
          losses[method] = metrics["final_train_loss"]
    for method, loss in losses.items():  # every training method changes training
      if method != bench.BASELINE:
        self.assertNotEqual(loss, losses[bench.BASELINE], msg=method)

  def test_a_stale_run_is_refused_and_a_matching_one_read(self):
    root = self.create_tempdir().full_path
    known = bench.methods(epochs=1)
    digest = runs_lib.code_digest()
    one = bench.plan(TINY, known, [bench.BASELINE], ["0"], 1, root)[(bench.BASELINE, "0")]
    metrics = runs_lib.train(one, digest)
    self.assertEqual(metrics["epochs"], 1)
    # The same run is read back (no interpreter to run it with).
    self.assertEqual(runs_lib.train(one, digest, python="/nonexistent/python"), metrics)
    # Another EPOCHS, other bindings or other code on the same directory: refused with
    # one line naming what changed, never the old run's report.
    two = bench.plan(TINY, known, [bench.BASELINE], ["0"], 2, root)[(bench.BASELINE, "0")]
    self.assertEqual(two.model_dir, one.model_dir)
    with self.assertRaisesRegex(runs_lib.StaleRun, r"^\S+ holds a run of another "
                                r"configuration \(bindings differ\); pass --rerun_stale"):
      runs_lib.train(two, digest, python="/nonexistent/python")
    with self.assertRaisesRegex(runs_lib.StaleRun, r"\(code differ\)"):
      runs_lib.train(one, "another digest", python="/nonexistent/python")
    # A run directory from before keys (the old benchmark's planted 12-epoch report).
    planted = os.path.join(root, "planted")
    os.makedirs(planted)
    with open(os.path.join(planted, "metrics.json"), "w") as f:
      json.dump({"epochs": 12, "balanced_accuracy": 0.9}, f)
    old = runs_lib.Run(gin_files=(TINY,), bindings=("EPOCHS = 1",), model_dir=planted)
    with self.assertRaisesRegex(runs_lib.StaleRun, "a run from before run keys"):
      runs_lib.train(old, digest)
    # --rerun_stale deletes it and trains: the report is the new run's.
    self.assertEqual(runs_lib.train(old, digest, rerun_stale=True)["epochs"], 1)

  def test_the_key_covers_included_files_and_the_stage1(self):
    texts = runs_lib.gin_texts([TINY])
    self.assertIn("recipes/nfnet_long_tail_digits.gin", texts)  # included by TINY
    self.assertIn("recipes/configs/models/nfnet_nano.gin", texts)  # included by that
    stage1 = runs_lib.Run((TINY,), ("SEED = 0",), "/x/ce")
    stage2 = runs_lib.Run((TINY, "recipes/configs/runs/decoupled_crt.gin"), (), "/x/crt",
                          stage1=stage1)
    other = runs_lib.Run((TINY,), ("SEED = 1",), "/x/ce")
    self.assertNotEqual(stage2.key("d"),
                        runs_lib.Run(stage2.gin_files, (), "/x/crt", stage1=other).key("d"))

  def test_every_method_has_a_short_name(self):
    names = [bench.slug(m) for m in bench.methods(epochs=10)]
    self.assertLen(set(names), len(names))
    self.assertTrue(all(re.fullmatch(r"[a-z0-9_]+", n) for n in names), names)

  def test_ldam_drw_weights_as_cao_et_al(self):
    """The benchmark's LDAM-DRW rows bind the class-balanced loss as Cao et al.'s own
    reproduce recipes do (their code's F.cross_entropy(weight=...): the weighted mean),
    apart from the epoch DRW starts at."""
    with open("recipes/configs/runs/cao2019_ldam_drw.gin") as f:  # the recipes' LDAM-DRW
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

  def test_stage2_rates_scale_with_the_batch(self):
    """Kang et al.'s 0.2 at batch 512 and weight balancing's 0.01 at 64, scaled
    linearly to the recipe's batch."""
    at128 = bench.methods(epochs=10, batch_size=128)
    self.assertEqual(at128["cRT"][1], ["STAGE2_LEARNING_RATE = 0.05"])
    self.assertEqual(at128["weight balancing (stage 2: CB loss, MaxNorm)"][1],
                     ["STAGE2_LEARNING_RATE = 0.02"])
    self.assertEqual(bench.methods(epochs=10, batch_size=32)["cRT"][1],
                     ["STAGE2_LEARNING_RATE = 0.0125"])
    self.assertEqual(bench.recipe_epochs("recipes/nfnet_long_tail_digits.gin"), 60)

  def results(self, values):
    """long_tail.json's shape from {method: [balanced accuracy a seed]}."""
    runs = {}
    for method, accs in values.items():
      runs[method] = {str(s): {"balanced_accuracy": a, "many_shot_accuracy": 1.0,
                               "medium_shot_accuracy": 0.5, "few_shot_accuracy": None,
                               "per_class_accuracy": [a, 1.0, 0.5],
                               "train_class_counts": [50, 10, 2],
                               "class_names": ["a", "b", "c"]}
                      for s, a in enumerate(accs)}
    return {"recipe": "r.gin", "epochs": 2, "seeds": [str(s) for s in range(3)],
            "runs": runs}

  def test_table_from_the_json_by_the_one_rule(self):
    results = self.results({bench.BASELINE: [0.70, 0.72, 0.74],
                            "LDAM-DRW": [0.80, 0.81, 0.85],
                            "focal": [0.69, 0.75, 0.74]})
    text = tables.long_tail(results)
    self.assertIn(f"| {bench.BASELINE} | 3 | 0.720 ± 0.020 | 1.000 ± 0.000 | 0.500 ± "
                  "0.000 | n/a | (baseline) |", text)
    # Paired differences 0.10, 0.09, 0.11: mean 0.10, standard error 0.01/sqrt(3).
    ldam = stats.compare([0.80, 0.81, 0.85], [0.70, 0.72, 0.74], paired=True)
    self.assertAllClose([ldam.difference, ldam.standard_error], [0.1, 0.01 / np.sqrt(3)])
    # Holm over the two methods run: the smaller p doubled, the larger at least that.
    self.assertIn(f"| LDAM-DRW | 3 | 0.820 ± 0.026 | 1.000 ± 0.000 | 0.500 ± 0.000 | n/a | "
                  f"+0.100 ± 0.006 (paired t, 2 df, p = {ldam.p:.2g}; Holm over 2: "
                  f"{2 * ldam.p:.3g}): ahead |", text)
    self.assertIn("(paired t, 2 df, p = 0.0033; Holm over 2: 0.00663): ahead |", text)
    self.assertIn("Holm over the 2 methods run", text)
    self.assertIn("focal | 3 | 0.727 ± 0.032", text)
    # Differences -0.01, 0.03, 0.00: t = 0.555; with 2 degrees of freedom the two-sided
    # p is 1 - t / sqrt(2 + t^2) = 0.63 (the t distribution's closed form at 2 df).
    self.assertRegex(text, r"focal .*\+0\.007 ± 0\.012 \(paired t, 2 df, p = 0\.63; Holm "
                     r"over 2: 0\.635\): within noise \|")
    self.assertEqual(tables.long_tail(json.loads(json.dumps(results))), text)  # from JSON
    one = self.results({bench.BASELINE: [0.7], "LDAM-DRW": [0.8]})
    self.assertIn(f"+0.100: {stats.NO_ESTIMATE} |", tables.long_tail(one))
    self.assertEqual(bench.shown_methods(results), [bench.BASELINE, "LDAM-DRW"])

  def test_plots(self):
    results = self.results({bench.BASELINE: [0.70, 0.72, 0.74], "LDAM-DRW": [0.8, 0.81, 0.85]})
    folder = self.create_tempdir().full_path
    for name, draw in (("a.png", lambda p: bench.plot(results, p)),
                       ("b.png", lambda p: bench.plot_per_class(
                           results, [bench.BASELINE, "LDAM-DRW"], p))):
      draw(os.path.join(folder, name))
      with open(os.path.join(folder, name), "rb") as f:
        self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")


if __name__ == "__main__":
  tf.test.main()
