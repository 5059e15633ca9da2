"""What a run leaves for people: metrics.json and the per-class accuracy plot."""

import json
import math
import os
import tempfile

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top,wrong-import-position


def atomic_write(path, write):
  """Calls `write(file)` on a temporary file, then renames it onto `path`."""
  directory = os.path.dirname(os.path.abspath(path))
  fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-")
  try:
    with os.fdopen(fd, "wb") as f:
      write(f)
    os.replace(tmp, path)
  except BaseException:
    os.unlink(tmp)
    raise


def finite(data):
  """`data` with every NaN or Inf float replaced by None (strict JSON has neither)."""
  if isinstance(data, float):
    return data if math.isfinite(data) else None
  if isinstance(data, dict):
    return {k: finite(v) for k, v in data.items()}
  if isinstance(data, (list, tuple)):
    return [finite(v) for v in data]
  return data


def write_json(path, data):
  """Strict JSON (NaN and Inf written as null), written atomically."""
  atomic_write(path, lambda f: f.write(
      (json.dumps(finite(data), indent=2, sort_keys=True, allow_nan=False) + "\n").encode()))


def write_text(path, text):
  atomic_write(path, lambda f: f.write(text.encode()))


def plot_per_class_accuracy(path, metrics, title=""):
  """Per-class test accuracy against the class's training count (log scale)."""
  counts = metrics["train_class_counts"]
  accs = metrics["per_class_accuracy"]
  thresholds = metrics["shot_thresholds"]
  fig, ax = plt.subplots(figsize=(7, 4.5), dpi=120)
  xs = [c for c, a in zip(counts, accs) if a is not None]
  ys = [a for a in accs if a is not None]
  ax.scatter(xs, ys, s=28, color="tab:blue", zorder=3)
  names = metrics.get("class_names") or []
  if len(names) <= 30:  # label the points while the plot can hold the names
    for name, x, y in zip((n for n, a in zip(names, accs) if a is not None), xs, ys):
      ax.annotate(str(name), (x, y), textcoords="offset points", xytext=(4, -10),
                  fontsize=7, color="tab:blue")
  ax.set_xscale("log")
  ax.set_ylim(-0.03, 1.03)
  ax.set_xlabel("training images in the class")
  ax.set_ylabel("test accuracy of the class")
  for x, label in ((thresholds["few_shot_below"], "few | medium"),
                   (thresholds["many_shot_above"], "medium | many")):
    ax.axvline(x, color="gray", linestyle="--", linewidth=1)
    ax.text(x, 0.0, f" {label}", color="gray", fontsize=8, va="bottom")
  ax.axhline(metrics["balanced_accuracy"], color="tab:orange", linewidth=1,
             label=f"balanced accuracy {metrics['balanced_accuracy']:.3f}")
  # Below the axes, under the x label: inside them it hid points and the threshold
  # labels at accuracy 0 (a few-shot class often scores 0).
  ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), fontsize=8, frameon=False)
  ax.grid(True, which="both", alpha=0.3)
  ax.set_title(title or "per-class accuracy vs. training count")
  fig.tight_layout()
  atomic_write(path, lambda f: fig.savefig(f, format="png"))
  plt.close(fig)


def result_lines(metrics, baselines=()):
  """What a finished run prints: balanced accuracy on the test split with the shot
  groups, and README's baselines on the same split where it has them
  (baselines.readme_baselines: [(arm, mean, seeds, this seed's value)])."""
  if metrics.get("balanced_accuracy") is None:
    return []
  groups = ", ".join(
      f"{g}-shot {metrics[f'{g}_shot_accuracy']:.3f} ({metrics.get(f'{g}_shot_classes')} "
      "classes)" for g in ("many", "medium", "few")
      if metrics.get(f"{g}_shot_accuracy") is not None)
  lines = [f"Balanced accuracy {metrics['balanced_accuracy']:.3f} on the test split "
           f"({metrics.get('num_test_examples')} images; top-1 {metrics['top1']:.3f})"
           + (f"; {groups}" if groups else "")]
  for arm, mean, seeds, this_seed in baselines:
    same = (f"; seed {metrics.get('seed')}: {this_seed:.3f}" if this_seed is not None
            else "")
    lines.append(f"{arm} on this split: {mean:.3f} (README: mean of seeds "
                 f"{', '.join(seeds)}{same})")
  return lines
