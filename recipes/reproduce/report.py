"""Ours against the papers': `bazel run //recipes/reproduce:report -- --runs=DIR|GLOB ...`

Reads every run's metrics.json under the given directories (a run's model_dir, or a
folder holding many), groups the runs by recipe (`Task.name`, which each reproduce
recipe sets to its row's name), and prints, per published row: the paper's top-1, our
mean, standard deviation and seed count, the difference, and whether the mean is within
the row's tolerance (with the seeds the tolerance asks for). It also writes the table
as Markdown and a plot (ours against the paper's, per row, with error bars). With no
runs it prints the published table and the command that reproduces each row.

"Ours" is always the final weights. A row whose paper's code reports its best epoch on
the test set (published.json's "selection") is compared a second time, on its own
line labelled PROTOCOL, with the runs' `best_on_test_protocol` top-1 (the recipe's
Runtime.test_selection), against the same tolerance: the paper's protocol, not a clean
estimate.

    --runs       run directories or globs (repeatable, comma-separated too)
    --out_dir    where report.md and report.png go (default: the working directory)
"""

import glob
import json
import os

from absl import app
from absl import flags

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top,wrong-import-position
import numpy as np  # pylint: disable=g-import-not-at-top,wrong-import-position

from recipes import errors  # pylint: disable=g-import-not-at-top,wrong-import-position

TABLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "published.json")
_USER_DIR = os.environ.get("BUILD_WORKING_DIRECTORY", os.getcwd())

FLAGS = flags.FLAGS
flags.DEFINE_list("runs", [], "Run directories or globs holding metrics.json files.")
flags.DEFINE_string("out_dir", None, "Where report.md and report.png are written.")


PROTOCOL = "[best test epoch: the paper's protocol]"


class ReportError(ValueError):
  """Bad input: one line, exit status 2."""


def published(path=TABLE):
  """The published rows (dicts), checked: unique recipes, numbers where numbers go."""
  with open(path) as f:
    rows = json.load(f)["rows"]
  seen = set()
  for row in rows:
    if row["recipe"] in seen:
      raise ValueError(f"{path}: recipe {row['recipe']!r} appears twice")
    seen.add(row["recipe"])
    if not (0 < row["top1"] <= 100 and row["tolerance"] > 0 and row["seeds"] >= 1):
      raise ValueError(f"{path}: row {row['recipe']!r} has a top1, tolerance or seed "
                       "count out of range")
    if "selection" in row and not (isinstance(row["selection"], str)
                                   and row["selection"].strip()):
      raise ValueError(f"{path}: row {row['recipe']!r}: selection must say how the "
                       "paper's code chose its reported epoch")
  return rows


def command(row):
  """The command that runs one seed of `row`."""
  name = row["recipe"]
  data = "".join(f' --gin_bindings="{b}"' for b in row.get("data_bindings", ()))
  return (f"./bazelw run //recipes/reproduce:{name} --{data} --gin_bindings='SEED = 0' "
          f"--model_dir=runs/{name}/seed0")


def find_metrics(patterns):
  """Paths of the metrics.json files in or under the directories `patterns` name."""
  found = []
  for pattern in patterns:
    pattern = os.path.join(_USER_DIR, os.path.expanduser(pattern))
    matched = sorted(glob.glob(pattern))
    if not matched:
      raise ReportError(f"--runs={pattern} matches nothing; give run directories (a "
                        "model_dir, or a folder of them) or globs such as 'runs/cao2019_*'")
    for path in matched:
      if os.path.isfile(path) and os.path.basename(path) == "metrics.json":
        found.append(path)
      elif os.path.isdir(path):
        found += sorted(glob.glob(os.path.join(path, "**", "metrics.json"), recursive=True))
  found = set(found)
  # A decoupled run's result is stage 2's; its stage 1 (the joint model) is not a seed.
  return sorted(f for f in found if not (
      os.path.basename(os.path.dirname(f)) == "stage1" and os.path.join(
          os.path.dirname(os.path.dirname(f)), "stage2", "metrics.json") in found))


def read_runs(paths, protocol=False):
  """{recipe: [top-1 %, ...]} from metrics.json files (unreadable ones are errors): the
  final weights', or with `protocol` the best test epoch's (`best_on_test_protocol`,
  runs without one left out)."""
  runs = {}
  for path in paths:
    try:
      with open(path) as f:
        metrics = json.load(f)
      recipe, top1 = metrics["recipe"], float(metrics["top1"])
      if protocol:
        selected = metrics.get("best_on_test_protocol")
        if not selected:
          continue
        top1 = float(selected["top1"])
    except (OSError, ValueError, KeyError, TypeError) as e:
      raise ReportError(f"{path} is not a finished run's metrics.json ({type(e).__name__}: "
                        f"{e}); remove it from --runs or rerun that run") from None
    runs.setdefault(recipe, []).append(100.0 * top1)
  return runs


