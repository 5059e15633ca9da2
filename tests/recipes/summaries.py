"""The scalars a run wrote to TensorBoard, read back for tests."""

import os

import tensorflow as tf


def scalars(logdir, tag):
  """{step: value} of scalar `tag` in the event files of `logdir`."""
  values = {}
  for path in tf.io.gfile.glob(os.path.join(logdir, "events*")):
    for record in tf.data.TFRecordDataset(path):
      event = tf.compat.v1.Event.FromString(record.numpy())
      for value in event.summary.value:
        if value.tag == tag:
          values[event.step] = float(tf.make_ndarray(value.tensor))
  return values
