"""Ours against the papers': reproduction runs read, grouped and compared with the rows of
recipes/reproduce/published.json (the report's and the pages' one owner of that rule).

A run's result comes from its run directory's metrics.json or from the record
//benchmarks:reproduce commits for it (docs/data/reproduce/<row>_seed<k>_<rev>.json,
which holds the whole metrics.json); the same run seen both ways counts once.

- Each row: our mean top-1 over seeds (final weights) against the paper's, the
  difference, and "within" / "outside" the row's tolerance once there are the seeds the
  tolerance applies to. A row whose paper's code reports its best test epoch
  ("selection") is compared a second time, labelled PROTOCOL, on the runs'
  `best_on_test_protocol` top-1: the paper's protocol, not a clean estimate.
- Each method against its baseline row ("baseline" in published.json, e.g. LDAM-DRW
  against ERM on the same split): our gain with its 95% Welch interval (Welch 1947;
  never paired by seed: one SEED gives the two rows neither the same initialisation,
  the LDAM head being a cosine classifier, nor a test that says so), its p-value
  adjusted by Holm over every gain the report computes (`stats.holm`), and the paper's
  gain, inside or outside our interval. The protocol gain is computed only where both
  rows' figures are best test epochs.
- Per-class top-1 (mean over seeds) beside each class's training images.
"""

import dataclasses
import glob
import json
import math
import os

import numpy as np

from benchmarks import stats

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TABLE = os.path.join(ROOT, "recipes", "reproduce", "published.json")
PROTOCOL = "[best test epoch: the paper's protocol]"
RECORD_GLOB = "*_seed[0-9]*_*.json"  # //benchmarks:reproduce's record names


class ReportError(ValueError):
  """Bad input: one line, exit status 2."""


@dataclasses.dataclass(frozen=True)
class Result:
  """One finished run: its row, seed, top-1 (%) of the final weights and of the best
  test epoch (None where not recorded), per-class top-1 (%), and where it was read."""
  recipe: str
  seed: object  # an int; None where the metrics do not say
  top1: float
  protocol_top1: object
  per_class: tuple
  class_names: tuple
  train_counts: tuple
  source: str


def published(path=TABLE):
  """The published rows (dicts), checked: unique recipes, numbers where numbers go, each
  baseline another row of the same data."""
  with open(path) as f:
    rows = json.load(f)["rows"]
  by_recipe = {}
  for row in rows:
    if row["recipe"] in by_recipe:
      raise ValueError(f"{path}: recipe {row['recipe']!r} appears twice")
    by_recipe[row["recipe"]] = row
    if not (0 < row["top1"] <= 100 and row["tolerance"] > 0 and row["seeds"] >= 1):
      raise ValueError(f"{path}: row {row['recipe']!r} has a top1, tolerance or seed "
                       "count out of range")
    if "selection" in row and not (isinstance(row["selection"], str)
                                   and row["selection"].strip()):
      raise ValueError(f"{path}: row {row['recipe']!r}: selection must say how the "
                       "paper's code chose its reported epoch")
  for row in rows:
    base = by_recipe.get(row.get("baseline"))
    if "baseline" in row and (base is None or base is row or base["data"] != row["data"]):
      raise ValueError(f"{path}: row {row['recipe']!r}: baseline {row['baseline']!r} must "
                       "be another row on the same data")
  return rows


def command(row):
  """The command that runs one seed of `row`."""
  name = row["recipe"]
  data = "".join(f' --gin_bindings="{b}"' for b in row.get("data_bindings", ()))
  return (f"./bazelw run //recipes/reproduce:{name} --{data} --gin_bindings='SEED = 0' "
          f"--model_dir=runs/{name}/seed0")


# --- Reading runs -------------------------------------------------------------------

