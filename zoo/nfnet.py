"""NFNets: Normalizer-Free ResNets (Brock, De, Smith, Simonyan 2021, arXiv:2102.06171).

The F-series is a table (`VARIANTS`, the paper's table 1 and DeepMind's
nfnets/base.py); `nfnet()` builds any row as a tf_keras functional model, with the
architecture's knobs (width, alpha, SE ratio, stochastic depth, ...: `Design`) at the
paper's values or overridden. Each block (figure 4 of the paper) is

    h  = act(x) * beta
    y  = conv1x1 -> act -> grouped conv3x3 (stride) -> act -> grouped conv3x3 -> act
         -> conv1x1, all scaled weight-standardised, on h
    y  = 2 * sigmoid(SE(y)) * y
    out = shortcut + alpha * skip_gain * stochastic_depth(y)

with beta = 1 / expected_std of the input and expected_std^2 growing by alpha^2 per
block (reset at each transition block); the shortcut is x, or a 1x1 WS-conv on h
(after 2x2 average pooling when strided). Layer names follow DeepMind's parameter
names so released checkpoints map one to one.

`weight_shapes(variant)` lists a row's weights and their shapes from the table by
formula, without building it (F6 is 438M parameters); `count_params(variant)` counts them.
"""

import dataclasses
import inspect
import math
from typing import Optional, Sequence

import gin
import tf_keras

from tricks import signal_propagation
from tricks import stochastic_depth
from tricks import ws_conv


@dataclasses.dataclass(frozen=True)
class Variant:
  """One row of the NFNet table (the registry's model cards read its sizes and
  RandAugment: zoo/registry.py)."""
  widths: Sequence[int]
  depths: Sequence[int]
  train_image_size: int
  test_image_size: int
  dropout: float
  group_size: int = 128
  stem_widths: Sequence[int] = (16, 32, 64)
  # RandAugment (layers, magnitude): DeepMind's "RA level" 405 is 4 layers at 5.
  randaugment: Sequence[int] = ()


_F_WIDTHS = (256, 512, 1536, 1536)

VARIANTS = {
    "F0": Variant(_F_WIDTHS, (1, 2, 6, 3), 192, 256, 0.2,
                  randaugment=(4, 5)),
    "F1": Variant(_F_WIDTHS, (2, 4, 12, 6), 224, 320, 0.3,
                  randaugment=(4, 10)),
    "F2": Variant(_F_WIDTHS, (3, 6, 18, 9), 256, 352, 0.4,
                  randaugment=(4, 10)),
    "F3": Variant(_F_WIDTHS, (4, 8, 24, 12), 320, 416, 0.4,
                  randaugment=(4, 15)),
    "F4": Variant(_F_WIDTHS, (5, 10, 30, 15), 384, 512, 0.5,
                  randaugment=(4, 15)),
    "F5": Variant(_F_WIDTHS, (6, 12, 36, 18), 416, 544, 0.5,
                  randaugment=(4, 15)),
    "F6": Variant(_F_WIDTHS, (7, 14, 42, 21), 448, 576, 0.5,
                  randaugment=(4, 15)),
    # CPU-sized: the F0 design at 1/8 width, one block a stage, 8-wide groups.
    "nano": Variant((32, 64, 192, 192), (1, 1, 1, 1), 64, 64, 0.2, group_size=8,
                    stem_widths=(8, 8, 16)),
}


@dataclasses.dataclass(frozen=True)
class BlockSettings:
  """What every block of one NFNet shares (the paper's alpha, group width, bottleneck
  expansion, squeeze-excite ratio, activation)."""
  alpha: float
  group_size: int
  expansion: float
  se_ratio: float
  activation: str
  ws_variance_eps: Optional[float] = None


