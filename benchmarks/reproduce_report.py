"""Ours against the papers': `./bazelw run //recipes/reproduce:report -- --runs=DIR|GLOB`

Reads every run under --runs (run directories, folders of them, or the committed
records: `--runs=docs/data/reproduce`), groups them by published row and seed, and
prints (benchmarks/reproduction.py has the rules):

- per row: the paper's top-1, our mean ± standard deviation over seeds (final weights),
  the difference and the tolerance's verdict; rows whose paper reports its best test
  epoch once more by that protocol;
- per method with a baseline row (LDAM-DRW against ERM): our gain with its 95% Welch
  interval, its p adjusted by Holm over the report's gains, and the paper's gain;
- per-class top-1 beside each class's training images.

It writes the same as report.md and a plot, report.png (ours against the paper's per
row, with error bars; per-class top-1 against training images), into --out_dir. With no
runs it prints the published table and the command that reproduces each row.

    --runs       run directories, records or globs (repeatable, comma-separated too)
    --out_dir    where report.md and report.png go (default: the working directory)
"""

import os

from absl import app
from absl import flags

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top,wrong-import-position
import numpy as np  # pylint: disable=g-import-not-at-top,wrong-import-position

from benchmarks import reproduction  # pylint: disable=g-import-not-at-top,wrong-import-position
from recipes import errors  # pylint: disable=g-import-not-at-top,wrong-import-position

_USER_DIR = os.environ.get("BUILD_WORKING_DIRECTORY", os.getcwd())

FLAGS = flags.FLAGS
flags.DEFINE_list("runs", [], "Run directories, run records (docs/data/reproduce) or "
                  "globs holding them.")
flags.DEFINE_string("out_dir", None, "Where report.md and report.png are written.")


def markdown(rows, grouped):
  """The report's text: rows, their protocol notes, gains and per-class tables."""
  compared = reproduction.compare(rows, grouped)
  parts = [reproduction.rows_table(compared)]
  notes = {r["row"]["recipe"]: r["row"]["selection"] for r in compared
           if r["row"].get("selection")}
  parts += [f"{recipe}: the paper's figure is {selection}; its first line is our final "
            f"weights, its {reproduction.PROTOCOL} line (if any run recorded it) the best "
            "test epoch as their code picks it, not a clean estimate."
            for recipe, selection in notes.items()]
  found = reproduction.gains(rows, grouped)
  if found:
    parts.append(reproduction.gains_table(found))
  parts += [reproduction.classes_table(data, entry)
            for data, entry in reproduction.per_class(rows, grouped).items()]
  return "\n\n".join(parts) + "\n"


def plot(path, rows, grouped):
  """Left: ours (mean, std error bars) against the paper's value and tolerance, a row a
  line. Right,
  where runs recorded it: per-class top-1 against the class's training images."""
  compared = reproduction.compare(rows, grouped)
  classes = reproduction.per_class(rows, grouped)
  panels = 2 if classes else 1
  fig, axes = plt.subplots(1, panels, figsize=(8 * panels, max(3.0, 0.45 * len(compared)
                                                                + 1.5)), squeeze=False)
  ax = axes[0][0]
  y = np.arange(len(compared))
  ax.hlines(y, [r["row"]["top1"] - r["row"]["tolerance"] for r in compared],
            [r["row"]["top1"] + r["row"]["tolerance"] for r in compared], color="0.85",
            linewidth=10, label="paper ± tolerance")
  ax.scatter([r["row"]["top1"] for r in compared], y, marker="|", s=300, color="black",
             label="paper")
  ax.errorbar([r["mean"] for r in compared], y, xerr=[r["std"] for r in compared],
              fmt="o", color="tab:blue", capsize=3, label="ours (mean ± std)")
  ax.set_yticks(y, [f"{r['label']} ({r['n']})" for r in compared], fontsize=8)
  ax.invert_yaxis()
  ax.set_xlabel("top-1 accuracy (%)")
  ax.legend(loc="lower right", fontsize=8)
  if classes:
    ax = axes[0][1]
    for data, (names, counts, runs) in classes.items():
      for recipe, means, n in runs:
        x = counts if counts else range(len(means))
        ax.plot(x, means, marker="o", label=f"{recipe} ({n})")
    if all(counts for _, counts, _ in classes.values()):
      ax.set_xscale("log")
      ax.set_xlabel("training images of the class")
    ax.set_ylabel("per-class top-1 (%)")
    ax.legend(fontsize=7)
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
                 f"\n    {reproduction.command(row)}")
  return "\n".join(lines)


def report(patterns, out_dir):
  """Prints and writes the comparison; returns the Markdown (None without runs)."""
  rows = reproduction.published()
  if not patterns:
    print(published_table(rows))
    return None
  grouped = reproduction.group(reproduction.read(reproduction.find(patterns, _USER_DIR)))
  if not grouped:
    raise reproduction.ReportError(
        f"no metrics.json or record under --runs={','.join(patterns)}; a run writes them "
        "when it finishes")
  unknown = sorted(set(grouped) - {row["recipe"] for row in rows})
  if unknown == sorted(grouped):
    raise reproduction.ReportError(
        f"none of the runs' recipes ({', '.join(unknown)}) is a published row; run a "
        "//recipes/reproduce recipe (its Task.name names the row)")
  text = markdown(rows, grouped)
  print(text, end="")
  if unknown:
    print(f"(not published rows, left out: {', '.join(unknown)})")
  os.makedirs(out_dir, exist_ok=True)
  with open(os.path.join(out_dir, "report.md"), "w") as f:
    f.write(text)
  plot(os.path.join(out_dir, "report.png"), rows, grouped)
  print(f"Wrote {os.path.join(out_dir, 'report.md')} and report.png")
  return text


def main(argv):
  if len(argv) > 1:
    errors.fail(f"unexpected arguments {' '.join(argv[1:])!r}; give runs as --runs=DIR,GLOB")
  try:
    report([p for p in FLAGS.runs if p], os.path.join(_USER_DIR, FLAGS.out_dir or ""))
  except reproduction.ReportError as e:
    errors.fail(str(e))


if __name__ == "__main__":
  app.run(main, flags_parser=errors.parse_flags)