def find(patterns, start):
  """The metrics.json files and run records in or under what `patterns` name (relative
  ones from `start`): a run directory, a folder of them, a records folder, a file."""
  found = []
  for pattern in patterns:
    pattern = os.path.join(start, os.path.expanduser(pattern))
    matched = sorted(glob.glob(pattern))
    if not matched:
      raise ReportError(f"--runs={pattern} matches nothing; give run directories (a "
                        "model_dir, or a folder of them), records (docs/data/reproduce) "
                        "or globs such as 'runs/cao2019_*'")
    for path in matched:
      if os.path.isfile(path) and path.endswith(".json"):
        found.append(path)
      elif os.path.isdir(path):
        for name in ("metrics.json", RECORD_GLOB):
          found += glob.glob(os.path.join(path, "**", name), recursive=True)
  found = set(found)
  # A decoupled run's result is stage 2's; its stage 1 (the joint model) is not a seed.
  return sorted(f for f in found if not (
      os.path.basename(os.path.dirname(f)) == "stage1" and os.path.join(
          os.path.dirname(os.path.dirname(f)), "stage2", "metrics.json") in found))


def result(data, source):
  """The Result of a metrics.json's dict, or of a record's (which holds one)."""
  metrics = data["metrics"] if data.get("benchmark") == "reproduce" else data
  selected = metrics.get("best_on_test_protocol") or {}
  percent = lambda values: tuple(100.0 * float(v) for v in values or ())
  seed = metrics.get("seed", data.get("seed"))
  return Result(
      recipe=str(metrics["recipe"]), seed=None if seed is None else int(seed),
      top1=100.0 * float(metrics["top1"]),
      protocol_top1=100.0 * float(selected["top1"]) if selected else None,
      per_class=percent(metrics.get("per_class_accuracy")),
      class_names=tuple(metrics.get("class_names") or ()),
      train_counts=tuple(int(c) for c in metrics.get("train_class_counts") or ()),
      source=source)


def read(paths):
  """[Result] of the files `paths` (unreadable ones are errors)."""
  out = []
  for path in paths:
    try:
      with open(path) as f:
        out.append(result(json.load(f), path))
    except (OSError, ValueError, KeyError, TypeError) as e:
      raise ReportError(f"{path} is not a finished run's metrics.json or record "
                        f"({type(e).__name__}: {e}); remove it from --runs or rerun that "
                        "run") from None
  return out


def group(results):
  """{recipe: [Result], one a seed}: a run read twice (its metrics.json and its record)
  counts once; two different runs of one seed are an error, for a person to choose."""
  grouped = {}
  for r in results:
    runs = grouped.setdefault(r.recipe, [])
    same = [o for o in runs if r.seed is not None and o.seed == r.seed]
    if not same:
      runs.append(r)
    elif (same[0].top1, same[0].protocol_top1) != (r.top1, r.protocol_top1):
      raise ReportError(f"two different runs of {r.recipe} seed {r.seed}: {same[0].source} "
                        f"and {r.source}; give --runs only one of them")
  return {recipe: sorted(runs, key=lambda r: (r.seed is None, r.seed or 0, r.source))
          for recipe, runs in grouped.items()}


# --- Comparing ----------------------------------------------------------------------

def compare(rows, grouped):
  """One dict per published row with runs: ours (final weights) against the paper's;
  after a row with a "selection", a second (label PROTOCOL) from the runs that recorded
  their best test epoch, against the same tolerance."""
  out = []
  for row in rows:
    runs = grouped.get(row["recipe"], [])
    out += _compare_row(row, [r.top1 for r in runs], row["recipe"])
    if row.get("selection"):
      out += _compare_row(row, [r.protocol_top1 for r in runs
                                if r.protocol_top1 is not None],
                          f"{row['recipe']} {PROTOCOL}")
  return out


def _compare_row(row, ours, label):
  if not ours:
    return []
  mean = float(np.mean(ours))
  std = float(np.std(ours, ddof=1)) if len(ours) > 1 else 0.0
  diff = mean - row["top1"]
  if len(ours) < row["seeds"]:
    verdict = f"needs {row['seeds']} seeds"
  else:
    verdict = "within" if abs(diff) <= row["tolerance"] else "outside"
  return [dict(row=row, label=label, mean=mean, std=std, n=len(ours), diff=diff,
               verdict=verdict)]


