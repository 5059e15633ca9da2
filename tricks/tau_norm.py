"""The tau-normalised classifier (Kang et al. 2020, "Decoupling Representation and
Classifier for Long-Tailed Recognition", arXiv:1910.09217, Sec. 4, "tau-normalized
classifier"; the equation's number is not checked against the PDF):

    w~_j = w_j / ||w_j||^tau

for each class j's weight vector w_j of a linear classifier trained on long-tailed data
(tau = 1: L2 normalisation; tau = 0: unchanged). As their released code does it
(facebookresearch/classifier-balancing, tau_norm.py: `pnorm` divides each row of the
PyTorch weight [classes, features] by the power of its L2 norm, and `forward` scores
with `dotproduct_similarity`, features @ w~^T), the bias is dropped: logits are
features @ w~. Here the kernel is a Keras Dense kernel [features, classes], so each
*column* is a class's w_j.

Choosing tau: their script sweeps `np.linspace(0, 2, 21)` on the split named by
`--type` (their README runs it on train, val and test) and prints, for each value, the
mean per-class accuracy (`top1_all = np.mean(cls_accs)`, i.e. balanced accuracy),
leaving the choice to the reader. Here `choose_tau` makes that choice on a validation
split: the grid value of highest balanced accuracy (the smallest such tau on ties).
Never pass the test split.
"""

import numpy as np

# Their tau_norm.py's sweep: 0, 0.1, ..., 2.
GRID = tuple(float(t) for t in np.round(np.linspace(0.0, 2.0, 21), 10))


def normalize(kernel, tau):
  """kernel [features, classes] with column j divided by ||kernel[:, j]||_2^tau."""
  kernel = np.asarray(kernel)
  norms = np.sqrt(np.sum(np.square(kernel.astype(np.float64)), axis=0))
  return (kernel / np.power(norms, tau)).astype(kernel.dtype)


def logits(features, kernel, tau):
  """The tau-normalised classifier's logits, features @ normalize(kernel, tau), no bias."""
  return np.asarray(features, np.float64) @ normalize(kernel, tau).astype(np.float64)


def balanced_accuracy(labels, predictions, num_classes):
  """Mean over classes present in `labels` of their accuracy."""
  labels, predictions = np.asarray(labels), np.asarray(predictions)
  present = [c for c in range(num_classes) if np.any(labels == c)]
  return float(np.mean([np.mean(predictions[labels == c] == c) for c in present]))


def sweep(features, labels, kernel, grid=GRID):
  """{tau: balanced accuracy} of the tau-normalised classifier on (features, labels)."""
  num_classes = np.asarray(kernel).shape[1]
  return {float(tau): balanced_accuracy(
      labels, np.argmax(logits(features, kernel, tau), axis=1), num_classes)
          for tau in grid}


def choose_tau(features, labels, kernel, grid=GRID):
  """(tau of highest validation balanced accuracy, first on ties; the sweep)."""
  scores = sweep(features, labels, kernel, grid)
  best = max(scores.values())
  return next(t for t in scores if scores[t] == best), scores
