"""MaxNorm (Alshammari et al. 2022) against its formula in NumPy."""

import numpy as np
import tensorflow as tf
import tf_keras

from tricks import max_norm


class MaxNormTest(tf.test.TestCase):

  def test_project_clips_each_class_vector_to_the_radius(self):
    rng = np.random.default_rng(0)
    kernel = rng.normal(size=[5, 4]) * np.array([0.1, 1.0, 2.0, 3.0])  # column = class
    radius = 1.5
    norms = np.linalg.norm(kernel, axis=0)
    want = kernel * np.minimum(1.0, radius / norms)[None, :]
    got = max_norm.project(tf.constant(kernel), radius).numpy()
    self.assertAllClose(got, want)
    self.assertAllClose(got[:, 0], kernel[:, 0])  # inside the ball: untouched
    self.assertAllLessEqual(np.linalg.norm(got, axis=0), radius + 1e-12)

  def test_relative_radius_is_their_per_layer_threshold(self):
    inputs = tf_keras.Input((6,))
    model = tf_keras.Model(inputs, tf_keras.layers.Dense(3, name="logits")(inputs))
    kernel = model.get_layer("logits").kernel.numpy()
    norms = np.linalg.norm(kernel.astype(np.float64), axis=0)
    relative = max_norm.MaxNorm(thresh=0.1).build(model)
    self.assertAllClose(relative.radius, norms.min() + 0.1 * (norms.max() - norms.min()))
    absolute = max_norm.MaxNorm(thresh=0.7, relative=False).build(model)
    self.assertEqual(absolute.radius, 0.7)
    self.assertIs(relative.variable, model.get_layer("logits").kernel)

  def test_bad_settings(self):
    with self.assertRaisesRegex(ValueError, "thresh"):
      max_norm.MaxNorm(thresh=-1)
    inputs = tf_keras.Input((6,))
    model = tf_keras.Model(inputs, tf_keras.layers.Dense(3, name="out")(inputs))
    with self.assertRaisesRegex(ValueError, "no Dense layer 'logits'"):
      max_norm.MaxNorm().build(model)


if __name__ == "__main__":
  tf.test.main()
