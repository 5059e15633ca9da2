"""Long-tail evaluation: top-1, balanced accuracy and many/medium/few-shot accuracy.

Shot groups follow Liu et al. 2019 (OLTR, arXiv:1904.05160): many-shot classes have
more than `many_shot_above` training images, few-shot fewer than `few_shot_below`,
medium-shot the rest (100 and 20 for ImageNet-LT; a recipe sets its own).
"""

import numpy as np
import tensorflow as tf

# The metrics of a run's report that `Runtime.best_metric` may name (each higher-better).
METRICS = ("top1", "balanced_accuracy", "many_shot_accuracy", "medium_shot_accuracy",
           "few_shot_accuracy")

def per_class_accuracy(labels, predictions, num_classes):
  """Accuracy of each class on its test examples (NaN for a class with none)."""
  labels = np.asarray(labels)
  correct = np.asarray(predictions) == labels
  hits = np.bincount(labels, weights=correct, minlength=num_classes)
  totals = np.bincount(labels, minlength=num_classes)
  with np.errstate(invalid="ignore", divide="ignore"):
    return np.where(totals > 0, hits / np.maximum(totals, 1), np.nan)


def write_summaries(writer, metrics, step):
  """The METRICS of a report that have a value, as TensorBoard scalars at `step`."""
  with writer.as_default(step=step):
    for key in METRICS:
      if metrics.get(key) is not None:
        tf.summary.scalar(key, metrics[key])


def shot_groups(train_counts, many_shot_above=100, few_shot_below=20):
  """'many', 'medium' or 'few' for each class by its training count."""
  return ["many" if n > many_shot_above else "few" if n < few_shot_below else "medium"
          for n in train_counts]


def long_tail_metrics(labels, predictions, train_counts, many_shot_above=100,
                      few_shot_below=20):
  """The report of a long-tailed run, as plain Python numbers (JSON-ready)."""
  labels = np.asarray(labels)
  predictions = np.asarray(predictions)
  num_classes = len(train_counts)
  per_class = per_class_accuracy(labels, predictions, num_classes)
  groups = shot_groups(train_counts, many_shot_above, few_shot_below)
  metrics = {
      "top1": float(np.mean(predictions == labels)),
      "balanced_accuracy": float(np.nanmean(per_class)),
      "num_test_examples": int(len(labels)),
  }
  for group in ("many", "medium", "few"):
    members = [c for c, g in enumerate(groups) if g == group]
    accs = per_class[members] if members else np.array([])
    accs = accs[~np.isnan(accs)]
    metrics[f"{group}_shot_accuracy"] = float(np.mean(accs)) if len(accs) else None
    metrics[f"{group}_shot_classes"] = len(members)
  metrics["shot_thresholds"] = {"many_shot_above": many_shot_above,
                                "few_shot_below": few_shot_below}
  metrics["per_class_accuracy"] = [None if np.isnan(a) else float(a) for a in per_class]
  metrics["train_class_counts"] = [int(n) for n in train_counts]
  return metrics
