"""What every data source gives the trainer: labels up front, examples on demand."""

import dataclasses
from typing import Callable, List, Optional, Sequence

import numpy as np
import tensorflow as tf

from recipes.errors import ConfigError

# (split, indices or None for all) -> tf.data.Dataset of (uint8 image HWC, int32 label).
MakeDataset = Callable[[str, Optional[np.ndarray]], tf.data.Dataset]
# (split, indices or None for all) -> tf.data.Dataset of (encoded image bytes, int32
# label): the files' bytes, undecoded, for a decode fused with a crop.
ReadEncoded = Callable[[str, Optional[np.ndarray]], tf.data.Dataset]
# (split, indices or None for all) -> the paths among those examples that fail to decode.
FindBadFiles = Callable[[str, Optional[np.ndarray]], List[str]]


@dataclasses.dataclass(frozen=True)
class Source:
  """A labelled image data set with a training and a (balanced) test split.

  `train_labels[i]` is the label of the i-th training example, so a long-tailed
  subset can be drawn from labels alone; `make_dataset(split, indices)` then yields
  just those examples, in index order, decoded to uint8 with 3 channels.
  `full_frame`: the images are tightly framed (8x8 digits), so evaluation keeps the
  whole image instead of a model card's centre crop.
  `skipped_files`: paths left out because they do not decode (recorded in the report).
  `find_bad_files(split, indices)`: for sources read from files, the paths among those
  examples that fail to decode, so a decode error mid-run can name its file.
  `read_encoded(split, indices)`: for sources read from image files, the same examples
  as encoded bytes, so training can decode only a random crop's window
  (`augment.decode_and_crop`); None where the images are held decoded.
  `sequential`: the source reads its stored examples in order and cannot seek (a TFDS
  data set): `make_dataset` and `read_encoded` then take ascending, distinct
  `indices` only, and a sampled epoch is read as `pipeline` says.
  `validation_labels`: the labels of the source's own validation split
  (`make_dataset('validation', indices)`, e.g. a list data set's val list), or None:
  the trainer then holds out `Task.validation_per_class` of the training split.
  """
  name: str
  class_names: Sequence[str]
  train_labels: np.ndarray
  test_labels: np.ndarray
  make_dataset: MakeDataset
  full_frame: bool = False
  skipped_files: Sequence[str] = ()
  find_bad_files: Optional[FindBadFiles] = None
  read_encoded: Optional[ReadEncoded] = None
  sequential: bool = False
  validation_labels: Optional[np.ndarray] = None

  @property
  def num_classes(self):
    return len(self.class_names)


def in_memory(splits):
  """`make_dataset` over {split: (images uint8 [N, H, W, 3], labels int32 [N])} held in
  memory: the examples at `indices` (all when None), in index order."""

  def make_dataset(split, indices=None):
    images, labels = splits[split]
    if indices is not None:
      indices = np.asarray(indices, np.int64)
      images, labels = images[indices], labels[indices]
    return tf.data.Dataset.from_tensor_slices((images, labels))

  return make_dataset


def by_class_count(configurable, name, num_classes, names):
  """The data set `name`, or with `num_classes` given the one `names` ({class count:
  name}) has for it; one-line errors naming `configurable`'s bindings."""
  if num_classes is None:
    return name
  if (isinstance(num_classes, bool) or not isinstance(num_classes, int)
      or num_classes not in names):
    counts = " or ".join(f"{c} ({n})" for c, n in sorted(names.items()))
    raise ConfigError(f"{configurable}.num_classes={num_classes!r} must be {counts}; "
                      "check NUM_CLASSES")
  if name is not None and name != names[num_classes]:
    raise ConfigError(f"{configurable}.name={name!r} contradicts {configurable}."
                      f"num_classes={num_classes!r}; bind one of them")
  return names[num_classes]


def select(dataset, indices, size):
  """Keeps the examples of `dataset` (of `size` elements) whose position is in `indices`,
  in stored order: a reader that cannot seek neither reorders nor repeats, so
  `indices` must ascend without repeats (else ValueError, not a silent other set)."""
  if indices is None:
    return dataset
  if np.any(np.diff(np.asarray(indices, dtype=np.int64)) <= 0):
    raise ValueError("source.select reads examples in stored order: give ascending, "
                     "distinct indices (a sequential source's sampled epoch is read by "
                     "InputPipeline as drawn counts)")
  mask = np.zeros([size], dtype=bool)
  mask[np.asarray(indices, dtype=np.int64)] = True
  mask = tf.constant(mask)
  return dataset.enumerate().filter(lambda i, _: tf.gather(mask, i)).map(
      lambda _, example: example)


def balanced_holdout(labels, per_class, seed, setting="test_per_class"):
  """Indices (train, held out): `per_class` random examples of each class held out;
  `setting` names the binding to lower when a class is too small."""
  if isinstance(per_class, bool) or not isinstance(per_class, (int, np.integer)) or (
      per_class < 1):
    raise ConfigError(f"{setting}={per_class!r} must be a whole number >= 1")
  rng = np.random.default_rng(seed)
  test = []
  for c in np.unique(labels):
    members = np.flatnonzero(labels == c)
    if len(members) <= per_class:
      raise ConfigError(
          f"class {c} has {len(members)} examples, too few to hold out {per_class}; "
          f"lower {setting}")
    test.extend(rng.choice(members, per_class, replace=False))
  test = np.sort(np.asarray(test))
  train = np.setdiff1d(np.arange(len(labels)), test)
  return train, test


def per_class_draw(labels, per_class, seed, num_classes,
                   setting="Task.examples_per_class"):
  """Sorted indices into `labels` of `per_class` examples of every class 0 ..
  num_classes - 1, drawn without replacement by `seed` (a k-shot training set); a class
  with fewer than `per_class` examples is one ConfigError naming `setting`. The draw is
  `LongTail(rho=1, n_max=per_class, seed=seed).select`'s, example for example."""
  if isinstance(per_class, bool) or not isinstance(per_class, (int, np.integer)) or (
      per_class < 1):
    raise ConfigError(f"{setting}={per_class!r} must be a whole number >= 1 or None")
  labels = np.asarray(labels)
  counts = np.bincount(labels, minlength=num_classes)
  short = np.flatnonzero(counts < per_class)
  if len(short):
    c = int(short[0])
    raise ConfigError(
        f"{setting}={per_class}: class {c} has only {counts[c]} training examples (after "
        f"any validation hold-out; {len(short)} classes have fewer than {per_class}); lower "
        f"{setting}")
  rng = np.random.default_rng(seed)
  keep = [rng.choice(np.flatnonzero(labels == c), per_class, replace=False)
          for c in range(num_classes)]
  return np.sort(np.concatenate(keep))
