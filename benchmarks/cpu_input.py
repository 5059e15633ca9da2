"""What the CPU input benchmarks share: photo-like images, and tf.data run on a set
number of threads (//benchmarks:input, //benchmarks:randaugment_ops)."""

import tensorflow as tf


def photo_like(rng, height, width):
  """Smooth colour fields with mid-scale texture and grain: JPEG sizes of photos."""
  coarse = rng.uniform(0, 255, [height // 24 + 2, width // 24 + 2, 3])
  mid = rng.normal(0, 50, [height // 4 + 1, width // 4 + 1, 3])
  image = (tf.image.resize(coarse, [height, width], "bicubic")
           + tf.image.resize(mid, [height, width]) + rng.normal(0, 14, [height, width, 3]))
  return tf.cast(tf.clip_by_value(image, 0, 255), tf.uint8)


def threaded(dataset, threads):
  """`dataset` run in a private pool of `threads` threads, each op on one."""
  options = tf.data.Options()
  options.threading.private_threadpool_size = threads
  options.threading.max_intra_op_parallelism = 1
  return dataset.with_options(options)


def one_intra_op_thread():
  """Sets TensorFlow's process-wide intra-op pool to one thread; False when it is too
  late (TensorFlow already ran). ScaleAndTranslate (the antialiased resize) shards its
  work over that pool, not over tf.data's private one, so without this a row's "1
  thread" would borrow every core for its resizes."""
  try:
    tf.config.threading.set_intra_op_parallelism_threads(1)
    return True
  except RuntimeError:
    return False
