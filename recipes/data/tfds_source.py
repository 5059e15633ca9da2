"""TFDS data sets by name (`cifar10`, `cifar100`, `imagenet2012`, ...).

Labels of the training split are read once with the images left encoded
(`tfds.decode.SkipDecoding`), so a long-tailed subset is chosen without decoding a
single image; the pipeline then decodes only the chosen examples, in parallel, and
takes their encoded bytes where it decodes a JPEG inside its crop (a random resized
crop in training, the centred crop in evaluation: `augment.decode_and_crop`,
`zoo.card.eval_preprocess_encoded`). TFDS reads records in stored order
(`Source.sequential`).
"""

import gin
import numpy as np
import tensorflow as tf
import tensorflow_datasets as tfds

from recipes.data import source as source_lib
from recipes.errors import ConfigError


def _builder(name, data_dir, download):
  try:
    builder = tfds.builder(name, data_dir=data_dir)
  except tfds.core.registered.DatasetNotFoundError:
    raise ConfigError(
        f"no TFDS data set named {name!r}; see tfds.list_builders() for the names") from None
  if not builder.is_prepared():
    if not download:
      raise ConfigError(
          f"TFDS data set {name!r} is not prepared in data_dir {data_dir!r}; point "
          "tfds_source.data_dir at a prepared copy or bind tfds_source.download=True")
    builder.download_and_prepare()
  return builder


@gin.configurable
def tfds_source(name=gin.REQUIRED, data_dir=None, train_split="train",
                test_split="test", download=False, image_key="image", label_key="label"):
  """A TFDS `Source`; `test_split` should be balanced (it is for CIFAR and ImageNet)."""
  builder = _builder(name, data_dir, download)
  splits = {"train": train_split, "test": test_split}
  for split in splits.values():
    if split not in builder.info.splits:
      raise ConfigError(
          f"TFDS data set {name!r} has no split {split!r}; it has "
          f"{sorted(builder.info.splits)}")
  label_feature = builder.info.features[label_key]

  def encoded(split):
    return builder.as_dataset(
        split=splits[split], shuffle_files=False,
        decoders={image_key: tfds.decode.SkipDecoding()}).map(
            lambda ex: (ex[image_key], tf.cast(ex[label_key], tf.int32)))

  def labels(split):
    batches = encoded(split).map(lambda _, label: label).batch(8192)
    return np.concatenate(list(batches.as_numpy_iterator())).astype(np.int32)

  train_labels = labels("train")
  test_labels = labels("test")

  def decode(image, label):
    image = tf.io.decode_image(image, channels=3, expand_animations=False)
    return tf.cast(image, tf.uint8), label

  def read_encoded(split, indices=None):
    size = len(train_labels) if split == "train" else len(test_labels)
    return source_lib.select(encoded(split), indices, size)

  def make_dataset(split, indices=None):
    return read_encoded(split, indices).map(
        decode, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)

  return source_lib.Source(
      name=name, class_names=list(label_feature.names),
      train_labels=train_labels, test_labels=test_labels, make_dataset=make_dataset,
      read_encoded=read_encoded, sequential=True)
