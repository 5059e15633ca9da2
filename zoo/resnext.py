"""ResNeXt (Xie, Girshick, Dollar, Tu, He 2017, arXiv:1611.05431) in torchvision's
layout, as facebookresearch/classifier-balancing (Kang et al. 2020, the long-tail
papers' ImageNet-LT backbone) builds it: models/ResNextFeature.py with
models/ResNext50Feature.py's ResNeXt-50 32x4d, and models/DotProductClassifier.py's
linear classifier.

A 7x7 stride 2 convolution with 64 filters, BatchNorm, ReLU and a 3x3 stride 2 max-pool
(padded 3 and 1 pixels each side by an explicit ZeroPadding2D before a 'valid' layer, as
PyTorch pads, where TF's 'same' pads a stride 2 layer on the bottom and right only); four
stages of bottleneck blocks (ResNeXt-50: 3, 4, 6, 3) with planes 64, 128, 256, 512: a
1x1 convolution to width = planes * width_per_group / 64 * groups (32x4d: 128, 256,
512, 1024), a grouped 3x3 convolution (32 groups, padded 1 the same way) carrying the
stage's stride (1, 2, 2, 2; torchvision's "v1.5" place), a 1x1 convolution to
planes * 4, each followed by BatchNorm, ReLU after the first two and after the
addition. A stage's first block adds a projection of its input (1x1 convolution with
the stride, BatchNorm); the others add the input. Global average pooling and the
classifier (Dense "logits"): 25,028,904 parameters at 1000 classes, torchvision's
resnext50_32x4d count.

Initialisation as theirs: convolutions normal(0, sqrt(2 / (k * k * out_channels))),
untruncated; BatchNorm gamma 1, beta 0 (no zero-initialised last gamma); the classifier
as PyTorch's nn.Linear: kernel and bias uniform(-1 / sqrt(fan_in), 1 / sqrt(fan_in)).
BatchNorm momentum 0.9 and epsilon 1e-5 (PyTorch's 0.1 and 1e-5).

Their pooling is AvgPool2d(7, stride=1), global only at 224 pixels (7x7 maps); ours is
global at every resolution.

Layer names: stem/{pad,conv,bn,relu,pool_pad,pool},
stage{s}/block{b}/{1_conv,1_bn,1_relu,2_pad,2_conv,2_bn,2_relu,3_conv,3_bn,0_conv,0_bn,
add,out}, pool, logits; blocks match r"^(stage[0-9]/block[0-9]+)/".
"""

import math

import gin
import tf_keras

# name: (blocks per stage, groups, width per group); torchvision's resnext50_32x4d and
# resnext101_32x8d.
VARIANTS = {
    "resnext50_32x4d": ((3, 4, 6, 3), 32, 4),
    "resnext101_32x8d": ((3, 4, 23, 3), 32, 8),
}
# torchvision's (and timm's) ResNet-50 is the same network with one group of width 64
# (He et al. 2016's bottleneck with the stride on the 3x3 convolution, "v1.5"):
# 25,557,032 parameters at 1000 classes. The zoo builds it for timm's resnet50
# checkpoints (zoo/timm_checkpoint.py); it is not a registry entry of its own.
RESNETS = {"resnet50": ((3, 4, 6, 3), 1, 64)}
EXPANSION = 4


def conv_initializer():
  """PyTorch ResNets' normal(0, sqrt(2 / (k * k * out_channels))), untruncated."""
  return tf_keras.initializers.VarianceScaling(2.0, "fan_out", "untruncated_normal")


def _conv(x, filters, kernel_size, strides, name, groups=1):
  return tf_keras.layers.Conv2D(filters, kernel_size, strides=strides, padding="valid",
                                groups=groups, use_bias=False,
                                kernel_initializer=conv_initializer(), name=name)(x)


def _bn(x, name, momentum, epsilon):
  return tf_keras.layers.BatchNormalization(momentum=momentum, epsilon=epsilon,
                                            name=name)(x)


def bottleneck_block(x, planes, strides, groups, width_per_group, name, momentum,
                     epsilon):
  """1x1 - grouped 3x3 (stride) - 1x1 (x4), BN after each, ReLU after the first two;
  added to the input, or to its 1x1 (stride) projection + BN when the shape changes;
  then ReLU."""
  width = int(planes * width_per_group / 64) * groups
  out = planes * EXPANSION
  y = _conv(x, width, 1, 1, f"{name}1_conv")
  y = _bn(y, f"{name}1_bn", momentum, epsilon)
  y = tf_keras.layers.ReLU(name=f"{name}1_relu")(y)
  y = tf_keras.layers.ZeroPadding2D(1, name=f"{name}2_pad")(y)
  y = _conv(y, width, 3, strides, f"{name}2_conv", groups=groups)
  y = _bn(y, f"{name}2_bn", momentum, epsilon)
  y = tf_keras.layers.ReLU(name=f"{name}2_relu")(y)
  y = _conv(y, out, 1, 1, f"{name}3_conv")
  y = _bn(y, f"{name}3_bn", momentum, epsilon)
  shortcut = x
  if strides != 1 or x.shape[-1] != out:
    shortcut = _conv(x, out, 1, strides, f"{name}0_conv")
    shortcut = _bn(shortcut, f"{name}0_bn", momentum, epsilon)
  y = tf_keras.layers.Add(name=f"{name}add")([y, shortcut])
  return tf_keras.layers.ReLU(name=f"{name}out")(y)


