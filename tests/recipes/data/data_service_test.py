"""The input pipeline's training epoch through TensorFlow's tf.data service: a
dispatcher and a worker on localhost (in-process servers) serve the same batches the
pipeline yields locally (`InputPipeline.data_service`; docs/input.md: scaling input past
one host's CPUs)."""

import os

from absl.testing import parameterized
import numpy as np
import tensorflow as tf

from recipes.data import image_folder
from recipes.data import pipeline


class DataServiceTest(tf.test.TestCase, parameterized.TestCase):

  def setUp(self):
    super().setUp()
    self.settings = pipeline.InputPipeline(
        batch_size=2, image_size=8, random_resized_crop=(0.08, 1.0), random_flip=True,
        mean=(0.5, 0.5, 0.5), std=(0.25, 0.25, 0.25), eval_image_size=8,
        eval_crop_fraction=1.0, eval_resize_method="bilinear", randaugment=())

  def test_served_epoch_has_the_same_batches(self):
    root = os.path.join(self.get_temp_dir(), "tree")
    rng = np.random.default_rng(0)
    for c in ("a", "b"):
      os.makedirs(os.path.join(root, c))
      for i in range(4):
        image = rng.integers(0, 256, [20 + 4 * i, 24, 3], dtype=np.uint8)
        tf.io.write_file(os.path.join(root, c, f"{i}.jpg"), tf.io.encode_jpeg(image))
    source = image_folder.image_folder(root, test_per_class=1)
    local = self.settings.train_dataset(source, np.arange(6), epoch=2, seed=1)

    dispatcher = tf.data.experimental.service.DispatchServer()
    address = dispatcher.target.split("://")[1]
    worker = tf.data.experimental.service.WorkerServer(
        tf.data.experimental.service.WorkerConfig(dispatcher_address=address))
    served_by = self.settings.replace(data_service=dispatcher.target)
    served_by.check()
    served = served_by.train_dataset(source, np.arange(6), epoch=2, seed=1)
    graph = tf.compat.v1.GraphDef.FromString(served._as_serialized_graph().numpy())
    self.assertTrue(any(n.op.startswith("DataServiceDataset") for n in graph.node))
    got, want = list(served.as_numpy_iterator()), list(local.as_numpy_iterator())
    self.assertLen(got, 3)
    for (x1, y1), (x2, y2) in zip(got, want):
      self.assertAllEqual(x1, x2)
      self.assertAllEqual(y1, y2)
    worker.stop()
    dispatcher.stop()

  @parameterized.parameters("localhost", "grpc://localhost:0", "host:99999", 5050,
                            "grpc://h:50; rm -rf /", "grpc://:50", "http://h:50")
  def test_bad_address_names_itself(self, address):
    with self.assertRaisesRegex(ValueError, r"InputPipeline.data_service=.* is not a "
                                r"dispatcher address; use 'grpc://host:port'"):
      self.settings.replace(data_service=address).check()

  def test_bad_mode_names_itself(self):
    with self.assertRaisesRegex(ValueError, "InputPipeline.data_service_mode='static'; use "
                                "one of parallel_epochs, distributed_epoch"):
      self.settings.replace(data_service_mode="static").check()


if __name__ == "__main__":
  tf.test.main()
