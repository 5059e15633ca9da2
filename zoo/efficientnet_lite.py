"""EfficientNet-Lite0/1/2 (Tan & Le 2019, arXiv:1905.11946; Google's tensorflow/tpu
models/official/efficientnet/lite, efficientnet_lite_builder.py), built to take
Google's ImageNet checkpoints (zoo/efficientnet_lite_checkpoint.py).

EfficientNet-B0's seven stages of MBConv blocks (MobileNetV2's inverted bottleneck,
Sandler et al. 2018, arXiv:1801.04381) with Lite's changes for mobile accelerators: no
squeeze-and-excitation, ReLU6 for swish, and the stem (32) and head (1280) widths and
the first and last stages' repeats kept as B0's when the network is scaled. A block:
a 1x1 expansion convolution to `expand` times its input (none when `expand` is 1), a
depthwise k x k convolution carrying the stride, a 1x1 projection, each followed by
BatchNorm, ReLU6 after the first two; the input is added when the stride is 1 and the
widths agree. Stem: 3x3 stride 2 convolution, BatchNorm, ReLU6; head: 1x1
convolution, BatchNorm, ReLU6, global average pooling, dropout, Dense "logits".

Scaling (efficientnet_model.py's round_filters, round_repeats, as the PyTorch
reference efficientnet-lite-pytorch 0.1.0 computes them): a stage's widths
w * width rounded to the nearest multiple of 8 (at least 8), raised by 8 when that
loses more than 10%; its repeats ceil(r * depth). Lite0 (1.0, 1.0) at 224 pixels,
Lite1 (1.0, 1.1) at 240, Lite2 (1.1, 1.2) at 260.

Padding is TensorFlow's SAME, which the checkpoints were trained with, done as the
reference's Conv2dStaticSamePadding: for an input side n, kernel k and stride s, the
output side is ceil(n / s) and total = max((ceil(n / s) - 1) s + k - n, 0) pixels are
added, total // 2 before and the rest after (a stride 2 layer on an even side pads
one pixel more on the bottom and right), by a ZeroPadding2D before a 'valid' layer.
An input side left None is padded by the layer's own 'same', which TensorFlow computes
by the same rule at run time.

BatchNorm: epsilon 1e-3, momentum 0.99 (PyTorch's 0.01). Initialisation as Google's
efficientnet_model.py: convolutions normal(0, sqrt(2 / fan_out)), fan_out = k * k *
output channels (k * k for a depthwise kernel), untruncated; the classifier
uniform(+-1 / sqrt(classes)), bias 0. Training's dropout (0.2, 0.2, 0.3) and drop
connect (0.2, growing with the block index, efficientnet_model.py) are `VARIANTS`'
numbers; the builder's defaults are 0, as the zoo's other models', so a recipe binds
them.

Layer names: stem/{pad,conv,bn,relu6}; stage{s}/block{b}/{expand_,dw_,project_}{pad,
conv,bn,relu6}, .../drop, .../add; head/{conv,bn,relu6}; pool, dropout, logits. Blocks
(and the head, as timm's group_matcher makes conv_head and bn2 a group of their own)
match `BLOCKS`.
"""

import collections
import math

import tf_keras

from tricks import stochastic_depth

Variant = collections.namedtuple("Variant", "width depth resolution dropout")
# efficientnet_lite_builder.efficientnet_lite_params: (width, depth, resolution,
# dropout); drop connect 0.2 for all.
VARIANTS = {
    "lite0": Variant(1.0, 1.0, 224, 0.2),
    "lite1": Variant(1.0, 1.1, 240, 0.2),
    "lite2": Variant(1.1, 1.2, 260, 0.3),
}
DROP_CONNECT_RATE = 0.2
# B0's stages (efficientnet_lite_builder's blocks_args, no "se"): (repeats, kernel,
# stride, expand, input width, output width).
STAGES = (
    (1, 3, 1, 1, 32, 16),
    (2, 3, 2, 6, 16, 24),
    (2, 5, 2, 6, 24, 40),
    (3, 3, 2, 6, 40, 80),
    (3, 5, 1, 6, 80, 112),
    (4, 5, 2, 6, 112, 192),
    (1, 3, 1, 6, 192, 320),
)
STEM = 32
HEAD = 1280
DIVISOR = 8
BN_EPSILON = 1e-3
BN_MOMENTUM = 0.99
BLOCKS = r"^(stage[0-9]/block[0-9]+|head)/"

