"""The reproduction report: published rows, runs read from run directories or records and
grouped by row and seed, ours against the paper's with the tolerance, each method's
gain over its baseline (Welch, checked against scipy's own test; Holm over the gains),
per-class top-1, Markdown and plot; bad input in one line."""

import json
import os
import subprocess
import sys

import numpy as np
from scipy import stats as scipy_stats
import tensorflow as tf

from benchmarks import reproduction

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ERM, LDAM = "cao2019_cifar10_lt_r100_ce", "cao2019_cifar10_lt_r100_ldam_drw"
FOCAL = "cao2019_cifar10_lt_r100_cb_focal"


def metrics(recipe, top1, on_test=None, seed=None, per_class=None):
  m = {"recipe": recipe, "top1": top1}
  if seed is not None:
    m["seed"] = seed
  if on_test is not None:
    m["best_on_test_protocol"] = {"epoch": 7, "top1": on_test, "note": "..."}
  if per_class is not None:
    m.update(per_class_accuracy=per_class, class_names=["a", "b"],
             train_class_counts=[500, 5])
  return m


def write_run(directory, *args, **kwargs):
  os.makedirs(directory)
  with open(os.path.join(directory, "metrics.json"), "w") as f:
    json.dump(metrics(*args, **kwargs), f)


def write_record(folder, m):
  """A record as //benchmarks:reproduce writes it (the whole metrics.json inside)."""
  os.makedirs(folder, exist_ok=True)
  path = os.path.join(folder, f"{m['recipe']}_seed{m['seed']}_0123456789abcdef0123.json")
  with open(path, "w") as f:
    json.dump({"benchmark": "reproduce", "row": m["recipe"], "seed": m["seed"],
               "revision": "0123456789abcdef0123", "metrics": m}, f)
  return path


def cli(*args, cwd=None):
  env = dict(os.environ, PYTHONPATH=ROOT)
  env.pop("BUILD_WORKING_DIRECTORY", None)
  return subprocess.run([sys.executable, "-m", "benchmarks.reproduce_report", *args],
                        capture_output=True, text=True, env=env, cwd=cwd or ROOT)


def table_lines(stdout):
  return {line.split(" | ")[0].strip("| "): line for line in stdout.splitlines()}


