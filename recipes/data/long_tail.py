"""The exponential long-tail profile (Cao et al. 2019, LDAM; Cui et al. 2019).

Class i of C keeps n_i = floor(n_max * rho^(-i / (C - 1))) training examples, so the
imbalance ratio n_0 / n_{C-1} is rho. n_max defaults to the largest value every class
can supply; rho is lowered to what the data allows (n_{C-1} >= 1) with a warning.
"""

import math

import gin
import numpy as np
from absl import logging

from recipes.errors import ConfigError


def profile(n_max, num_classes, rho):
  """[n_0, ..., n_{C-1}] with n_i = floor(n_max * rho^(-i / (C - 1)))."""
  if num_classes < 2:
    return [int(n_max)] * num_classes
  # The small epsilon keeps exact products (e.g. 100 * 100^-1 = 1) from flooring low.
  return [int(math.floor(n_max * rho ** (-i / (num_classes - 1)) + 1e-9))
          for i in range(num_classes)]


@gin.configurable
class LongTail:
  """Draws a long-tailed training subset from a pool's labels.

  Args:
    rho: imbalance ratio n_0 / n_{C-1}; 1 keeps n_max of every class.
    n_max: examples of class 0; None takes the largest the pool allows.
    seed: which examples of each class are kept.
  """

  def __init__(self, rho=100.0, n_max=None, seed=0):
    if isinstance(rho, bool) or not isinstance(rho, (int, float)) or not rho >= 1:
      raise ConfigError(f"LongTail.rho must be a number >= 1, got {rho!r}; check RHO")
    if n_max is not None and (isinstance(n_max, bool) or not isinstance(n_max, int)
                              or n_max < 1):
      raise ConfigError(f"LongTail.n_max={n_max!r} must be a whole number >= 1 or None")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
      raise ConfigError(f"LongTail.seed={seed!r} must be a whole number >= 0; check SEED")
    self.rho = float(rho)
    self.n_max = n_max
    self.seed = seed

  def counts(self, available):
    """Per-class counts for a pool with `available[i]` examples of class i."""
    available = np.asarray(available)
    num_classes = len(available)
    if np.any(available == 0):
      missing = np.flatnonzero(available == 0).tolist()
      raise ConfigError(f"classes {missing} have no training examples; every class needs one")
    rho = self.rho
    if self.n_max is None:
      exponents = np.arange(num_classes) / max(num_classes - 1, 1)
      n_max = int(np.floor(np.min(available * rho ** exponents) + 1e-9))
    else:
      n_max = int(self.n_max)
    if n_max < rho:
      logging.warning("rho=%g needs n_max >= rho; the data allows rho=%d", rho, n_max)
      rho = float(n_max)
    counts = profile(n_max, num_classes, rho)
    short = [i for i, (n, a) in enumerate(zip(counts, available)) if n > a]
    if short:
      raise ConfigError(
          f"LongTail.n_max={n_max} asks for more examples than classes {short} have "
          f"({available[short].tolist()}); lower LongTail.n_max or leave it None")
    return counts

  def select(self, labels, num_classes):
    """Sorted indices into `labels` of the long-tailed subset."""
    labels = np.asarray(labels)
    counts = self.counts(np.bincount(labels, minlength=num_classes))
    rng = np.random.default_rng(self.seed)
    keep = [rng.choice(np.flatnonzero(labels == c), n, replace=False)
            for c, n in enumerate(counts)]
    return np.sort(np.concatenate(keep))
