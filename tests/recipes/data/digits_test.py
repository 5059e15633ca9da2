"""The embedded digits source: real images from scikit-learn, a balanced test split."""

import numpy as np
import tensorflow as tf

from recipes.data import digits


class DigitsTest(tf.test.TestCase):

  def test_split_is_balanced_and_disjoint(self):
    source = digits.digits(test_per_class=70, split_seed=0)
    self.assertEqual(source.num_classes, 10)
    self.assertEqual(np.bincount(source.test_labels).tolist(), [70] * 10)
    self.assertEqual(len(source.train_labels) + len(source.test_labels), 1797)

  def test_images_are_the_bundled_digits(self):
    images, labels = digits.load_arrays()
    self.assertEqual(images.shape, (1797, 8, 8, 3))
    self.assertEqual(images.dtype, np.uint8)
    self.assertEqual(int(images.max()), 255)
    self.assertAllEqual(images[..., 0], images[..., 2])
    source = digits.digits()
    first_image, first_label = next(iter(source.make_dataset("train", np.array([0]))))
    self.assertEqual(first_image.shape, (8, 8, 3))
    self.assertEqual(int(first_label), int(source.train_labels[0]))

  def test_selected_indices_come_back_in_order(self):
    source = digits.digits()
    picked = np.array([3, 10, 500])
    labels = [int(label) for _, label in source.make_dataset("train", picked)]
    self.assertEqual(labels, source.train_labels[picked].tolist())


if __name__ == "__main__":
  tf.test.main()