class ReportTest(tf.test.TestCase):

  def test_published_rows(self):
    rows = {r["recipe"]: r for r in reproduction.published()}
    self.assertLen(rows, 24)
    self.assertEqual(rows[LDAM]["top1"], 77.03)
    self.assertEqual(rows["menon2021_cifar100_lt_la_loss"]["top1"], 44.06)
    self.assertEqual(rows["brock2021_nfnet_f0_imagenet"]["top1"], 83.6)
    self.assertEqual(rows[LDAM]["baseline"], ERM)
    self.assertEqual(rows["kang2020_imagenet_lt_lws"]["baseline"], "kang2020_imagenet_lt_joint")
    self.assertNotIn("baseline", rows[ERM])
    for row in rows.values():
      self.assertTrue(row["source"])
    bad = self.create_tempfile(content=json.dumps({"rows": [
        dict(rows[ERM]), dict(rows[LDAM], baseline="cao2019_cifar100_lt_r100_ce")]}))
    with self.assertRaisesRegex(ValueError, "baseline .* must be another row on the same"):
      reproduction.published(bad.full_path)

  def test_ours_against_the_papers(self):
    root = self.create_tempdir().full_path
    for seed, top1 in enumerate((0.765, 0.772, 0.779)):  # mean 77.2, std 0.7
      write_run(os.path.join(root, "ldam", f"seed{seed}"), LDAM, top1, seed=seed)
    write_run(os.path.join(root, "ce", "seed0"), ERM, 0.70, seed=0)
    write_run(os.path.join(root, "other"), "nfnet_long_tail", 0.8)
    out = self.create_tempdir().full_path
    result = cli(f"--runs={root}/ldam,{root}/ce*,{root}/other", f"--out_dir={out}")
    self.assertEqual(result.returncode, 0, result.stderr)
    lines = table_lines(result.stdout)
    self.assertIn(f"| 77.03 | 77.20 ± {np.std([76.5, 77.2, 77.9], ddof=1):.2f} (3) | "
                  "+0.17 | ±1 (3 seeds) | within |", lines[LDAM])
    self.assertIn("| 70.36 | 70.00 (1) | -0.36 | ±1.5 (3 seeds) | needs 3 seeds |",
                  lines[ERM])
    # One ERM seed: a gain, but no interval for it.
    self.assertIn(f"| {LDAM} − {ERM} | 3 vs 1 | +7.20 | n/a | "
                  "fewer than 2 runs a side: no noise estimate | +6.67 | — |", result.stdout)
    self.assertIn("not published rows, left out: nfnet_long_tail", result.stdout)
    with open(os.path.join(out, "report.md")) as f:
      self.assertIn(LDAM, f.read())
    self.assertGreater(os.path.getsize(os.path.join(out, "report.png")), 1000)

  def test_the_gain_is_welch_and_holm_over_the_reports_gains(self):
    """LDAM-DRW and CB focal against ERM, three seeds each: each gain's interval and p
    are scipy's Welch test (an implementation not ours), the p-values Holm-adjusted over
    the two gains by hand (the smaller doubled; the larger at least that); the paper's
    gains 77.03 - 70.36 and 74.57 - 70.36."""
    erm, ldam, focal = [70.0, 71.0, 72.0], [76.0, 77.5, 78.0], [70.5, 72.5, 74.0]
    grouped = {name: [reproduction.Result(name, s, v, None, (), (), (), "x")
                      for s, v in enumerate(values)]
               for name, values in ((ERM, erm), (LDAM, ldam), (FOCAL, focal))}
    found = {g["label"]: g for g in reproduction.gains(reproduction.published(), grouped)}
    self.assertEqual(set(found), {LDAM, FOCAL})
    p = {}
    for name, values in ((LDAM, ldam), (FOCAL, focal)):
      scipy_test = scipy_stats.ttest_ind(values, erm, equal_var=False)
      interval = scipy_test.confidence_interval(0.95)
      c = found[name]["comparison"]
      self.assertAllClose([c.difference, c.low, c.high, c.p, c.dof],
                          [np.mean(values) - np.mean(erm), interval.low, interval.high,
                           scipy_test.pvalue, scipy_test.df])
      self.assertFalse(c.paired)
      p[name] = scipy_test.pvalue
    self.assertLess(p[LDAM], p[FOCAL])
    self.assertAllClose(found[LDAM]["p_holm"], 2 * p[LDAM])
    self.assertAllClose(found[FOCAL]["p_holm"], max(2 * p[LDAM], p[FOCAL]))
    self.assertEqual(found[LDAM]["family"], 2)
    self.assertAllClose(found[LDAM]["published"], 77.03 - 70.36)
    self.assertTrue(found[LDAM]["covers_published"])  # 6.67 in [3.85, 8.48]
    self.assertEqual(found[LDAM]["verdict"], "ahead")  # 2 x 0.0018 < 0.05
    self.assertEqual(found[FOCAL]["verdict"], "within noise")  # p = 0.21 alone
    text = reproduction.gains_table(list(found.values()))
    self.assertIn("p (Holm over 2)", text)
    self.assertIn(f"| {LDAM} − {ERM} | 3 vs 3 | +6.17 [+3.85, +8.48] | 0.0036 | ahead | "
                  "+6.67 | yes |", text)

  def test_a_run_and_its_record_count_once(self):
    """A run read both from its directory and from its committed record is one seed; two
    different runs of one seed stop the report rather than be averaged."""
    root = self.create_tempdir().full_path
    m = metrics(ERM, 0.709, seed=0, per_class=[0.97, 0.43])
    write_run(os.path.join(root, "runs", ERM, "seed0"), ERM, 0.709, seed=0,
              per_class=[0.97, 0.43])
    write_record(os.path.join(root, "records"), m)
    write_record(os.path.join(root, "records"), metrics(ERM, 0.700, seed=1,
                                                        per_class=[0.95, 0.41]))
    found = reproduction.find([f"{root}/runs", f"{root}/records"], root)
    self.assertLen(found, 3)
    grouped = reproduction.group(reproduction.read(found))
    self.assertEqual([r.seed for r in grouped[ERM]], [0, 1])
    self.assertAllClose([r.top1 for r in grouped[ERM]], [70.9, 70.0])
    classes = reproduction.per_class(reproduction.published(), grouped)
    names, counts, runs = classes["CIFAR-10-LT, rho = 100"]
    self.assertEqual((names, counts), (("a", "b"), (500, 5)))
    self.assertAllClose(runs[0][1], [96.0, 42.0])  # the mean of the two seeds
    self.assertIn("| b | 5 | 42.0 |", reproduction.classes_table(
        "CIFAR-10-LT, rho = 100", classes["CIFAR-10-LT, rho = 100"]))
    write_record(os.path.join(root, "other"), metrics(ERM, 0.71, seed=0))
    with self.assertRaisesRegex(reproduction.ReportError,
                                f"two different runs of {ERM} seed 0: .*give --runs only one"):
      reproduction.group(reproduction.read(
          reproduction.find([f"{root}/runs", f"{root}/other"], root)))

  def test_a_best_on_test_row_is_also_compared_by_the_papers_protocol(self):
    """Cao et al.'s LDAM-DRW figure is their best test epoch: ours (final weights) on
    its line, the runs' best_on_test_protocol top-1 on a second, labelled line, both
    against the row's own tolerance (1 for this row)."""
    root = self.create_tempdir().full_path
    for seed, (final, best) in enumerate(((0.755, 0.768), (0.760, 0.772), (0.765, 0.776))):
      write_run(os.path.join(root, f"seed{seed}"), LDAM, final, on_test=best, seed=seed)
    write_run(os.path.join(root, "ce"), ERM, 0.70, on_test=0.71)
    out = self.create_tempdir().full_path
    result = cli(f"--runs={root}", f"--out_dir={out}")
    self.assertEqual(result.returncode, 0, result.stderr)
    lines = table_lines(result.stdout)
    self.assertIn("| 77.03 | 76.00 ± 0.50 (3) | -1.03 | ±1 (3 seeds) | outside |", lines[LDAM])
    protocol = lines[f"{LDAM} {reproduction.PROTOCOL}"]
    self.assertIn(f"| 77.03 | 77.20 ± {np.std([76.8, 77.2, 77.6], ddof=1):.2f} (3) | "
                  "+0.17 | ±1 (3 seeds) | within |", protocol)
    # The CE row's figure is not a best-on-test one: no second line, no protocol gain.
    self.assertNotIn(f"{ERM} {reproduction.PROTOCOL}", lines)
    self.assertNotIn(f"{LDAM} {reproduction.PROTOCOL} − ", result.stdout)
    self.assertIn("not a clean estimate", result.stdout)
    # Runs without the record leave the second line out rather than guess.
    only = {"ren2020_cifar10_lt_r200_softmax": [
        reproduction.Result("ren2020_cifar10_lt_r200_softmax", 0, 74.0, None, (), (), (), "x")]}
    self.assertEqual([r["label"] for r in reproduction.compare(reproduction.published(), only)],
                     ["ren2020_cifar10_lt_r200_softmax"])

  def test_a_decoupled_run_counts_its_stage_2(self):
    root = self.create_tempdir().full_path
    run = os.path.join(root, "crt", "seed0")
    write_run(os.path.join(run, "stage1"), "kang2020_imagenet_lt_crt", 0.44)
    write_run(os.path.join(run, "stage2"), "kang2020_imagenet_lt_crt", 0.49)
    alone = os.path.join(root, "stage1_only", "stage1")
    write_run(alone, "kang2020_imagenet_lt_joint", 0.43)
    found = reproduction.find([os.path.join(root, "*")], root)
    self.assertEqual(found, sorted([os.path.join(run, "stage2", "metrics.json"),
                                    os.path.join(alone, "metrics.json")]))
    grouped = reproduction.group(reproduction.read(found))
    self.assertEqual({k: [r.top1 for r in v] for k, v in grouped.items()},
                     {"kang2020_imagenet_lt_crt": [49.0], "kang2020_imagenet_lt_joint": [43.0]})

  def test_outside_the_tolerance(self):
    name = "menon2021_cifar10_lt_la_loss"
    grouped = {name: [reproduction.Result(name, s, v, None, (), (), (), "x")
                      for s, v in enumerate((75.0, 75.5, 76.0))]}
    results = reproduction.compare(reproduction.published(), grouped)
    self.assertLen(results, 1)
    self.assertEqual(results[0]["verdict"], "outside")  # 75.5 against 77.89 +- 1
    self.assertAlmostEqual(results[0]["diff"], 75.5 - 77.89)

  def test_no_runs_prints_the_table_and_commands(self):
    result = cli()
    self.assertEqual(result.returncode, 0, result.stderr)
    self.assertIn("kang2020_imagenet_lt_lws: Kang et al. 2020", result.stdout)
    # CIFAR-10 is installed offline (no binding); CIFAR-100 still needs its archive.
    self.assertIn(f"./bazelw run //recipes/reproduce:{ERM} -- "
                  f"--gin_bindings='SEED = 0' --model_dir=runs/{ERM}/seed0", result.stdout)
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
    self.assertIn("is not a finished run's metrics.json or record", result.stderr)
    self.assertEqual(len(result.stderr.strip().splitlines()), 1)
    write_run(os.path.join(root, "mine"), "my_recipe", 0.5)
    result = cli(f"--runs={root}/mine")
    self.assertEqual(result.returncode, 2)
    self.assertIn("none of the runs' recipes (my_recipe) is a published row", result.stderr)
    empty = os.path.join(root, "empty")
    os.makedirs(empty)
    result = cli(f"--runs={empty}")
    self.assertEqual(result.returncode, 2)
    self.assertIn("no metrics.json or record under", result.stderr)


if __name__ == "__main__":
  tf.test.main()