@gin.configurable
def resnext(variant="resnext50_32x4d", num_classes=1000, input_shape=(224, 224, 3),
            bn_momentum=0.9, bn_epsilon=1e-5, dropout=0.0, name=None):
  """ResNeXt `variant` (a key of VARIANTS or RESNETS) with a `num_classes` Dense
  "logits" head (after Dropout "dropout" when `dropout` > 0; torchvision has none)."""
  layouts = {**VARIANTS, **RESNETS}
  if variant not in layouts:
    raise ValueError(f"unknown ResNeXt variant {variant!r}; use one of "
                     f"{', '.join(layouts)}")
  blocks, groups, width_per_group = layouts[variant]
  inputs = tf_keras.Input(input_shape, name="images")
  x = tf_keras.layers.ZeroPadding2D(3, name="stem/pad")(inputs)
  x = _conv(x, 64, 7, 2, "stem/conv")
  x = _bn(x, "stem/bn", bn_momentum, bn_epsilon)
  x = tf_keras.layers.ReLU(name="stem/relu")(x)
  # Zeros pad as well as PyTorch's -inf here: every window holds a ReLU output >= 0.
  x = tf_keras.layers.ZeroPadding2D(1, name="stem/pool_pad")(x)
  x = tf_keras.layers.MaxPooling2D(3, strides=2, name="stem/pool")(x)
  for stage, count in enumerate(blocks):
    for block in range(count):
      strides = 2 if stage > 0 and block == 0 else 1
      x = bottleneck_block(x, 64 * 2 ** stage, strides, groups, width_per_group,
                           f"stage{stage + 1}/block{block}/", bn_momentum, bn_epsilon)
  x = tf_keras.layers.GlobalAveragePooling2D(name="pool")(x)
  if dropout:
    x = tf_keras.layers.Dropout(dropout, name="dropout")(x)
  bound = 1 / math.sqrt(x.shape[-1])  # nn.Linear's default initialisation
  outputs = tf_keras.layers.Dense(
      num_classes, kernel_initializer=tf_keras.initializers.VarianceScaling(
          1 / 3, "fan_in", "uniform"),  # limit sqrt(3 * (1/3) / fan_in)
      bias_initializer=tf_keras.initializers.RandomUniform(-bound, bound),
      name="logits")(x)
  return tf_keras.Model(inputs, outputs, name=name or variant)


def weight_shapes(variant="resnext50_32x4d", num_classes=1000):
  """{"layer/weight": shape} of every weight `resnext(variant, num_classes)` holds, by
  formula, without building it (zoo/timm_checkpoint.py's test maps ResNeXt-101's
  timm names by these)."""
  layouts = {**VARIANTS, **RESNETS}
  if variant not in layouts:
    raise ValueError(f"unknown ResNeXt variant {variant!r}; use one of "
                     f"{', '.join(layouts)}")
  blocks, groups, width_per_group = layouts[variant]
  shapes = {}

  def conv_bn(conv, bn, kernel, cin, cout, groups=1):
    shapes[f"{conv}/kernel"] = (kernel, kernel, cin // groups, cout)
    for weight in ("gamma", "beta", "moving_mean", "moving_variance"):
      shapes[f"{bn}/{weight}"] = (cout,)

  conv_bn("stem/conv", "stem/bn", 7, 3, 64)
  cin = 64
  for stage, count in enumerate(blocks):
    planes = 64 * 2 ** stage
    width, out = int(planes * width_per_group / 64) * groups, planes * EXPANSION
    for block in range(count):
      name = f"stage{stage + 1}/block{block}/"
      conv_bn(f"{name}1_conv", f"{name}1_bn", 1, cin, width)
      conv_bn(f"{name}2_conv", f"{name}2_bn", 3, width, width, groups)
      conv_bn(f"{name}3_conv", f"{name}3_bn", 1, width, out)
      if block == 0:  # stride 2, or 64 -> 256 channels: the projection
        conv_bn(f"{name}0_conv", f"{name}0_bn", 1, cin, out)
      cin = out
  shapes["logits/kernel"] = (cin, num_classes)
  shapes["logits/bias"] = (num_classes,)
  return shapes
