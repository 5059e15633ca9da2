"""Menon et al.'s ResNet-32 (google-research logit_adjustment/models.py): parameter
count from the architecture, the 36 pixel stem, L2 losses and the classifier's init."""

import numpy as np
import tensorflow as tf
import tf_keras

from zoo import resnet32_menon

# ZeroPadding2D(3) turns 32 pixels into 38; the 'valid' 3x3 convolution leaves 36.
STEM_SIZE = 32 + 2 * 3 - 3 + 1

# At 10 classes, every weight (BatchNorm's moving statistics too):
#   stem 3*3*3*16 + 4*16                                         =     496
#   stage 1 (16 -> 16): first block 16*16 + 9*16*16 + 16*16 + 16*16 (shortcut)
#     + 4 BNs * 4*16 = 3,328; 4 more blocks (256 + 2,304 + 256 + 3*64) * 4 = 12,032
#                                                                =  15,360
#   stage 2 (16 -> 32): 16*32 + 9*32*32 + 32*32 + 16*32 + 4*128 = 11,776;
#     (1,024 + 9,216 + 1,024 + 384) * 4 = 46,592                 =  58,368
#   stage 3 (32 -> 64): 32*64 + 9*64*64 + 64*64 + 32*64 + 4*256 = 46,080;
#     (4,096 + 36,864 + 4,096 + 768) * 4 = 183,296               = 229,376
#   final BN 4*64 = 256; classifier 64*10 + 10 = 650
#   496 + 15,360 + 58,368 + 229,376 + 256 + 650                  = 304,506
GOLDEN_PARAMS = 304_506
# 49 convolutions (stem; 4 in each stage's first block, 3 in each of the other 4: 16
# a stage) and the classifier's kernel and bias.
REGULARISED = 1 + 3 * (4 + 4 * 3) + 2


def formula_params(num_classes):
  """(all, trainable) weights from the architecture: conv k*k*cin*cout, BN 4*c with 2
  trainable (gamma, beta), Dense cin*cout + cout."""
  convs, bns = [(3, 3, 16)], [16]  # (k, cin, cout)
  cin = 16
  for blocks, filters, _ in resnet32_menon.STAGES:
    for block in range(blocks):
      convs += [(1, cin, filters), (3, filters, filters), (1, filters, filters)]
      bns += [filters] * 3
      if block == 0:
        convs.append((1, cin, filters))
        bns.append(filters)
      cin = filters
  bns.append(cin)  # final_bn
  conv = sum(k * k * i * o for k, i, o in convs)
  dense = cin * num_classes + num_classes
  return conv + 4 * sum(bns) + dense, conv + 2 * sum(bns) + dense


class Resnet32MenonTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    tf_keras.utils.set_random_seed(0)
    self.model = resnet32_menon.resnet32_menon(num_classes=10)

  def tearDown(self):
    tf_keras.backend.clear_session()
    super().tearDown()

  def test_parameter_count_is_the_architectures(self):
    total, trainable = formula_params(10)
    self.assertEqual(total, GOLDEN_PARAMS)
    self.assertEqual(self.model.count_params(), total)
    self.assertEqual(sum(v.shape.num_elements() for v in self.model.trainable_variables),
                     trainable)
    convs = [l for l in self.model.layers if isinstance(l, tf_keras.layers.Conv2D)]
    self.assertLen(convs, 49)

  def test_shapes(self):
    self.assertEqual(self.model.get_layer("stem/conv").output.shape,
                     (None, STEM_SIZE, STEM_SIZE, 16))
    self.assertEqual(STEM_SIZE, 36)
    self.assertEqual(self.model.get_layer("stage2/block0/out").output.shape,
                     (None, 18, 18, 32))
    self.assertEqual(self.model.get_layer("stage3/block4/out").output.shape,
                     (None, 9, 9, 64))
    x = tf.zeros((2, 32, 32, 3))
    self.assertEqual(self.model(x).shape, (2, 10))
    self.assertIsInstance(self.model.layers[-1], tf_keras.layers.Dense)
    self.assertEqual(self.model.layers[-1].name, "logits")
    # The last BatchNorm feeds the pooling directly: no ReLU between.
    self.assertIsInstance(self.model.get_layer("pool").inbound_nodes[0].inbound_layers,
                          tf_keras.layers.BatchNormalization)

  def test_stride_sits_on_the_3x3_and_the_shortcut(self):
    block = "stage2/block0/"
    self.assertEqual(self.model.get_layer(block + "1_conv").strides, (1, 1))
    self.assertEqual(self.model.get_layer(block + "2_conv").strides, (2, 2))
    self.assertEqual(self.model.get_layer(block + "2_conv").kernel_size, (3, 3))
    self.assertEqual(self.model.get_layer(block + "0_conv").strides, (2, 2))
    self.assertEqual(self.model.get_layer("stage1/block0/0_conv").kernel_size, (1, 1))
    with self.assertRaises(ValueError):  # identity blocks have no shortcut conv
      self.model.get_layer("stage1/block1/0_conv")
    bn = self.model.get_layer("stage3/block4/3_bn")
    self.assertEqual((bn.momentum, bn.epsilon), (0.9, 1e-5))

  def test_l2_losses(self):
    self.assertLen(self.model.losses, REGULARISED)
    self.assertEqual(REGULARISED, 51)
    dense = self.model.get_layer("logits")
    self.assertAllClose(dense.kernel_regularizer.l2, 1e-4)
    self.assertAllClose(dense.bias_regularizer.l2, 1e-4)
    # Keras's L2: weight_decay * sum(w^2), summed over the regularised weights.
    regularised = [l.kernel for l in self.model.layers
                   if isinstance(l, (tf_keras.layers.Conv2D, tf_keras.layers.Dense))]
    want = 1e-4 * sum(float(tf.reduce_sum(tf.square(w))) for w in regularised + [dense.bias])
    self.assertAllClose(float(tf.add_n(self.model.losses)), want, rtol=1e-5)
    bare = resnet32_menon.resnet32_menon(num_classes=10, weight_decay=0)
    self.assertEmpty(bare.losses)

  def test_initialisation(self):
    dense = self.model.get_layer("logits")
    kernel = dense.kernel.numpy()
    self.assertAllClose(kernel.std(), 0.01, rtol=0.15)  # 640 normal(0, 0.01) draws
    self.assertAllEqual(dense.bias.numpy(), np.zeros(10))
    conv = self.model.get_layer("stage3/block1/2_conv")  # 36,864 weights, fan_in 576
    # he_normal: a normal cut at 2 sd and widened by 1 / 0.8796 so its std is
    # sqrt(2 / fan_in).
    std = np.sqrt(2 / (9 * 64))
    self.assertAllClose(conv.kernel.numpy().std(), std, rtol=0.05)
    self.assertLessEqual(np.abs(conv.kernel.numpy()).max(), 2 * std / 0.87962566 + 1e-6)


if __name__ == "__main__":
  tf.test.main()
