"""The baselines README reports for a recipe's split, to print beside a run's result.

README's flagship table is the long-tail benchmark's JSON, committed under docs/data/
(//benchmarks:long_tail). A run is on the same split and schedule as its baseline when
its recipe, training class counts, test size, epochs, steps and global batch size are
the benchmark's; then the run's report ends with the baseline's balanced accuracy.
"""

import json
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# recipe name -> the benchmark JSON README's table comes from.
README_TABLES = {"nfnet_long_tail": "docs/data/nfnet_long_tail.json"}
BASELINE = "cross-entropy"
SAME = ("train_class_counts", "num_test_examples", "epochs", "steps")


def readme_baseline(metrics, root=ROOT):
  """(mean balanced accuracy of the baseline over its seeds, the seeds, this seed's
  value or None) for a run whose split and schedule are README's, else None."""
  path = README_TABLES.get(metrics.get("recipe"))
  if path is None or not os.path.exists(os.path.join(root, path)):
    return None
  try:
    with open(os.path.join(root, path)) as f:
      runs = json.load(f)["runs"][BASELINE]
  except (OSError, ValueError, KeyError):
    return None
  if not runs or any(any(run.get(k) != metrics.get(k) for k in SAME)
                     for run in runs.values()):
    return None
  values = {seed: run["balanced_accuracy"] for seed, run in runs.items()}
  mean = sum(values.values()) / len(values)
  return mean, sorted(values), values.get(str(metrics.get("seed")))
