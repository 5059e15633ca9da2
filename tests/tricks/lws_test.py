"""Learnable weight scaling (Kang et al. 2020, their TauNormClassifier: fc(x) * scales)
against numpy: scales start at 1, multiply the logits (bias included), and only the
scales train when the classifier is frozen."""

import numpy as np
import tensorflow as tf
import tf_keras

from tricks import lws


class LogitScalesTest(tf.test.TestCase):

  def test_scales_start_at_one_and_multiply_the_logits(self):
    layer = lws.LogitScales()
    logits = np.array([[1.0, -2.0, 3.0], [0.5, 0.0, -1.0]], np.float32)
    self.assertAllEqual(layer(logits), logits)
    self.assertAllEqual(layer.scales.numpy(), [1, 1, 1])
    layer.scales.assign([2.0, 0.5, -1.0])
    self.assertAllClose(layer(logits), logits * np.array([2.0, 0.5, -1.0]))

  def test_only_the_scales_train_and_their_gradient_is_the_formula(self):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(8, 5)).astype(np.float32)
    labels = rng.integers(0, 3, size=8)
    inputs = tf_keras.Input((5,))
    dense = tf_keras.layers.Dense(3, name="logits")
    scales = lws.LogitScales(name="logit_scales")
    model = tf_keras.Model(inputs, scales(dense(inputs)))
    dense.trainable = False
    self.assertEqual([v.name for v in model.trainable_variables],
                     ["logit_scales/scales:0"])
    scales.scales.assign([1.5, 0.7, 1.2])
    with tf.GradientTape() as tape:
      out = model(x)
      loss = tf.reduce_mean(tf_keras.losses.sparse_categorical_crossentropy(
          labels, out, from_logits=True))
    grad = tape.gradient(loss, model.trainable_variables)[0].numpy()
    # numpy: z = x W + b, logit = f * z, softmax CE; dL/df_j = mean_i (p_ij - y_ij) z_ij
    w, b = (v.numpy().astype(np.float64) for v in dense.weights)
    f = np.array([1.5, 0.7, 1.2])
    z = x.astype(np.float64) @ w + b
    s = f * z
    p = np.exp(s - s.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    y = np.eye(3)[labels]
    self.assertAllClose(out.numpy(), s, rtol=1e-5, atol=1e-6)
    self.assertAllClose(grad, ((p - y) * z).mean(0), rtol=1e-4, atol=1e-6)

  def test_float16_logits_stay_float16(self):
    layer = lws.LogitScales(dtype="mixed_float16")
    out = layer(tf.constant([[1.0, 2.0]], tf.float16))
    self.assertEqual(out.dtype, tf.float16)


if __name__ == "__main__":
  tf.test.main()