def nf_block(x, in_ch, out_ch, settings, *, stride, beta, stochdepth_rate, name):
  """One NFNet bottleneck block (paper figure 4); returns its output tensor."""
  layers = tf_keras.layers
  group_size = settings.group_size
  width = int(out_ch * settings.expansion)
  groups = width // group_size
  if groups < 1:
    raise ValueError(f"{name}: bottleneck width {width} is below group size {group_size}")
  width = group_size * groups

  def act(t, suffix):
    return signal_propagation.ScaledActivation(settings.activation,
                                               name=f"{name}/act_{suffix}")(t)

  def conv(t, filters, kernel, conv_name, strides=1, groups=1):
    return ws_conv.WSConv2D(filters, kernel, strides=strides, padding="same",
                            groups=groups, variance_eps=settings.ws_variance_eps,
                            name=f"{name}/{conv_name}")(t)

  h = layers.Rescaling(beta, name=f"{name}/beta")(act(x, "in"))
  if stride > 1:
    shortcut = layers.AveragePooling2D(2, 2, padding="same", name=f"{name}/pool")(h)
    shortcut = conv(shortcut, out_ch, 1, "conv_shortcut")
  elif in_ch != out_ch:
    shortcut = conv(h, out_ch, 1, "conv_shortcut")
  else:
    shortcut = x
  y = conv(h, width, 1, "conv0")
  y = conv(act(y, "0"), width, 3, "conv1", strides=stride, groups=groups)
  y = conv(act(y, "1"), width, 3, "conv1b", groups=groups)
  y = conv(act(y, "1b"), out_ch, 1, "conv2")
  y = layers.Multiply(name=f"{name}/se_scale")(
      [y, squeeze_excite(y, out_ch, settings.se_ratio, name=f"{name}/squeeze_excite")])
  if stochdepth_rate > 0.0:
    y = stochastic_depth.StochasticDepth(stochdepth_rate, name=f"{name}/stoch_depth")(y)
  y = signal_propagation.SkipGain(name=f"{name}/skip_gain")(y)
  y = layers.Rescaling(settings.alpha, name=f"{name}/alpha")(y)
  return layers.Add(name=f"{name}/residual")([shortcut, y])


def squeeze_excite(x, channels, se_ratio, name):
  """2 * sigmoid(fc1(relu(fc0(mean_hw(x))))), broadcast over H and W."""
  layers = tf_keras.layers
  hidden = max(1, int(channels * se_ratio))
  s = layers.GlobalAveragePooling2D(keepdims=True, name=f"{name}/pool")(x)
  s = layers.Dense(hidden, activation="relu", name=f"{name}/fc0")(s)
  s = layers.Dense(channels, activation="sigmoid", name=f"{name}/fc1")(s)
  return layers.Rescaling(2.0, name=f"{name}/times_two")(s)


def stem(x, widths, out_ch, activation, ws_variance_eps=None):
  """Four 3x3 WS-convs (strides 2, 1, 1, 2) with scaled activations between."""
  strides = (2, 1, 1, 2)
  channels = tuple(widths) + (out_ch,)
  for i, (ch, s) in enumerate(zip(channels, strides)):
    if i:
      x = signal_propagation.ScaledActivation(activation, name=f"stem/act_{i}")(x)
    x = ws_conv.WSConv2D(ch, 3, strides=s, padding="same", variance_eps=ws_variance_eps,
                         name=f"stem_conv{i}")(x)
  return x


