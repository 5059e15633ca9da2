"""The baselines README reports for a recipe's split, to print beside a run's result.

Each recipe README states a result for has its benchmark's JSON committed under
docs/data/: the flagship's table (//benchmarks:long_tail: cross-entropy is its
baseline) and the fine-tuning recipe's arms (//benchmarks:finetune: the same recipe
from scratch and its linear probe). Both hold {"runs": {arm: {seed: run}}}. A run is on
the same split and schedule as a baseline when its recipe, training class counts, test
size, epochs and steps (so its batch) are the benchmark's; then the run's report
ends with each baseline's balanced accuracy.
"""

import json
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# recipe name -> (the benchmark JSON README's figures come from, the arms shown).
README_TABLES = {
    "nfnet_long_tail": ("docs/data/nfnet_long_tail.json", ("cross-entropy",)),
    "efficientnet_lite0_finetune": (
        "docs/data/finetune/efficientnet_lite0_finetune_3b99fbac9dc3_2026-12-02.json",
        ("scratch", "linear probe")),
}
SAME = ("train_class_counts", "num_test_examples", "epochs", "steps")


def readme_baselines(metrics, root=ROOT):
  """[(arm, mean balanced accuracy over its seeds, the seeds, this seed's value or
  None)] of README's baselines for a run whose split and schedule are theirs, else []."""
  path, arms = README_TABLES.get(metrics.get("recipe"), (None, ()))
  if path is None or not os.path.exists(os.path.join(root, path)):
    return []
  try:
    with open(os.path.join(root, path)) as f:
      runs = json.load(f)["runs"]
    found = []
    for arm in arms:
      seeds = runs[arm]
      if not seeds or any(any(run.get(k) != metrics.get(k) for k in SAME)
                          for run in seeds.values()):
        return []
      values = {seed: run["balanced_accuracy"] for seed, run in seeds.items()}
      found.append((arm, sum(values.values()) / len(values), sorted(values),
                    values.get(str(metrics.get("seed")))))
  except (OSError, ValueError, KeyError, TypeError, AttributeError):
    return []
  return found