def gains(rows, grouped):
  """One dict per row with a baseline where both have runs: our gain (stats.Comparison,
  Welch), the paper's, the Holm-adjusted p over all of them and the verdict at the
  family-wise 95%."""
  by_recipe = {row["recipe"]: row for row in rows}
  out = []
  for row in rows:
    base = by_recipe.get(row.get("baseline"))
    if base is None:
      continue
    ours, theirs = grouped.get(row["recipe"], []), grouped.get(base["recipe"], [])
    sides = [("", [r.top1 for r in ours], [r.top1 for r in theirs])]
    if row.get("selection") and base.get("selection"):
      sides.append((f" {PROTOCOL}",
                    [r.protocol_top1 for r in ours if r.protocol_top1 is not None],
                    [r.protocol_top1 for r in theirs if r.protocol_top1 is not None]))
    for suffix, a, b in sides:
      if a and b:
        out.append(dict(row=row, baseline=base, label=f"{row['recipe']}{suffix}",
                        n_a=len(a), n_b=len(b), comparison=stats.compare(a, b, paired=False),
                        published=row["top1"] - base["top1"]))
  verdicts = stats.holm_verdicts([g["comparison"] for g in out])
  family = len([p for p, _ in verdicts if math.isfinite(p)])
  for g, (p, verdict) in zip(out, verdicts):
    c = g["comparison"]
    g.update(p_holm=p, family=family, verdict=verdict,
             covers_published=(c.low <= g["published"] <= c.high
                               if math.isfinite(c.low) else None))
  return out


def per_class(rows, grouped):
  """{data: (class names, training counts, [(recipe, per-class means, seeds)])} for the
  rows whose runs recorded per-class accuracy, in published order."""
  out = {}
  for row in rows:
    runs = [r for r in grouped.get(row["recipe"], []) if r.per_class]
    if not runs:
      continue
    means = tuple(float(v) for v in np.mean([r.per_class for r in runs], axis=0))
    names, counts, entries = out.setdefault(
        row["data"], (runs[0].class_names, runs[0].train_counts, []))
    entries.append((row["recipe"], means, len(runs)))
  return out


# --- Markdown -----------------------------------------------------------------------

def rows_table(compared):
  lines = ["| recipe | paper | data | method | paper top-1 | ours (mean ± sd, seeds) | "
           "difference | tolerance | verdict |", "|---|---|---|---|---|---|---|---|---|"]
  for r in compared:
    row = r["row"]
    lines.append(f"| {r['label']} | {row['paper']} | {row['data']} | {row['method']} | "
                 f"{row['top1']:.2f} | {r['mean']:.2f}"
                 + (f" ± {r['std']:.2f}" if r["n"] > 1 else "") + f" ({r['n']}) | "
                 f"{r['diff']:+.2f} | ±{row['tolerance']:g} ({row['seeds']} seeds) | "
                 f"{r['verdict']} |")
  return "\n".join(lines)


def gains_table(found):
  """Each gain: ours with its interval (unadjusted), p adjusted by Holm, the paper's."""
  family = found[0]["family"] if found else 0
  lines = [f"| method − baseline | seeds | our gain [95% Welch interval, unadjusted] | "
           f"p (Holm over {family}) | verdict | paper's gain | paper's inside ours |",
           "|---|---|---|---|---|---|---|"]
  if not found:
    lines.append("| (no method and its baseline row both run yet) | | | | | | |")
  for g in found:
    c = g["comparison"]
    interval = (f"{c.difference:+.2f} [{c.low:+.2f}, {c.high:+.2f}]"
                if math.isfinite(c.low) else f"{c.difference:+.2f}")
    p = stats.format_p(g["p_holm"])
    inside = {True: "yes", False: "no", None: "—"}[g["covers_published"]]
    lines.append(f"| {g['label']} − {g['baseline']['recipe']} | {g['n_a']} vs "
                 f"{g['n_b']} | {interval} | {p} | {g['verdict']} | "
                 f"{g['published']:+.2f} | {inside} |")
  return "\n".join(lines)


def classes_table(data, entry):
  names, counts, runs = entry
  head = " | ".join(f"{recipe} ({n} seed{'s' if n > 1 else ''})" for recipe, _, n in runs)
  lines = [f"| {data}: class | training images | {head} |",
           "|---|---|" + "---|" * len(runs)]
  for i, count in enumerate(counts or [None] * len(runs[0][1])):
    name = names[i] if i < len(names) else str(i)
    cells = " | ".join(f"{means[i]:.1f}" for _, means, _ in runs)
    lines.append(f"| {name} | {'' if count is None else f'{count:,}'} | {cells} |")
  return "\n".join(lines)
