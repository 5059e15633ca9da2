"""zoo/inception_torchvision.py against torchvision's Inception3: its parameter count
(torchvision's published 27,161,264 less the auxiliary classifier this network leaves
out, counted from that classifier's layer shapes) and PyTorch's average pooling with
count_include_pad=True, from its definition. Its logits against timm's own forward
pass: //tests/zoo:timm_checkpoint_test."""

import numpy as np
import tensorflow as tf
import tf_keras

from zoo import inception_torchvision

# torchvision.models.inception_v3(aux_logits=True): 27,161,264 parameters (its model
# card); AuxLogits is conv0 (768 -> 128, 1x1, no bias) + BN, conv1 (128 -> 768, 5x5,
# no bias) + BN, fc (768 -> 1000).
TORCHVISION = 27_161_264
AUX = (768 * 128 + 2 * 128) + (128 * 768 * 25 + 2 * 768) + (768 * 1000 + 1000)


class InceptionTorchvisionTest(tf.test.TestCase):

  def test_trainable_parameters_are_torchvisions_without_aux(self):
    # PyTorch counts weights, biases and BatchNorm's gamma and beta; its running
    # statistics are buffers, as Keras's moving mean and variance are non-trainable.
    model = inception_torchvision.inception_v3(input_shape=(75, 75, 3))
    trainable = sum(int(np.prod(w.shape)) for w in model.trainable_weights)
    self.assertEqual(trainable, TORCHVISION - AUX)  # 23,834,568

  def test_average_pool_counts_the_zero_padding(self):
    # F.avg_pool2d(ones, 3, stride=1, padding=1): a corner averages 4 ones over 9
    # places, an edge 6, the inside 9.
    inputs = tf_keras.Input((4, 4, 1))
    pooled = tf_keras.Model(inputs, inception_torchvision._Builder.avg_pool(inputs, "p"))
    out = pooled(np.ones((1, 4, 4, 1), np.float32))[0, ..., 0].numpy()
    want = np.array([[4, 6, 6, 4], [6, 9, 9, 6], [6, 9, 9, 6], [4, 6, 6, 4]]) / 9
    self.assertAllClose(out, want, atol=1e-7)


if __name__ == "__main__":
  tf.test.main()
