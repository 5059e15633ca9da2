"""Inception-v3 (Szegedy et al. 2016, arXiv:1512.00567) in torchvision's layout, as
timm's `inception_v3` (timm/models/inception_v3.py, from torchvision's Inception3):
the network the zoo builds for timm's inception_v3 checkpoints (zoo/timm_checkpoint.py).

It is tf_keras.applications.InceptionV3's network with PyTorch's conventions where
they differ, so timm's numbers come out:
- every convolution is followed by BatchNorm with a learned scale (gamma; Keras's
  application has none, `scale=False`) and epsilon 1e-3, then ReLU;
- the 3x3 stride 1 average pools of the Mixed blocks count the zero padding
  (F.avg_pool2d's count_include_pad=True): ZeroPadding2D(1) then a 'valid' pool, where
  Keras's 'same' pool averages only the pixels inside the image;
- the padded stride 1 convolutions pad symmetrically (kernel // 2 each side), which
  is Keras's 'same' for odd kernels; the stride 2 ones and the max pools are unpadded.
No auxiliary classifier (timm builds none; its tv_in1k file's AuxLogits are dropped).

Layer names are timm's module paths with "/": "Conv2d_1a_3x3/conv", "Mixed_5b/
branch5x5_2/bn", ..., then "pool" and the "logits" Dense; blocks match
r"^(Conv2d_[0-9][a-z]_[0-9x]+|Mixed_[0-9][a-z])/". BatchNorm momentum 0.9 (PyTorch's
0.1). The input is at least 75 x 75 pixels.
"""

import tf_keras

BLOCKS = r"^(Conv2d_[0-9][a-z]_[0-9x]+|Mixed_[0-9][a-z])/"
BN_EPSILON = 1e-3


class _Builder:
  """Conv-BN-ReLU units named as timm's ConvNormAct modules."""

  def __init__(self, bn_momentum):
    self.bn_momentum = bn_momentum

  def conv(self, x, filters, kernel, name, strides=1, padded=False):
    layers = tf_keras.layers
    x = layers.Conv2D(filters, kernel, strides=strides, padding="same" if padded else "valid",
                      use_bias=False, name=f"{name}/conv")(x)
    x = layers.BatchNormalization(momentum=self.bn_momentum, epsilon=BN_EPSILON,
                                  name=f"{name}/bn")(x)
    return layers.ReLU(name=f"{name}/relu")(x)

  @staticmethod
  def avg_pool(x, name):
    """F.avg_pool2d(x, 3, stride=1, padding=1): the zeros count in the average."""
    x = tf_keras.layers.ZeroPadding2D(1, name=f"{name}/pool_pad")(x)
    return tf_keras.layers.AveragePooling2D(3, strides=1, name=f"{name}/pool")(x)

  @staticmethod
  def max_pool(x, name):
    return tf_keras.layers.MaxPooling2D(3, strides=2, name=name)(x)

  @staticmethod
  def concat(branches, name):
    return tf_keras.layers.Concatenate(name=name)(branches)

  def block_a(self, x, pool_features, name):
    """InceptionA (Mixed_5b/c/d)."""
    b1 = self.conv(x, 64, 1, f"{name}/branch1x1")
    b5 = self.conv(x, 48, 1, f"{name}/branch5x5_1")
    b5 = self.conv(b5, 64, 5, f"{name}/branch5x5_2", padded=True)
    b3 = self.conv(x, 64, 1, f"{name}/branch3x3dbl_1")
    b3 = self.conv(b3, 96, 3, f"{name}/branch3x3dbl_2", padded=True)
    b3 = self.conv(b3, 96, 3, f"{name}/branch3x3dbl_3", padded=True)
    bp = self.conv(self.avg_pool(x, name), pool_features, 1, f"{name}/branch_pool")
    return self.concat([b1, b5, b3, bp], f"{name}/concat")

  def block_b(self, x, name):
    """InceptionB (Mixed_6a): stride 2."""
    b3 = self.conv(x, 384, 3, f"{name}/branch3x3", strides=2)
    bd = self.conv(x, 64, 1, f"{name}/branch3x3dbl_1")
    bd = self.conv(bd, 96, 3, f"{name}/branch3x3dbl_2", padded=True)
    bd = self.conv(bd, 96, 3, f"{name}/branch3x3dbl_3", strides=2)
    bp = self.max_pool(x, f"{name}/pool")
    return self.concat([b3, bd, bp], f"{name}/concat")

  def block_c(self, x, c7, name):
    """InceptionC (Mixed_6b..e): factorised 7x7."""
    b1 = self.conv(x, 192, 1, f"{name}/branch1x1")
    b7 = self.conv(x, c7, 1, f"{name}/branch7x7_1")
    b7 = self.conv(b7, c7, (1, 7), f"{name}/branch7x7_2", padded=True)
    b7 = self.conv(b7, 192, (7, 1), f"{name}/branch7x7_3", padded=True)
    bd = self.conv(x, c7, 1, f"{name}/branch7x7dbl_1")
    bd = self.conv(bd, c7, (7, 1), f"{name}/branch7x7dbl_2", padded=True)
    bd = self.conv(bd, c7, (1, 7), f"{name}/branch7x7dbl_3", padded=True)
    bd = self.conv(bd, c7, (7, 1), f"{name}/branch7x7dbl_4", padded=True)
    bd = self.conv(bd, 192, (1, 7), f"{name}/branch7x7dbl_5", padded=True)
    bp = self.conv(self.avg_pool(x, name), 192, 1, f"{name}/branch_pool")
    return self.concat([b1, b7, bd, bp], f"{name}/concat")

  def block_d(self, x, name):
    """InceptionD (Mixed_7a): stride 2."""
    b3 = self.conv(x, 192, 1, f"{name}/branch3x3_1")
    b3 = self.conv(b3, 320, 3, f"{name}/branch3x3_2", strides=2)
    b7 = self.conv(x, 192, 1, f"{name}/branch7x7x3_1")
    b7 = self.conv(b7, 192, (1, 7), f"{name}/branch7x7x3_2", padded=True)
    b7 = self.conv(b7, 192, (7, 1), f"{name}/branch7x7x3_3", padded=True)
    b7 = self.conv(b7, 192, 3, f"{name}/branch7x7x3_4", strides=2)
    bp = self.max_pool(x, f"{name}/pool")
    return self.concat([b3, b7, bp], f"{name}/concat")

  def block_e(self, x, name):
    """InceptionE (Mixed_7b/c): expanded 1x3 / 3x1 branches."""
    b1 = self.conv(x, 320, 1, f"{name}/branch1x1")
    b3 = self.conv(x, 384, 1, f"{name}/branch3x3_1")
    b3 = self.concat([self.conv(b3, 384, (1, 3), f"{name}/branch3x3_2a", padded=True),
                      self.conv(b3, 384, (3, 1), f"{name}/branch3x3_2b", padded=True)],
                     f"{name}/branch3x3")
    bd = self.conv(x, 448, 1, f"{name}/branch3x3dbl_1")
    bd = self.conv(bd, 384, 3, f"{name}/branch3x3dbl_2", padded=True)
    bd = self.concat([self.conv(bd, 384, (1, 3), f"{name}/branch3x3dbl_3a", padded=True),
                      self.conv(bd, 384, (3, 1), f"{name}/branch3x3dbl_3b", padded=True)],
                     f"{name}/branch3x3dbl")
    bp = self.conv(self.avg_pool(x, name), 192, 1, f"{name}/branch_pool")
    return self.concat([b1, b3, bd, bp], f"{name}/concat")