@gin.configurable("nfnet")
@dataclasses.dataclass(frozen=True)
class Design:
  """The architecture's knobs, which apply to every row of `VARIANTS` (the paper's
  values, as DeepMind's nfnets/nfnet.py defaults them).

  Gin knows it as `nfnet` (`nfnet.stochdepth_rate = 0.25`), the names its fields had
  as keywords of `nfnet()`; `nfnet()` reads those bindings for the fields it is not
  given, and the operative config records them.

  Args:
    width: multiplier on every stage width.
    se_ratio, alpha, expansion, final_conv_mult: as in the paper (0.5, 0.2, 0.5, 2).
    stochdepth_rate: the last block's drop rate; block i drops rate * i / blocks.
    dropout: before the classifier; None takes the variant's rate.
    activation: a key of `tricks.signal_propagation.ACTIVATIONS`.
    ws_variance_eps: None: weight standardisation as DeepMind's (N var floored at
      1e-4); a number: as timm's (var + ws_variance_eps; its dm_nfnet: 1e-5), see
      `tricks.ws_conv`. timm's checkpoints are built with "gelu_exact" and 1e-5
      (zoo/timm_checkpoint.py).
  """
  width: float = 1.0
  se_ratio: float = 0.5
  alpha: float = 0.2
  stochdepth_rate: float = 0.1
  dropout: Optional[float] = None
  activation: str = "gelu"
  expansion: float = 0.5
  final_conv_mult: float = 2
  ws_variance_eps: Optional[float] = None


def _design(design, knobs, read_gin=True):
  """`design` with the fields named in `knobs` replaced; with no `design`, `knobs` and,
  for the other fields, Gin's `nfnet.*` bindings (`read_gin`) or the paper's values."""
  fields = {f.name: f.default for f in dataclasses.fields(Design)}
  unknown = sorted(set(knobs) - set(fields))
  if unknown:
    raise TypeError(f"nfnet() got unexpected keyword arguments {unknown}; its design's "
                    f"knobs are {sorted(fields)}")
  if design is not None:
    return dataclasses.replace(design, **knobs)
  if read_gin:
    return Design(**knobs)
  return Design(**{**fields, **knobs})  # every field given: no Gin binding applies


def nfnet(variant="F0", num_classes=1000, input_shape=None, design=None, *, name=None,
          **knobs):
  """Builds NFNet-`variant` as a tf_keras functional model returning logits.

  Args:
    variant: a key of `VARIANTS` (F0-F6, or the CPU-sized "nano").
    num_classes: outputs of the final "logits" Dense layer.
    input_shape: (H, W, C); defaults to the variant's training resolution, RGB.
    design: a `Design`; None: the paper's values, or Gin's `nfnet.*` bindings where set.
    name: the model's; None: "nfnet_<variant>".
    **knobs: `Design` fields replacing `design`'s, e.g. `stochdepth_rate=0.25` (as
      `zoo.build` passes its keywords on).
  """
  design = _design(design, knobs)
  if variant not in VARIANTS:
    raise ValueError(f"unknown NFNet variant {variant!r}; choose one of {sorted(VARIANTS)}")
  spec = VARIANTS[variant]
  if input_shape is None:
    input_shape = (spec.train_image_size, spec.train_image_size, 3)
  dropout = spec.dropout if design.dropout is None else design.dropout

  inputs = tf_keras.Input(shape=input_shape, name="images")
  ch = int(spec.widths[0] * design.width) // 2
  x = stem(inputs, spec.stem_widths, ch, design.activation, design.ws_variance_eps)

  settings = BlockSettings(design.alpha, spec.group_size, design.expansion,
                           design.se_ratio, design.activation, design.ws_variance_eps)
  num_blocks = sum(spec.depths)
  index = 0
  expected_std = 1.0
  for stage, (stage_width, depth, stride) in enumerate(
      zip(spec.widths, spec.depths, (1, 2, 2, 2))):
    for block in range(depth):
      out_ch = int(stage_width * design.width)
      x = nf_block(
          x, ch, out_ch, settings, stride=stride if block == 0 else 1,
          beta=1.0 / expected_std,
          stochdepth_rate=design.stochdepth_rate * index / num_blocks,
          name=f"nf_block_{index}")
      ch = out_ch
      index += 1
      if block == 0:
        expected_std = 1.0
      expected_std = (expected_std ** 2 + design.alpha ** 2) ** 0.5

  x = ws_conv.WSConv2D(int(design.final_conv_mult * ch), 1,
                       variance_eps=design.ws_variance_eps, name="final_conv")(x)
  x = signal_propagation.ScaledActivation(design.activation, name="final_act")(x)
  x = tf_keras.layers.GlobalAveragePooling2D(name="pool")(x)
  if dropout > 0.0:
    x = tf_keras.layers.Dropout(dropout, name="dropout")(x)
  logits = tf_keras.layers.Dense(
      num_classes, kernel_initializer=tf_keras.initializers.RandomNormal(0.0, 0.01),
      name="logits", dtype="float32")(x)
  return tf_keras.Model(inputs, logits, name=name or f"nfnet_{variant.lower()}")


