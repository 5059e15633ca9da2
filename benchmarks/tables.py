"""Markdown tables of benchmark results, made from the JSON a benchmark writes and
nothing else, so that a page's table can be checked against its committed JSON
(//tests:docs_data_test) and a reader can recompute every figure.

A page marks each such table (the lines up to the next blank line):

    <!-- table: docs/data/<file>.json <renderer>[ methods=a,b] -->
    | ... |

where <renderer> is a function of RENDERERS.
"""

import numpy as np

from benchmarks import stats

BASELINE = "cross-entropy"
METRICS = ("balanced_accuracy", "many_shot_accuracy", "medium_shot_accuracy",
           "few_shot_accuracy")


# --- Long-tailed recognition (//benchmarks:long_tail) -------------------------------

def seed_values(results, method, key="balanced_accuracy"):
  """{seed: value} of one method's runs (runs without the metric left out)."""
  return {seed: run[key] for seed, run in results["runs"][method].items()
          if run.get(key) is not None}


def mean_std(values):
  """'mean ± sample standard deviation' (3 decimals), or the value of one run."""
  values = list(values)
  if not values:
    return "n/a"
  if len(values) == 1:
    return f"{values[0]:.3f}"
  return f"{np.mean(values):.3f} ± {np.std(values, ddof=1):.3f}"


def comparisons(results, key="balanced_accuracy"):
  """{method: stats.Comparison against the baseline} (the baseline left out)."""
  if BASELINE not in results["runs"]:
    return {}
  base = seed_values(results, BASELINE, key)
  return {m: stats.compare_seeds(seed_values(results, m, key), base)
          for m in results["runs"] if m != BASELINE}


def long_tail(results, methods=None):
  """The table of long_tail.json: one row a method (`methods`: short names or full
  names to keep, in the JSON's order)."""
  compared = comparisons(results)
  lines = [
      "| method | seeds | balanced | many-shot | medium-shot | few-shot | "
      "balanced − cross-entropy (± its standard error; test, 95%) |",
      "|---|---|---|---|---|---|---|"]
  short = results.get("short_names", {})
  for method, by_seed in results["runs"].items():
    if methods and method not in methods and short.get(method) not in methods:
      continue
    cells = [str(len(by_seed))] + [mean_std(seed_values(results, method, k).values())
                                   for k in METRICS]
    vs = "(baseline)" if method == BASELINE else str(compared.get(method, "n/a"))
    lines.append(f"| {method} | {' | '.join(cells)} | {vs} |")
  return "\n".join(lines)


def long_tail_caption(results):
  return (f"{results['recipe']}, {results['epochs']} epochs, seeds "
          f"{', '.join(results['seeds'])}: test accuracy, mean ± standard deviation over "
          "seeds; against cross-entropy: the mean of the per-seed differences ± its "
          "standard error, a paired t test with n - 1 degrees of freedom at 95% "
          "(benchmarks/stats.py)")


# --- Validation sweeps (//benchmarks:validation_sweep) ------------------------------

def sweep_rows(sweep):
  """(point, mean validation balanced accuracy, its values, mean wall seconds) of
  sweep.json, best first."""
  rows = []
  for point in sweep["points"]:
    runs = point["runs"].values()
    accs = [r["validation_balanced_accuracy"] for r in runs]
    walls = [r["wall_seconds"] for r in runs if r["wall_seconds"] is not None]
    rows.append((point["bindings"], float(np.mean(accs)), accs,
                 float(np.mean(walls)) if walls else None))
  return sorted(rows, key=lambda r: -r[1])


def validation_sweep(sweep):
  lines = ["| point | validation balanced (mean) | per seed | wall seconds a run |",
           "|---|---|---|---|"]
  for bindings, mean, accs, wall in sweep_rows(sweep):
    lines.append(f"| {'; '.join(bindings)} | {mean:.4f} | "
                 f"{', '.join(f'{a:.4f}' for a in accs)} | "
                 f"{'n/a' if wall is None else f'{wall:.0f}'} |")
  return "\n".join(lines)


def validation_sweep_caption(sweep):
  return (f"{sweep['recipe']} with {'; '.join(sweep['gin_bindings']) or 'its bindings'}: "
          f"validation balanced accuracy (mean over seeds {', '.join(sweep['seeds'])}), "
          "best first")


RENDERERS = {"long_tail": long_tail, "validation_sweep": validation_sweep}
