"""The reproduction report: the published table's rows, runs grouped by recipe, ours
against the paper's with the tolerance, Markdown and plot; bad input in one line."""

import json
import os
import subprocess
import sys

import numpy as np
import tensorflow as tf

from recipes.reproduce import report

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))


def write_run(directory, recipe, top1, on_test=None):
  os.makedirs(directory)
  metrics = {"recipe": recipe, "top1": top1}
  if on_test is not None:
    metrics["best_on_test_protocol"] = {"epoch": 7, "top1": on_test, "note": "..."}
  with open(os.path.join(directory, "metrics.json"), "w") as f:
    json.dump(metrics, f)


def cli(*args, cwd=None):
  env = dict(os.environ, PYTHONPATH=ROOT)
  env.pop("BUILD_WORKING_DIRECTORY", None)
  return subprocess.run([sys.executable, "-m", "recipes.reproduce.report", *args],
                        capture_output=True, text=True, env=env, cwd=cwd or ROOT)


class ReportTest(tf.test.TestCase):

  def test_published_rows(self):
    rows = {r["recipe"]: r for r in report.published()}
    self.assertLen(rows, 24)
    self.assertEqual(rows["cao2019_cifar10_lt_r100_ldam_drw"]["top1"], 77.03)
    self.assertEqual(rows["menon2021_cifar100_lt_la_loss"]["top1"], 44.06)
    self.assertEqual(rows["brock2021_nfnet_f0_imagenet"]["top1"], 83.6)
    for row in rows.values():
      self.assertTrue(row["source"])

  def test_ours_against_the_papers(self):
    root = self.create_tempdir().full_path
    for seed, top1 in enumerate((0.765, 0.772, 0.779)):  # mean 77.2, std 0.7
      write_run(os.path.join(root, "ldam", f"seed{seed}"), "cao2019_cifar10_lt_r100_ldam_drw",
                top1)
    write_run(os.path.join(root, "ce", "seed0"), "cao2019_cifar10_lt_r100_ce", 0.70)
    write_run(os.path.join(root, "other"), "nfnet_long_tail", 0.8)
    out = self.create_tempdir().full_path
    result = cli(f"--runs={root}/ldam,{root}/ce*,{root}/other", f"--out_dir={out}")
    self.assertEqual(result.returncode, 0, result.stderr)
    lines = {line.split(" | ")[0].strip("| "): line for line in result.stdout.splitlines()}
    ldam = lines["cao2019_cifar10_lt_r100_ldam_drw"]
    self.assertIn(f"| 77.03 | 77.20 ± {np.std([76.5, 77.2, 77.9], ddof=1):.2f} (3) | "
                  "+0.17 | ±1 (3 seeds) | within |", ldam)
    self.assertIn("| 70.36 | 70.00 ± 0.00 (1) | -0.36 | ±1.5 (3 seeds) | needs 3 seeds |",
                  lines["cao2019_cifar10_lt_r100_ce"])
    self.assertIn("not published rows, left out: nfnet_long_tail", result.stdout)
    with open(os.path.join(out, "report.md")) as f:
      self.assertIn("cao2019_cifar10_lt_r100_ldam_drw", f.read())
    self.assertGreater(os.path.getsize(os.path.join(out, "report.png")), 1000)

  def test_a_best_on_test_row_is_also_compared_by_the_papers_protocol(self):
    """Cao et al.'s LDAM-DRW figure is their best test epoch: ours (final weights) on
    its line, the runs' best_on_test_protocol top-1 on a second, labelled line, both
    against the row's own tolerance (1 for this row)."""
    root = self.create_tempdir().full_path
    for seed, (final, best) in enumerate(((0.755, 0.768), (0.760, 0.772), (0.765, 0.776))):
      write_run(os.path.join(root, f"seed{seed}"), "cao2019_cifar10_lt_r100_ldam_drw",
                final, on_test=best)
    write_run(os.path.join(root, "ce"), "cao2019_cifar10_lt_r100_ce", 0.70, on_test=0.71)
    out = self.create_tempdir().full_path
    result = cli(f"--runs={root}", f"--out_dir={out}")
    self.assertEqual(result.returncode, 0, result.stderr)
    lines = {line.split(" | ")[0].strip("| "): line for line in result.stdout.splitlines()}
    final = lines["cao2019_cifar10_lt_r100_ldam_drw"]
    self.assertIn("| 77.03 | 76.00 ± 0.50 (3) | -1.03 | ±1 (3 seeds) | outside |", final)
    protocol = lines[f"cao2019_cifar10_lt_r100_ldam_drw {report.PROTOCOL}"]
    self.assertIn(f"| 77.03 | 77.20 ± {np.std([76.8, 77.2, 77.6], ddof=1):.2f} (3) | "
                  "+0.17 | ±1 (3 seeds) | within |", protocol)
    # The CE row's figure is not a best-on-test one: no second line for it.
    self.assertNotIn(f"cao2019_cifar10_lt_r100_ce {report.PROTOCOL}", lines)
    self.assertIn("not a clean estimate", result.stdout)
    # Runs without the record leave the second line out rather than guess.
    self.assertEqual(report.compare(report.published(),
                                    {"ren2020_cifar10_lt_r200_softmax": [74.0]}, {})[0]["label"],
                     "ren2020_cifar10_lt_r200_softmax")
    self.assertLen(report.compare(report.published(),
                                  {"ren2020_cifar10_lt_r200_softmax": [74.0]}, {}), 1)

  def test_a_decoupled_run_counts_its_stage_2(self):
    root = self.create_tempdir().full_path
    run = os.path.join(root, "crt", "seed0")
    write_run(os.path.join(run, "stage1"), "kang2020_imagenet_lt_crt", 0.44)
    write_run(os.path.join(run, "stage2"), "kang2020_imagenet_lt_crt", 0.49)
    alone = os.path.join(root, "stage1_only", "stage1")
    write_run(alone, "kang2020_imagenet_lt_joint", 0.43)
    found = report.find_metrics([os.path.join(root, "*")])
    self.assertEqual(found, sorted([os.path.join(run, "stage2", "metrics.json"),
                                    os.path.join(alone, "metrics.json")]))
    self.assertEqual(report.read_runs(found), {"kang2020_imagenet_lt_crt": [49.0],
                                               "kang2020_imagenet_lt_joint": [43.0]})

  def test_outside_the_tolerance(self):
    rows = report.published()
    results = report.compare(rows, {"menon2021_cifar10_lt_la_loss": [75.0, 75.5, 76.0]})
    self.assertLen(results, 1)
    self.assertEqual(results[0]["verdict"], "outside")  # 75.5 against 77.89 +- 1
    self.assertAlmostEqual(results[0]["diff"], 75.5 - 77.89)

  def test_no_runs_prints_the_table_and_commands(self):
    result = cli()
    self.assertEqual(result.returncode, 0, result.stderr)
    self.assertIn("kang2020_imagenet_lt_lws: Kang et al. 2020", result.stdout)
    # CIFAR-10 is installed offline (no binding); CIFAR-100 still needs its archive.
    self.assertIn("./bazelw run //recipes/reproduce:cao2019_cifar10_lt_r100_ce -- "
                  "--gin_bindings='SEED = 0' --model_dir=runs/cao2019_cifar10_lt_r100_ce/seed0",
                  result.stdout)
    self.assertIn("./bazelw run //recipes/reproduce:cao2019_cifar100_lt_r100_ce -- "
                  "--gin_bindings=\"CIFAR_DIR = '/data/cifar'\" --gin_bindings='SEED = 0' "
                  "--model_dir=runs/cao2019_cifar100_lt_r100_ce/seed0", result.stdout)
    self.assertIn("; out of reach offline: CIFAR-100 has no offline copy", result.stdout)

  def test_bad_input(self):
    root = self.create_tempdir().full_path
    result = cli(f"--runs={root}/nothing*")
    self.assertEqual(result.returncode, 2)
    self.assertRegex(result.stderr, r"^error: --runs=.*nothing\* matches nothing; give run "
                     r"directories")
    broken = os.path.join(root, "broken")
    os.makedirs(broken)
    with open(os.path.join(broken, "metrics.json"), "w") as f:
      f.write("{not json")
    result = cli(f"--runs={broken}")
    self.assertEqual(result.returncode, 2)
    self.assertIn("is not a finished run's metrics.json", result.stderr)
    self.assertEqual(len(result.stderr.strip().splitlines()), 1)
    write_run(os.path.join(root, "mine"), "my_recipe", 0.5)
    result = cli(f"--runs={root}/mine")
    self.assertEqual(result.returncode, 2)
    self.assertIn("none of the runs' recipes (my_recipe) is a published row", result.stderr)


if __name__ == "__main__":
  tf.test.main()
