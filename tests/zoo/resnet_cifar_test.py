"""CIFAR ResNets: parameter counts against He et al. 2016, table 6, and shapes."""

from absl.testing import parameterized
import numpy as np
import tensorflow as tf
import tf_keras

from zoo import resnet_cifar

# He et al. 2016 (arXiv:1512.03385), table 6, "# params" in millions.
PUBLISHED_PARAMS_M = {20: 0.27, 32: 0.46, 44: 0.66, 56: 0.85, 110: 1.7}


class ResnetCifarTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.parameters(*sorted(PUBLISHED_PARAMS_M.items()))
  def test_parameter_count_matches_the_paper(self, depth, millions):
    model = resnet_cifar.resnet_cifar(depth, num_classes=10)
    trainable = sum(v.shape.num_elements() for v in model.trainable_variables)
    digits = 1 if millions >= 1 else 2
    self.assertEqual(round(trainable / 1e6, digits), millions)
    # 6n + 2 weighted layers: the convolutions and the classifier.
    weighted = [l for l in model.layers
                if isinstance(l, (tf_keras.layers.Conv2D, tf_keras.layers.Dense))]
    self.assertLen(weighted, depth)

  def test_shapes_and_one_training_step(self):
    model = resnet_cifar.resnet_cifar(8, num_classes=5, input_shape=(16, 16, 3))
    self.assertEqual(model.get_layer("stage3/block0/add").output.shape, (None, 4, 4, 64))
    x = tf.constant(np.random.default_rng(0).normal(size=(4, 16, 16, 3)), tf.float32)
    optimizer = tf_keras.optimizers.SGD(0.1)
    labels = tf.constant([0, 1, 2, 3])
    losses = []
    for _ in range(3):
      with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf_keras.losses.sparse_categorical_crossentropy(
            labels, model(x, training=True), from_logits=True))
      optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables),
                                    model.trainable_variables))
      losses.append(float(loss))
    self.assertEqual(model(x).shape, (4, 5))
    self.assertLess(losses[-1], losses[0])

  def test_option_a_shortcut_pads_with_zeros(self):
    x = tf.reshape(tf.range(2 * 4 * 4 * 2, dtype=tf.float32), (2, 4, 4, 2))
    y = resnet_cifar._pad_shortcut(x)  # pylint: disable=protected-access
    self.assertEqual(y.shape, (2, 2, 2, 4))
    self.assertAllEqual(y[..., 1:3], x[:, ::2, ::2, :])
    self.assertAllEqual(y[..., 0], tf.zeros((2, 2, 2)))
    self.assertAllEqual(y[..., 3], tf.zeros((2, 2, 2)))

  def test_bad_depth(self):
    with self.assertRaisesRegex(ValueError, "6n \\+ 2"):
      resnet_cifar.resnet_cifar(30)


if __name__ == "__main__":
  tf.test.main()