def compare(rows, runs, protocol_runs=None):
  """One result dict per published row with runs: ours (final weights) against the
  paper's; after a row with a "selection", a second one (label PROTOCOL) from
  `protocol_runs` (read_runs(..., protocol=True)) where there are any, same tolerance."""
  results = []
  for row in rows:
    results += _compare_row(row, runs.get(row["recipe"]), row["recipe"])
    if row.get("selection"):
      results += _compare_row(row, (protocol_runs or {}).get(row["recipe"]),
                              f"{row['recipe']} {PROTOCOL}")
  return results


def _compare_row(row, ours, label):
  """[the result of `ours` (top-1 %s) against `row`, labelled], or [] without runs."""
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


def markdown(results):
  lines = ["| recipe | paper | data | method | paper top-1 | ours (mean ± std, seeds) | "
           "difference | tolerance | verdict |", "|---|---|---|---|---|---|---|---|---|"]
  for r in results:
    row = r["row"]
    lines.append(f"| {r['label']} | {row['paper']} | {row['data']} | {row['method']} | "
                 f"{row['top1']:.2f} | {r['mean']:.2f} ± {r['std']:.2f} ({r['n']}) | "
                 f"{r['diff']:+.2f} | ±{row['tolerance']:g} ({row['seeds']} seeds) | "
                 f"{r['verdict']} |")
  notes = {r["row"]["recipe"]: r["row"]["selection"] for r in results
           if r["row"].get("selection")}
  for recipe, selection in notes.items():
    lines.append(f"\n{recipe}: the paper's figure is {selection}; its first line is "
                 f"our final weights, its {PROTOCOL} line (if any run recorded it) the "
                 "best test epoch as their code picks it, not a clean estimate.")
  return "\n".join(lines) + "\n"


def plot(path, results):
  """Ours (mean, std error bars) against the paper's value, one row a line."""
  height = max(2.0, 0.45 * len(results) + 1)
  fig, ax = plt.subplots(figsize=(8, height))
  y = np.arange(len(results))
  ax.scatter([r["row"]["top1"] for r in results], y, marker="|", s=300, color="black",
             label="paper")
  ax.errorbar([r["mean"] for r in results], y, xerr=[r["std"] for r in results], fmt="o",
              color="tab:blue", capsize=3, label="ours (mean ± std)")
  ax.set_yticks(y, [r["label"] for r in results], fontsize=8)
  ax.invert_yaxis()
  ax.set_xlabel("top-1 accuracy (%)")
  ax.legend(loc="lower right", fontsize=8)
  fig.tight_layout()
  fig.savefig(path, dpi=100)
  plt.close(fig)


def published_table(rows):
  lines = []
  for row in rows:
    needs = ("runs on a CPU" if row["needs"] == "cpu" else f"needs a {row['needs'].upper()}")
    offline = f"; {row['offline']}" if row.get("offline") else ""
    lines.append(f"{row['recipe']}: {row['paper']}, {row['data']}, {row['model']}, "
                 f"{row['method']}: top-1 {row['top1']:.2f} (±{row['tolerance']:g} over "
                 f"{row['seeds']} seed{'s' if row['seeds'] > 1 else ''}; {needs}{offline})"
                 f"\n    {command(row)}")
  return "\n".join(lines)


def report(patterns, out_dir):
  """Prints and writes the comparison; returns the Markdown."""
  rows = published()
  if not patterns:
    print(published_table(rows))
    return None
  paths = find_metrics(patterns)
  runs = read_runs(paths)
  if not runs:
    raise ReportError(f"no metrics.json under --runs={','.join(patterns)}; a run writes it "
                      "when it finishes")
  results = compare(rows, runs, read_runs(paths, protocol=True))
  unknown = sorted(set(runs) - {row["recipe"] for row in rows})
  if not results:
    raise ReportError(f"none of the runs' recipes ({', '.join(unknown)}) is a published "
                      "row; run a //recipes/reproduce recipe (its Task.name names the row)")
  text = markdown(results)
  print(text, end="")
  if unknown:
    print(f"(not published rows, left out: {', '.join(unknown)})")
  os.makedirs(out_dir, exist_ok=True)
  with open(os.path.join(out_dir, "report.md"), "w") as f:
    f.write(text)
  plot(os.path.join(out_dir, "report.png"), results)
  print(f"Wrote {os.path.join(out_dir, 'report.md')} and report.png")
  return text


def main(argv):
  if len(argv) > 1:
    errors.fail(f"unexpected arguments {' '.join(argv[1:])!r}; give runs as --runs=DIR,GLOB")
  try:
    report([p for p in FLAGS.runs if p], FLAGS.out_dir or _USER_DIR)
  except ReportError as e:
    errors.fail(str(e))




if __name__ == "__main__":
  app.run(main, flags_parser=errors.parse_flags)
