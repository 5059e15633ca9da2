"""The "ResNet-32" of Menon et al. 2021 (Long-tail learning via logit adjustment,
arXiv:2007.07314), as google-research/google-research logit_adjustment/models.py
(`cifar_resnet32`) builds it.

Not He et al.'s CIFAR ResNet-32 (zoo/resnet_cifar.py): their code forks Model Garden's
ImageNet bottleneck blocks. A 3 pixel zero border, then a 3x3 convolution with 16
filters, 'valid' (32 pixel images give 36 pixel maps), BatchNorm, ReLU; three stages of
5 bottleneck blocks (1x1, 3x3 'same', 1x1 convolutions, each followed by BatchNorm, ReLU
after the first two and after the addition) with 16, 16, 16 / 32, 32, 32 / 64, 64, 64
filters and no expansion. A stage's first block has a projection shortcut (1x1
convolution and BatchNorm) even in stage 1, and strides 1, 2, 2 on its 3x3 convolution
and its shortcut; the other blocks add the identity. Then a BatchNorm without ReLU,
global average pooling and the classifier: 0.30M parameters at 10 classes, 49
convolutions. Convolutions are he_normal (truncated) and bias-free; the classifier's
kernel is normal(0, 0.01) and its bias zero. BatchNorm momentum 0.9, epsilon 1e-5.

Weight decay is theirs too: `weight_decay` (1e-4) puts a Keras L2 regulariser,
weight_decay * sum(w^2), on every convolution kernel and on the classifier's kernel
and bias, not on BatchNorm; `weight_decay=0` leaves them off. They add
`sum(model.losses)` to each batch's loss, and so does our trainer
(recipes/train_step.py adds `scale_regularization_loss(add_n(model.losses))`): with
this model, leave `Optimization.l2` at 0 (its l2 / 2 * sum ||w||^2 convention would
need l2 = 2e-4 for the same penalty, and would also decay BatchNorm unless excluded).
Their inputs are x / 255 - 0.5 (the card's mean 0.5, std 1).

Layer names: stem/{pad,conv,bn,relu}, stage{s}/block{b}/{1_conv,1_bn,1_relu,2_conv,
2_bn,2_relu,3_conv,3_bn,0_conv,0_bn,add,out}, final_bn, pool, logits; blocks match
r"^(stage\\d/block\\d+)/".
"""

import gin
import tf_keras

STAGES = ((5, 16, 1), (5, 32, 2), (5, 64, 2))  # (blocks, filters, stride): their config
WEIGHT_DECAY = 1e-4  # their _L2_WEIGHT_DECAY


def _l2(weight_decay):
  return tf_keras.regularizers.L2(weight_decay) if weight_decay else None


def _conv_bn(x, filters, kernel_size, strides, name, weight_decay, momentum, epsilon):
  x = tf_keras.layers.Conv2D(filters, kernel_size, strides=strides, padding="same",
                             use_bias=False, kernel_initializer="he_normal",
                             kernel_regularizer=_l2(weight_decay), name=f"{name}conv")(x)
  return tf_keras.layers.BatchNormalization(momentum=momentum, epsilon=epsilon,
                                            name=f"{name}bn")(x)


def bottleneck_block(x, filters, strides, name, weight_decay, momentum, epsilon,
                     projection):
  """1x1-3x3(stride)-1x1, BN after each, ReLU after the first two; added to the input,
  or to a 1x1 (stride) projection + BN of it (their `_conv_block`), then ReLU."""
  conv = dict(weight_decay=weight_decay, momentum=momentum, epsilon=epsilon)
  y = _conv_bn(x, filters, 1, 1, f"{name}1_", **conv)
  y = tf_keras.layers.ReLU(name=f"{name}1_relu")(y)
  y = _conv_bn(y, filters, 3, strides, f"{name}2_", **conv)
  y = tf_keras.layers.ReLU(name=f"{name}2_relu")(y)
  y = _conv_bn(y, filters, 1, 1, f"{name}3_", **conv)
  shortcut = _conv_bn(x, filters, 1, strides, f"{name}0_", **conv) if projection else x
  y = tf_keras.layers.Add(name=f"{name}add")([y, shortcut])
  return tf_keras.layers.ReLU(name=f"{name}out")(y)


@gin.configurable
def resnet32_menon(num_classes=10, input_shape=(32, 32, 3), weight_decay=WEIGHT_DECAY,
                   bn_momentum=0.9, bn_epsilon=1e-5, name="resnet32_menon"):
  """Menon et al.'s ResNet-32; `weight_decay` is the coefficient of its L2 losses."""
  inputs = tf_keras.Input(input_shape, name="images")
  x = tf_keras.layers.ZeroPadding2D(3, name="stem/pad")(inputs)
  x = tf_keras.layers.Conv2D(16, 3, padding="valid", use_bias=False,
                             kernel_initializer="he_normal",
                             kernel_regularizer=_l2(weight_decay), name="stem/conv")(x)
  x = tf_keras.layers.BatchNormalization(momentum=bn_momentum, epsilon=bn_epsilon,
                                         name="stem/bn")(x)
  x = tf_keras.layers.ReLU(name="stem/relu")(x)
  for stage, (blocks, filters, stride) in enumerate(STAGES):
    for block in range(blocks):
      x = bottleneck_block(x, filters, stride if block == 0 else 1,
                           f"stage{stage + 1}/block{block}/", weight_decay, bn_momentum,
                           bn_epsilon, projection=block == 0)
  x = tf_keras.layers.BatchNormalization(momentum=bn_momentum, epsilon=bn_epsilon,
                                         name="final_bn")(x)  # no ReLU, as theirs
  x = tf_keras.layers.GlobalAveragePooling2D(name="pool")(x)
  outputs = tf_keras.layers.Dense(
      num_classes, kernel_initializer=tf_keras.initializers.RandomNormal(stddev=0.01),
      bias_initializer="zeros", kernel_regularizer=_l2(weight_decay),
      bias_regularizer=_l2(weight_decay), name="logits")(x)
  return tf_keras.Model(inputs, outputs, name=name)
