"""The embedded default: scikit-learn's bundled 8x8 handwritten digits.

1,797 real images in 10 classes ship inside scikit-learn (UCI optdigits test set), so
a recipe runs with no download. A balanced test split of `test_per_class` images per
class is held out with a seeded draw; the rest is the training pool.
"""

import gin
import numpy as np
import tensorflow as tf
from sklearn import datasets as sk_datasets

from recipes.data import source as source_lib


def load_arrays():
  """(images uint8 [N, 8, 8, 3] scaled from 0..16 to 0..255, labels int32 [N])."""
  digits = sk_datasets.load_digits()
  images = np.round(digits.images * (255.0 / 16.0)).astype(np.uint8)
  images = np.repeat(images[..., None], 3, axis=-1)
  return images, digits.target.astype(np.int32)


@gin.configurable
def digits(test_per_class=70, split_seed=0):
  """The digits `Source`: 10 classes, a balanced test split of `test_per_class` each."""
  images, labels = load_arrays()
  train_idx, test_idx = source_lib.balanced_holdout(labels, test_per_class, split_seed)
  splits = {"train": train_idx, "test": test_idx}

  def make_dataset(split, indices=None):
    idx = splits[split] if indices is None else splits[split][indices]
    return tf.data.Dataset.from_tensor_slices((images[idx], labels[idx]))

  return source_lib.Source(
      name="digits", class_names=[str(d) for d in range(10)],
      train_labels=labels[train_idx], test_labels=labels[test_idx],
      make_dataset=make_dataset, full_frame=True)
