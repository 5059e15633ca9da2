"""recipes/data/grid.py: per_class images of every class, a class a row, tiled."""

import numpy as np
import tensorflow as tf

from recipes.data import grid


class GridTest(tf.test.TestCase):

  def test_choose_draws_each_class_apart(self):
    labels = np.array([0, 1, 2] * 5)
    chosen = grid.choose(labels, per_class=4, seed=3, num_classes=3)
    self.assertEqual(chosen.shape, (3, 4))
    for c in range(3):
      self.assertAllEqual(labels[chosen[c]], [c] * 4)
      self.assertLen(set(chosen[c].tolist()), 4)
      self.assertAllEqual(chosen[c], np.sort(chosen[c]))
    self.assertAllEqual(chosen, grid.choose(labels, per_class=4, seed=3, num_classes=3))
    self.assertNotAllEqual(chosen, grid.choose(labels, per_class=4, seed=4, num_classes=3))

  def test_mosaic_places_each_image(self):
    images = np.stack([np.full([2, 3, 3], i, np.uint8) for i in range(6)])
    out = grid.mosaic(images, np.array([[0, 1], [4, 5]]), gap=1)
    self.assertEqual(out.shape, (5, 7, 3))
    self.assertAllEqual(out[0:2, 0:3], images[0])
    self.assertAllEqual(out[0:2, 4:7], images[1])
    self.assertAllEqual(out[3:5, 0:3], images[4])
    self.assertAllEqual(out[3:5, 4:7], images[5])
    self.assertAllEqual(out[2], np.full([7, 3], 255))  # the gap row
    self.assertAllEqual(out[:, 3], np.full([5, 3], 255))


if __name__ == "__main__":
  tf.test.main()
