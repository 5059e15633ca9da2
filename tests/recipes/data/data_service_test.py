"""The input pipeline's training epoch through TensorFlow's tf.data service: a
dispatcher and a worker on localhost (in-process servers) serve the same batches the
pipeline yields locally (docs/input.md: scaling input past one host's CPUs)."""

import os

import numpy as np
import tensorflow as tf

from recipes.data import image_folder
from recipes.data import pipeline


class DataServiceTest(tf.test.TestCase):

  def test_distributed_epoch_has_the_same_batches(self):
    root = os.path.join(self.get_temp_dir(), "tree")
    rng = np.random.default_rng(0)
    for c in ("a", "b"):
      os.makedirs(os.path.join(root, c))
      for i in range(4):
        image = rng.integers(0, 256, [20 + 4 * i, 24, 3], dtype=np.uint8)
        tf.io.write_file(os.path.join(root, c, f"{i}.jpg"), tf.io.encode_jpeg(image))
    source = image_folder.image_folder(root, test_per_class=1)
    p = pipeline.InputPipeline(
        batch_size=2, image_size=8, random_resized_crop=(0.08, 1.0), random_flip=True,
        mean=(0.5, 0.5, 0.5), std=(0.25, 0.25, 0.25), eval_image_size=8,
        eval_crop_fraction=1.0, eval_resize_method="bilinear", randaugment=())
    local = p.train_dataset(source, np.arange(6), epoch=2, seed=1)

    dispatcher = tf.data.experimental.service.DispatchServer()
    address = dispatcher.target.split("://")[1]
    worker = tf.data.experimental.service.WorkerServer(
        tf.data.experimental.service.WorkerConfig(dispatcher_address=address))
    served = local.apply(tf.data.experimental.service.distribute(
        processing_mode="parallel_epochs", service=dispatcher.target))
    got, want = list(served.as_numpy_iterator()), list(local.as_numpy_iterator())
    self.assertLen(got, 3)
    for (x1, y1), (x2, y2) in zip(got, want):
      self.assertAllEqual(x1, x2)
      self.assertAllEqual(y1, y2)
    worker.stop()
    dispatcher.stop()


if __name__ == "__main__":
  tf.test.main()