def weight_shapes(variant="F0", num_classes=1000, **overrides):
  """{"layer/weight": shape} of every weight `nfnet(variant, num_classes, **overrides)`
  holds (each WS-conv's kernel, bias and gain; SE's two Dense layers; one skip gain a
  block; the final conv; the head), by formula, without allocating the model.
  `overrides` are `nfnet`'s keywords; Gin bindings of `nfnet` are not read."""
  args = inspect.signature(nfnet).bind(variant, num_classes, **overrides)
  args.apply_defaults()
  args = args.arguments
  design = _design(args["design"], args["knobs"], read_gin=False)
  if variant not in VARIANTS:
    raise ValueError(f"unknown NFNet variant {variant!r}; choose one of {sorted(VARIANTS)}")
  spec = VARIANTS[variant]
  width, expansion, se_ratio = design.width, design.expansion, design.se_ratio
  shapes = {}

  def conv(name, kernel, in_ch, out_ch, groups=1):
    shapes[f"{name}/kernel"] = (kernel, kernel, in_ch // groups, out_ch)
    shapes[f"{name}/bias"] = (out_ch,)
    shapes[f"{name}/gain"] = (out_ch,)

  ch = int(spec.widths[0] * width) // 2
  stem_channels = (3,) + tuple(spec.stem_widths) + (ch,)
  for i, (a, b) in enumerate(zip(stem_channels, stem_channels[1:])):
    conv(f"stem_conv{i}", 3, a, b)
  index = 0
  for stage_width, depth, stride in zip(spec.widths, spec.depths, (1, 2, 2, 2)):
    for block in range(depth):
      name = f"nf_block_{index}"
      out_ch = int(stage_width * width)
      groups = int(out_ch * expansion) // spec.group_size
      if groups < 1:
        raise ValueError(f"bottleneck width {int(out_ch * expansion)} is below group "
                         f"size {spec.group_size}")
      mid = spec.group_size * groups
      if (stride > 1 and block == 0) or ch != out_ch:
        conv(f"{name}/conv_shortcut", 1, ch, out_ch)
      conv(f"{name}/conv0", 1, ch, mid)
      conv(f"{name}/conv1", 3, mid, mid, groups)
      conv(f"{name}/conv1b", 3, mid, mid, groups)
      conv(f"{name}/conv2", 1, mid, out_ch)
      hidden = max(1, int(out_ch * se_ratio))
      shapes[f"{name}/squeeze_excite/fc0/kernel"] = (out_ch, hidden)
      shapes[f"{name}/squeeze_excite/fc0/bias"] = (hidden,)
      shapes[f"{name}/squeeze_excite/fc1/kernel"] = (hidden, out_ch)
      shapes[f"{name}/squeeze_excite/fc1/bias"] = (out_ch,)
      shapes[f"{name}/skip_gain/skip_gain"] = ()
      ch = out_ch
      index += 1
  final = int(design.final_conv_mult * ch)
  conv("final_conv", 1, ch, final)
  shapes["logits/kernel"] = (final, num_classes)
  shapes["logits/bias"] = (num_classes,)
  return shapes


def count_params(variant="F0", num_classes=1000, **overrides):
  """The parameter count of `nfnet(variant, num_classes, **overrides)`, by formula
  (`weight_shapes`), without building it."""
  return sum(math.prod(shape) for shape in weight_shapes(variant, num_classes,
                                                         **overrides).values())
