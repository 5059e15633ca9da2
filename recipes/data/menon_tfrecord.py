"""Menon et al. 2021's CIFAR-LT, from the TFRecord files they released.

Their logit-adjustment code (github.com/google-research/google-research,
logit_adjustment/) trains on ready-made files: `cifar10-lt_train.tfrecord` (12,406
images) with `cifar10_test.tfrecord` (10,000), and `cifar100-lt_train.tfrecord`
(10,847) with `cifar100_test.tfrecord` (10,000), from
http://storage.googleapis.com/gresearch/logit_adjustment/. Their README says the
training sets follow the EXP-100 profile; the code that drew them is not published, so
these files are the only way to their images (`@CaoLongTail` gives Cao et al.'s).

Each record is a tf.train.Example with `image/encoded` (the raw 32x32x3 uint8 bytes,
HWC) and `image/class/label` (int64), as their `utils.py` parses it. The files are
small; they are read into memory once.
"""

import os

import gin
import numpy as np
import tensorflow as tf

from recipes.data import source as source_lib
from recipes.errors import ConfigError

# name -> (classes, training file, its size, test file, its size), as their utils.py.
FILES = {
    "cifar10-lt": (10, "cifar10-lt_train.tfrecord", 12406, "cifar10_test.tfrecord", 10000),
    "cifar100-lt": (100, "cifar100-lt_train.tfrecord", 10847, "cifar100_test.tfrecord",
                    10000),
}
FEATURES = {
    "image/encoded": tf.io.FixedLenFeature((), tf.string),
    "image/class/label": tf.io.FixedLenFeature((), tf.int64),
}


def read(path, num_classes):
  """(uint8 images [N, 32, 32, 3], int32 labels [N]) of the records in `path`."""
  images, labels = [], []
  try:
    for batch in tf.data.TFRecordDataset(path).batch(4096).map(
        lambda records: tf.io.parse_example(records, FEATURES)).as_numpy_iterator():
      for data in batch["image/encoded"]:
        if len(data) != 32 * 32 * 3:
          raise ConfigError(f"{path}: a record's image/encoded holds {len(data)} bytes, "
                            "not 3072 (a raw 32x32x3 image); is it Menon et al.'s file?")
        images.append(np.frombuffer(data, np.uint8).reshape(32, 32, 3))
      labels.append(batch["image/class/label"])
  except (tf.errors.InvalidArgumentError, tf.errors.DataLossError) as e:
    raise ConfigError(f"{path} is not a TFRecord file of image/encoded and "
                      f"image/class/label examples ({e.message.splitlines()[0]})") from None
  labels = np.concatenate(labels).astype(np.int32) if labels else np.zeros([0], np.int32)
  if not len(labels):
    raise ConfigError(f"{path} holds no records")
  if labels.min() < 0 or labels.max() >= num_classes:
    raise ConfigError(f"{path} has labels outside [0, {num_classes})")
  return np.stack(images), labels


def named(name, num_classes):
  """`name`, or with `num_classes` given (10 or 100) the files of that class count."""
  by_count = {classes: key for key, (classes, *_) in FILES.items()}
  return source_lib.by_class_count("menon_tfrecord", name, num_classes,
                                   by_count) or "cifar10-lt"


@gin.configurable
def menon_tfrecord(data_dir=gin.REQUIRED, name=None, check_sizes=True, num_classes=None):
  """The `Source` of Menon et al.'s released CIFAR-LT files in `data_dir`.

  Args:
    data_dir: the directory holding the .tfrecord files (their `data/`).
    name: 'cifar10-lt' or 'cifar100-lt'; None: the one of `num_classes` classes, else
      'cifar10-lt'.
    check_sizes: check the files hold 12,406 / 10,847 training and 10,000 test images.
    num_classes: 10 or 100 names the files by their class count, as
      recipes/configs/data/cifar_lt_menon.gin binds it (NUM_CLASSES).
  """
  name = named(name, num_classes)
  if name not in FILES:
    raise ConfigError(f"menon_tfrecord.name={name!r} is not one of {sorted(FILES)}")
  num_classes, train_file, train_size, test_file, test_size = FILES[name]
  arrays = {}
  for split, file_name, size in (("train", train_file, train_size),
                                 ("test", test_file, test_size)):
    path = os.path.join(data_dir, file_name)
    if not os.path.isfile(path):
      raise ConfigError(
          f"{path!r} does not exist; download {file_name} from "
          f"http://storage.googleapis.com/gresearch/logit_adjustment/{file_name} into "
          "menon_tfrecord.data_dir")
    arrays[split] = read(path, num_classes)
    if check_sizes and len(arrays[split][1]) != size:
      raise ConfigError(f"{path} holds {len(arrays[split][1])} images, not {size} as "
                        "Menon et al.'s; download it again")

  return source_lib.Source(
      name=name, class_names=[str(c) for c in range(num_classes)],
      train_labels=arrays["train"][1], test_labels=arrays["test"][1],
      make_dataset=source_lib.in_memory(arrays))