def inception_v3(num_classes=1000, input_shape=(299, 299, 3), dropout=0.0,
                 bn_momentum=0.9, name="inception_v3"):
  """torchvision's / timm's Inception-v3 with a `num_classes` Dense "logits" head."""
  unit = _Builder(bn_momentum)
  inputs = tf_keras.Input(input_shape, name="images")
  x = unit.conv(inputs, 32, 3, "Conv2d_1a_3x3", strides=2)
  x = unit.conv(x, 32, 3, "Conv2d_2a_3x3")
  x = unit.conv(x, 64, 3, "Conv2d_2b_3x3", padded=True)
  x = unit.max_pool(x, "Pool1")
  x = unit.conv(x, 80, 1, "Conv2d_3b_1x1")
  x = unit.conv(x, 192, 3, "Conv2d_4a_3x3")
  x = unit.max_pool(x, "Pool2")
  x = unit.block_a(x, 32, "Mixed_5b")
  x = unit.block_a(x, 64, "Mixed_5c")
  x = unit.block_a(x, 64, "Mixed_5d")
  x = unit.block_b(x, "Mixed_6a")
  for block, c7 in (("Mixed_6b", 128), ("Mixed_6c", 160), ("Mixed_6d", 160),
                    ("Mixed_6e", 192)):
    x = unit.block_c(x, c7, block)
  x = unit.block_d(x, "Mixed_7a")
  x = unit.block_e(x, "Mixed_7b")
  x = unit.block_e(x, "Mixed_7c")
  x = tf_keras.layers.GlobalAveragePooling2D(name="pool")(x)
  if dropout:
    x = tf_keras.layers.Dropout(dropout, name="dropout")(x)
  outputs = tf_keras.layers.Dense(num_classes, name="logits")(x)
  return tf_keras.Model(inputs, outputs, name=name)
