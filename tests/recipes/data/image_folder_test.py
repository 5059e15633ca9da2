"""Image-folder trees, made by the test: decoding, splits and the errors users meet."""

import os

import numpy as np
import tensorflow as tf

from recipes.data import image_folder
from recipes.errors import ConfigError


def write_tree(root, counts, size=12):
  """root/<class>/<i>.png with each class's images filled with its class index."""
  for c, n in enumerate(counts):
    os.makedirs(os.path.join(root, f"class_{c}"), exist_ok=True)
    for i in range(n):
      image = np.full([size, size + i % 3, 3], 10 * c, np.uint8)
      ext = "png" if i % 2 else "jpg"
      data = tf.io.encode_png(image) if ext == "png" else tf.io.encode_jpeg(image,
                                                                             quality=100)
      tf.io.write_file(os.path.join(root, f"class_{c}", f"{i}.{ext}"), data)


class ImageFolderTest(tf.test.TestCase):

  def test_holdout_split_and_decoding(self):
    root = os.path.join(self.get_temp_dir(), "tree")
    write_tree(root, [6, 5, 4])
    source = image_folder.image_folder(root=root, test_per_class=2)
    self.assertEqual(source.class_names, ["class_0", "class_1", "class_2"])
    self.assertEqual(np.bincount(source.test_labels).tolist(), [2, 2, 2])
    self.assertEqual(np.bincount(source.train_labels).tolist(), [4, 3, 2])
    for image, label in source.make_dataset("train", np.arange(len(source.train_labels))):
      self.assertEqual(image.dtype, tf.uint8)
      self.assertEqual(image.shape[-1], 3)
      self.assertAllClose(np.mean(image), 10 * int(label), atol=1.0)

  def test_separate_test_tree(self):
    root = os.path.join(self.get_temp_dir(), "train")
    test_root = os.path.join(self.get_temp_dir(), "test")
    write_tree(root, [3, 3])
    write_tree(test_root, [1, 2])
    source = image_folder.image_folder(root=root, test_root=test_root)
    self.assertEqual(source.test_labels.tolist(), [0, 1, 1])

  def test_errors(self):
    tmp = self.get_temp_dir()
    with self.assertRaisesRegex(ConfigError, "image folder '.*missing' does not exist"):
      image_folder.image_folder(root=os.path.join(tmp, "missing"), test_per_class=1)
    empty = os.path.join(tmp, "empty")
    os.makedirs(os.path.join(empty, "a"))
    os.makedirs(os.path.join(empty, "b"))
    with self.assertRaisesRegex(ConfigError, "holds no images"):
      image_folder.image_folder(root=empty, test_per_class=1)
    one = os.path.join(tmp, "one")
    write_tree(one, [4])
    with self.assertRaisesRegex(ConfigError, "needs at least 2"):
      image_folder.image_folder(root=one, test_per_class=1)
    two = os.path.join(tmp, "two")
    write_tree(two, [2, 2])
    with self.assertRaisesRegex(ConfigError, "needs a test split"):
      image_folder.image_folder(root=two)
    with self.assertRaisesRegex(ConfigError, "too few to hold out 2"):
      image_folder.image_folder(root=two, test_per_class=2)


if __name__ == "__main__":
  tf.test.main()
