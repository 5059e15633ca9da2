"""CIFAR ResNets (He, Zhang, Ren, Sun 2016, arXiv:1512.03385, section 4.2).

6n + 2 layers: a 3x3 convolution with 16 filters, three stages of n basic blocks
(two 3x3 convolutions each) with 16, 32 and 64 filters on 32, 16 and 8 pixel maps,
global average pooling and a fully connected classifier. Shortcuts are option A:
identity, and at a stage's first block the input subsampled by 2 and zero-padded to
the new width, so shortcuts carry no parameters (ResNet-32: 0.46M, the long-tail
papers' backbone, e.g. Cao et al. 2019, Menon et al. 2021). BatchNorm follows every
convolution, as in the paper; momentum and epsilon default to the papers' PyTorch
code (0.9, 1e-5).

Layer names: stem/conv, stem/bn, stage{s}/block{b}/{1_conv,1_bn,2_conv,2_bn,add,...}, logits,
so tricks can pick blocks by name (`tricks.recompute`: r"^(stage\\d/block\\d+)/").
"""

import gin
import tensorflow as tf
import tf_keras


def _pad_shortcut(x):
  """Option A: subsample by 2, then zero-pad the channels to twice the width."""
  pad = x.shape[-1] // 2
  return tf.pad(x[:, ::2, ::2, :], [[0, 0], [0, 0], [0, 0], [pad, pad]])


def _conv_bn(x, filters, strides, name, momentum, epsilon):
  x = tf_keras.layers.Conv2D(filters, 3, strides=strides, padding="same", use_bias=False,
                             kernel_initializer="he_normal", name=f"{name}conv")(x)
  return tf_keras.layers.BatchNormalization(momentum=momentum, epsilon=epsilon,
                                            name=f"{name}bn")(x)


def basic_block(x, filters, strides, name, momentum, epsilon):
  """conv-BN-ReLU-conv-BN, added to the (option A) shortcut, then ReLU."""
  shortcut = x
  if strides != 1 or x.shape[-1] != filters:
    shortcut = tf_keras.layers.Lambda(_pad_shortcut, name=f"{name}shortcut")(x)
  y = _conv_bn(x, filters, strides, f"{name}1_", momentum, epsilon)
  y = tf_keras.layers.ReLU(name=f"{name}relu1")(y)
  y = _conv_bn(y, filters, 1, f"{name}2_", momentum, epsilon)
  y = tf_keras.layers.Add(name=f"{name}add")([shortcut, y])
  return tf_keras.layers.ReLU(name=f"{name}relu2")(y)


@gin.configurable
def resnet_cifar(depth=32, num_classes=10, input_shape=(32, 32, 3), width=16,
                 bn_momentum=0.9, bn_epsilon=1e-5, name=None):
  """ResNet-`depth` for CIFAR (depth = 6n + 2: 20, 32, 44, 56, 110, ...)."""
  if depth < 8 or (depth - 2) % 6:
    raise ValueError(f"a CIFAR ResNet has 6n + 2 layers (20, 32, 44, 56, 110); got "
                     f"depth={depth}")
  n = (depth - 2) // 6
  inputs = tf_keras.Input(input_shape, name="images")
  x = _conv_bn(inputs, width, 1, "stem/", bn_momentum, bn_epsilon)
  x = tf_keras.layers.ReLU(name="stem/relu")(x)
  for stage in range(3):
    for block in range(n):
      strides = 2 if stage > 0 and block == 0 else 1
      x = basic_block(x, width * 2 ** stage, strides, f"stage{stage + 1}/block{block}/",
                      bn_momentum, bn_epsilon)
  x = tf_keras.layers.GlobalAveragePooling2D(name="pool")(x)
  outputs = tf_keras.layers.Dense(num_classes, name="logits")(x)
  return tf_keras.Model(inputs, outputs, name=name or f"resnet{depth}_cifar")
