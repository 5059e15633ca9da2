"""Data echoing (Choi et al. 2019, arXiv:1907.05550, section 3).

When the input pipeline is slower than the accelerator, reuse what it produced: each
upstream element is emitted `factor` times. A non-integer factor e emits floor(e)
copies plus one more with probability e - floor(e), so e copies on average (the
paper's definition). Where it sits decides what is repeated: an example before
augmentation (copies are augmented differently), an example after augmentation, or a
whole batch. Example echoing should be followed by a shuffle, so copies do not sit
together in a batch.
"""

import math

import tensorflow as tf


def echo(dataset, factor, seed=0):
  """Emits each element of `dataset` `factor` times (on average, if fractional).

  The extra copy of a fractional factor is drawn statelessly from (seed, position),
  so the same dataset echoes the same way every time it is built.
  """
  if factor < 1:
    raise ValueError(f"echo factor must be >= 1, got {factor}")
  whole = int(math.floor(factor))
  fraction = factor - whole
  if fraction == 0 and whole == 1:
    return dataset

  def copies(position):
    if not fraction:
      return tf.constant(whole, tf.int64)
    u = tf.random.stateless_uniform(
        [], seed=tf.stack([tf.cast(seed, tf.int64), position]), dtype=tf.float32)
    return whole + tf.cast(u < fraction, tf.int64)

  def repeat(position, element):
    return tf.data.Dataset.from_tensors(element).repeat(copies(position))

  return dataset.enumerate().flat_map(repeat)


def echoed_count(num_elements, factor):
  """How many elements `echo` emits for `num_elements` in, on average."""
  return int(math.floor(num_elements * factor))