Block = collections.namedtuple("Block", "stage index kernel stride expand inputs outputs")


def variant_of(name):
  """'lite0' of 'lite0' or 'efficientnet_lite0'; ValueError naming the known ones."""
  variant = name[len("efficientnet_"):] if name.startswith("efficientnet_") else name
  if variant not in VARIANTS:
    raise ValueError(f"unknown EfficientNet-Lite variant {name!r}; use one of "
                     f"{', '.join(VARIANTS)}")
  return variant


def round_filters(filters, width):
  """efficientnet_model.round_filters: filters * width to a multiple of 8, not more
  than 10% down."""
  scaled = filters * width
  rounded = max(DIVISOR, int(scaled + DIVISOR / 2) // DIVISOR * DIVISOR)
  if rounded < 0.9 * scaled:
    rounded += DIVISOR
  return int(rounded)


def round_repeats(repeats, depth):
  """efficientnet_model.round_repeats: ceil(repeats * depth)."""
  return int(math.ceil(depth * repeats))


def blocks(variant):
  """The variant's blocks in order: Lite keeps the stem's width as the first stage's
  input and the first and last stages' repeats (fix_head_stem)."""
  spec = VARIANTS[variant_of(variant)]
  plan = []
  for stage, (repeats, kernel, stride, expand, inputs, outputs) in enumerate(STAGES, 1):
    fixed = stage in (1, len(STAGES))
    count = repeats if fixed else round_repeats(repeats, spec.depth)
    width_in = STEM if stage == 1 else round_filters(inputs, spec.width)
    width_out = round_filters(outputs, spec.width)
    for index in range(count):
      plan.append(Block(stage, index, kernel, stride if index == 0 else 1, expand,
                        width_in if index == 0 else width_out, width_out))
  return plan


def same_padding(size, kernel, stride):
  """TensorFlow's SAME padding (before, after) of one side of `size` pixels."""
  out = -(-size // stride)
  total = max((out - 1) * stride + kernel - size, 0)
  return total // 2, total - total // 2


def _conv_initializer():
  """efficientnet_model.conv_kernel_initializer: normal(0, sqrt(2 / fan_out))."""
  return tf_keras.initializers.VarianceScaling(2.0, "fan_out", "untruncated_normal")


def _pad(x, kernel, stride, name):
  """x padded as TensorFlow's SAME for a `kernel` x `kernel` stride `stride` layer, and
  the padding that layer then takes ('valid'; 'same' where a side is None)."""
  height, width = x.shape[1], x.shape[2]
  if height is None or width is None:
    return x, "same"
  pads = (same_padding(height, kernel, stride), same_padding(width, kernel, stride))
  if pads != ((0, 0), (0, 0)):
    x = tf_keras.layers.ZeroPadding2D(pads, name=name)(x)
  return x, "valid"


def _conv_bn(x, filters, kernel, stride, scope, part, momentum, relu6=True,
             depthwise=False):
  """(Depthwise) convolution with SAME padding, BatchNorm, and ReLU6 if `relu6`."""
  name = f"{scope}/{part}"
  x, padding = _pad(x, kernel, stride, f"{name}pad")
  if depthwise:
    x = tf_keras.layers.DepthwiseConv2D(
        kernel, strides=stride, padding=padding, use_bias=False,
        depthwise_initializer=_conv_initializer(), name=f"{name}conv")(x)
  else:
    x = tf_keras.layers.Conv2D(filters, kernel, strides=stride, padding=padding,
                               use_bias=False, kernel_initializer=_conv_initializer(),
                               name=f"{name}conv")(x)
  x = tf_keras.layers.BatchNormalization(epsilon=BN_EPSILON, momentum=momentum,
                                         name=f"{name}bn")(x)
  if relu6:
    x = tf_keras.layers.ReLU(max_value=6.0, name=f"{name}relu6")(x)
  return x


def mbconv(x, block, momentum, drop_rate=0.0):
  """One MBConv block without squeeze-and-excitation (module docstring)."""
  scope = f"stage{block.stage}/block{block.index}"
  inputs = x
  if block.expand != 1:
    x = _conv_bn(x, block.inputs * block.expand, 1, 1, scope, "expand_", momentum)
  x = _conv_bn(x, None, block.kernel, block.stride, scope, "dw_", momentum,
               depthwise=True)
  x = _conv_bn(x, block.outputs, 1, 1, scope, "project_", momentum, relu6=False)
  if block.stride == 1 and block.inputs == block.outputs:
    if drop_rate:
      # efficientnet_model.py's drop_connect: x / keep * floor(keep + u).
      x = stochastic_depth.StochasticDepth(drop_rate, scale_by_keep=True,
                                           name=f"{scope}/drop")(x)
    x = tf_keras.layers.Add(name=f"{scope}/add")([x, inputs])
  return x


def efficientnet_lite(variant, num_classes=1000, input_shape=None, dropout=0.0,
                      drop_connect_rate=0.0, bn_momentum=BN_MOMENTUM):
  """EfficientNet-Lite `variant` ('lite0', 'lite1', 'lite2') with a `num_classes`
  head, at `input_shape` (default: the variant's resolution, square)."""
  variant = variant_of(variant)
  spec = VARIANTS[variant]
  if not 0.0 <= drop_connect_rate < 1.0:
    raise ValueError(f"efficientnet_{variant} drop_connect_rate={drop_connect_rate!r} "
                     f"must be in [0, 1) (Google trains with {DROP_CONNECT_RATE})")
  if input_shape is None:
    input_shape = (spec.resolution, spec.resolution, 3)
  inputs = tf_keras.Input(input_shape, name="images")
  x = _conv_bn(inputs, STEM, 3, 2, "stem", "", bn_momentum)
  plan = blocks(variant)
  for number, block in enumerate(plan):
    x = mbconv(x, block, bn_momentum, drop_connect_rate * number / len(plan))
  x = _conv_bn(x, HEAD, 1, 1, "head", "", bn_momentum)
  x = tf_keras.layers.GlobalAveragePooling2D(name="pool")(x)
  if dropout:
    x = tf_keras.layers.Dropout(dropout, name="dropout")(x)
  limit = 1.0 / math.sqrt(num_classes)
  outputs = tf_keras.layers.Dense(
      num_classes, kernel_initializer=tf_keras.initializers.RandomUniform(-limit, limit),
      name="logits")(x)
  return tf_keras.Model(inputs, outputs, name=f"efficientnet_{variant}")


# Module names of each convention, by Keras layer part: the PyTorch reference's
# (efficientnet-lite-pytorch's MBConvBlock) and timm's (InvertedResidual; the first
# stage, expand 1, is its DepthwiseSeparableConv).
_REFERENCE_PARTS = {"expand_conv": "_expand_conv", "expand_bn": "_bn0",
                    "dw_conv": "_depthwise_conv", "dw_bn": "_bn1",
                    "project_conv": "_project_conv", "project_bn": "_bn2"}
_TIMM_PARTS = {"expand_conv": "conv_pw", "expand_bn": "bn1", "dw_conv": "conv_dw",
               "dw_bn": "bn2", "project_conv": "conv_pwl", "project_bn": "bn3"}
_TIMM_DS_PARTS = {"dw_conv": "conv_dw", "dw_bn": "bn1", "project_conv": "conv_pw",
                  "project_bn": "bn2"}
_FIXED = {
    "reference": {"stem/conv": "_conv_stem", "stem/bn": "_bn0", "head/conv": "_conv_head",
                  "head/bn": "_bn1", "logits": "_fc"},
    "timm": {"stem/conv": "conv_stem", "stem/bn": "bn1", "head/conv": "conv_head",
             "head/bn": "bn2", "logits": "classifier"},
}


def module_name(variant, layer, convention):
  """The module of `convention` ('reference' or 'timm') that Keras layer `layer` of
  `variant` holds, or None."""
  fixed = _FIXED[convention]
  if layer in fixed:
    return fixed[layer]
  parts = layer.split("/")
  if len(parts) != 3 or not parts[0].startswith("stage") or not parts[1].startswith(
      "block"):
    return None
  plan = blocks(variant)
  for number, block in enumerate(plan):
    if (f"stage{block.stage}", f"block{block.index}") == tuple(parts[:2]):
      if convention == "reference":
        part = _REFERENCE_PARTS.get(parts[2])
        return part and f"_blocks.{number}.{part}"
      part = (_TIMM_DS_PARTS if block.expand == 1 else _TIMM_PARTS).get(parts[2])
      return part and f"blocks.{block.stage - 1}.{block.index}.{part}"
  return None
