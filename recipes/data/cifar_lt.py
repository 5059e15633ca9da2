"""CIFAR-10-LT and CIFAR-100-LT exactly as Cao et al. (2019, LDAM-DRW) draw them.

Their `imbalance_cifar.py` (github.com/kaidic/LDAM-DRW, IMBALANCECIFAR10) keeps, of
class i of C (in label order),

    n_i = int(img_max * imb_factor ** (i / (C - 1.0))),  img_max = int(N / C),

with imb_factor = 1 / rho (0.01 for rho = 100), and picks which n_i: it calls
`np.random.seed(rand_number)` once, then for each class in label order takes
`idx = np.where(targets == c)[0]`, `np.random.shuffle(idx)` and keeps `idx[:n_i]`.
`CaoLongTail` replays that with numpy's legacy `RandomState(seed)` (the generator behind
`np.random.seed` / `np.random.shuffle`), so for the same training labels in the same
order it keeps the same images, bit for bit. The test set is not touched.

The selection is exact only on the original training order: the python pickles
`data_batch_1` .. `data_batch_5` (CIFAR-100: `train`) concatenated, which is what
torchvision, and so their code, reads. Use `@cifar_python` (recipes/data/cifar_python.py)
for that. TFDS's `cifar10` / `cifar100` 'train' split is NOT in that order (TFDS stores
the generated records sorted by a hash of their key), so with `@tfds_source` the
counts are the same but the images kept differ.

`seed` is their `--rand_number` (default 0): it alone decides which images of each
class are kept. Different seeds give different, equally valid CIFAR-LT training sets,
and results move with it (the issue notes about 3 points of ERM accuracy); for their
split keep seed = 0 and vary the training seed separately (`Runtime.seed`).
"""

import gin
import numpy as np

from recipes.errors import ConfigError


def cao_counts(num_examples, num_classes, rho):
  """Their `get_img_num_per_cls(cls_num, 'exp', 1 / rho, 1.0)` on `num_examples`
  training examples: [int(img_max * (1/rho) ** (i / (C - 1.0))) for each class i]."""
  imb_factor = 1.0 / rho
  img_max = int(num_examples / num_classes * 1.0)
  return [int(img_max * (imb_factor ** (i / (num_classes - 1.0))))
          for i in range(num_classes)]


def cao_draw(labels, counts, seed):
  """Indices into `labels` of their selection, in their order (class 0's kept images in
  shuffled order, then class 1's, ...): their `gen_imbalanced_data` after
  `np.random.seed(seed)`."""
  labels = np.asarray(labels, dtype=np.int64)
  rng = np.random.RandomState(seed)  # what np.random.seed(seed) sets up
  kept = []
  for the_class, the_img_num in zip(np.unique(labels), counts):
    idx = np.where(labels == the_class)[0]
    rng.shuffle(idx)
    kept.append(idx[:the_img_num])
  return np.concatenate(kept)


@gin.configurable
class CaoLongTail:
  """`Task.long_tail = @CaoLongTail()`: Cao et al.'s CIFAR-LT draw (see the module).

  Args:
    rho: imbalance ratio n_0 / n_{C-1} (their imb_factor = 1 / rho): 100, 50, 10 ...
    seed: their `rand_number`, 0 in their code; it decides which images are kept.

  Exact when the pool is the whole training split in its original order (no
  `Task.validation_per_class`); the pool must hold the same number of every class, as
  their img_max = N / C assumes.
  """

  def __init__(self, rho=100.0, seed=0):
    if isinstance(rho, bool) or not isinstance(rho, (int, float)) or not rho >= 1:
      raise ConfigError(f"CaoLongTail.rho must be a number >= 1, got {rho!r}; check RHO")
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**32:
      raise ConfigError(
          f"CaoLongTail.seed={seed!r} must be a whole number in [0, 2**32) (numpy's "
          "legacy seed); their rand_number is 0")
    self.rho = float(rho)
    self.seed = seed

  def counts(self, available):
    """Per-class counts for a pool with `available[i]` examples of class i."""
    available = np.asarray(available)
    if len(available) < 2:
      raise ConfigError("CaoLongTail needs at least 2 classes")
    if np.any(available != available[0]):
      raise ConfigError(
          "CaoLongTail draws from a balanced pool (CIFAR's training split), but class "
          f"sizes range from {available.min()} to {available.max()}; bind "
          "Task.validation_per_class = 0 and a balanced source, or use @LongTail()")
    return cao_counts(int(available.sum()), len(available), self.rho)

  def draw(self, labels, num_classes):
    """Indices into `labels` of the subset, in Cao et al.'s order."""
    labels = np.asarray(labels)
    available = np.bincount(labels, minlength=num_classes)
    if np.any(available == 0):
      missing = np.flatnonzero(available == 0).tolist()
      raise ConfigError(f"classes {missing} have no training examples; every class needs one")
    return cao_draw(labels, self.counts(available), self.seed)

  def select(self, labels, num_classes):
    """Sorted indices into `labels` of the subset (the `LongTail.select` contract)."""
    return np.sort(self.draw(labels, num_classes))
