"""Class-aware sampling of a long-tailed training set (Kang et al. 2020,
"Decoupling Representation and Classifier for Long-Tailed Recognition",
arXiv:1910.09217, Sec. 3, eq. 1), and its deferred use (Cao et al. 2019, DRS).

A sample is drawn in two stages: class j with probability

    p_j = n_j^q / sum_i n_i^q                                         (eq. 1)

(q = 1 instance-balanced, q = 0 class-balanced, q = 1/2 square-root), then an example
of class j. Progressively balanced sampling moves from instance- to class-balanced
over the T epochs of training (Kang et al. eq. 2):

    p_j(t) = (1 - t / T) p_j^IB + (t / T) p_j^CB.

Within a class, examples come in a fresh random order, cycled as often as the class is
drawn (the class-aware sampler of Shen et al. 2016, as Kang et al.'s code draws it).
An epoch has as many samples as the training set, and its order is a function of
(seed, epoch) alone, so a resumed run and every worker of a job draw the same epoch.
Deferred re-sampling (DRS, Cao et al. 2019 Sec. 3.3) samples instance-balanced (each
example once, shuffled) before `start_epoch`.
"""

import dataclasses
from typing import Optional

import numpy as np

KINDS = ("instance", "class", "sqrt", "progressive")
_Q = {"instance": 1.0, "class": 0.0, "sqrt": 0.5}


def class_probabilities(counts, q):
  """p_j = n_j^q / sum_i n_i^q (eq. 1); classes without examples get 0."""
  counts = np.asarray(counts, np.float64)
  weights = np.where(counts > 0, np.power(np.maximum(counts, 1), q), 0.0)
  return weights / weights.sum()


@dataclasses.dataclass(frozen=True)
class Sampler:
  """Which class-aware sampler trains, from which epoch.

  kind: "instance", "class", "sqrt" or "progressive".
  start_epoch: epochs before it sample instance-balanced (DRS: 160 of Cao et al.'s 200).
  epochs: T of progressive sampling (the run's epochs).
  """
  kind: str = "class"
  start_epoch: int = 0
  epochs: Optional[int] = None

  def __post_init__(self):
    if self.kind not in KINDS:
      raise ValueError(f"Sampler.kind={self.kind!r}; choose one of {', '.join(KINDS)}")
    if isinstance(self.start_epoch, bool) or not isinstance(self.start_epoch, int) or \
        self.start_epoch < 0:
      raise ValueError(f"Sampler.start_epoch={self.start_epoch!r} must be a whole number "
                       ">= 0")
    if self.kind == "progressive" and (
        isinstance(self.epochs, bool) or not isinstance(self.epochs, int) or
        self.epochs < 1):
      raise ValueError(f"Sampler.epochs={self.epochs!r}: progressive sampling needs the "
                       "run's epoch count T >= 1 (e.g. Sampler.epochs = %EPOCHS)")

  def active(self, epoch):
    """Whether epoch `epoch` (0-based) is drawn by this sampler, not shuffled once."""
    return epoch >= self.start_epoch and self.kind != "instance"

  def probabilities(self, counts, epoch):
    """The class probabilities of epoch `epoch`."""
    if self.kind != "progressive":
      return class_probabilities(counts, _Q[self.kind])
    t = min(epoch / self.epochs, 1.0)
    return ((1 - t) * class_probabilities(counts, 1.0)
            + t * class_probabilities(counts, 0.0))

  def epoch_order(self, labels, num_classes, epoch, seed):
    """Positions into `labels` of epoch `epoch`'s len(labels) samples."""
    labels = np.asarray(labels)
    counts = np.bincount(labels, minlength=num_classes)
    rng = np.random.default_rng([seed, epoch, 0x5A3])
    classes = rng.choice(num_classes, size=len(labels), p=self.probabilities(counts, epoch))
    order = np.empty(len(labels), np.int64)
    # Each class's positions, ascending, from one stable sort (not a pass a class).
    members_of = _grouped(labels, counts)
    drawn_of = _grouped(classes, np.bincount(classes, minlength=num_classes))
    for c in np.unique(classes):
      members, drawn = members_of[c], drawn_of[c]
      cycles = -(-len(drawn) // len(members))
      stream = np.concatenate([rng.permutation(members) for _ in range(cycles)])
      order[drawn] = stream[:len(drawn)]
    return order


def _grouped(values, counts):
  """[positions of `values` equal to c, ascending] for every class c."""
  return np.split(np.argsort(values, kind="stable"), np.cumsum(counts)[:-1])
