"""The tf.data input pipeline: select, resize (cached), shuffle, augment, batch, normalise.

Training randomness is stateless and keyed by (seed, epoch, position in the epoch),
and the shuffle seed by (seed, epoch), so any epoch can be rebuilt exactly: a resumed
run sees the same batches as an uninterrupted one. The decoded, resized training
images (and the preprocessed evaluation images) are cached in memory once when they
fit, and every epoch's shuffle and augmentation run on the cache. Evaluation pads its
split to whole global batches with label -1 (dropped when scoring), so every strategy,
TPUs included, sees static shapes.

Given a `tf.distribute.InputContext` (from `distribute_datasets_from_function`), each
input pipeline (one a worker) yields per-replica batches of its own contiguous share of
every global batch (`share.py`). The augmentation itself is `augment.py`'s.

Resolution, evaluation crop and resize method, normalisation and RandAugment left
unset (None) are taken from the model's zoo card (`with_card`).
"""

import dataclasses
import re
import socket
from typing import Any, Optional, Sequence, Union

import gin
import numpy as np
import tensorflow as tf

from recipes import setting_types
from recipes.data import augment
from recipes.data import share as share_lib
from recipes.errors import ConfigError
from tricks import data_echoing
from tricks import sampling
from zoo import card as card_lib

PAD_LABEL = -1
DATA_SERVICE_MODES = ("parallel_epochs", "distributed_epoch")
ECHO_PLACEMENTS = ("before_augmentation", "after_augmentation", "batch")
# Fields a zoo card fills when they are left None.
CARD_FIELDS = ("image_size", "eval_image_size", "eval_crop_fraction", "eval_resize_method",
               "mean", "std", "randaugment")


def check_data_service(address, mode):
  """Raises ValueError unless `address` is None or "grpc://host:port" and `mode` a
  processing mode of the tf.data service."""
  if mode not in DATA_SERVICE_MODES:
    raise ValueError(f"InputPipeline.data_service_mode={mode!r}; use one of "
                     f"{', '.join(DATA_SERVICE_MODES)}")
  if address is None:
    return
  match = isinstance(address, str) and re.fullmatch(r"(grpc://)?([^\s:/]+):(\d+)", address)
  if not match or not 0 < int(match.group(3)) < 65536:
    raise ValueError(f"InputPipeline.data_service={address!r} is not a dispatcher address; "
                     "use 'grpc://host:port' (or None to make batches here)")


def data_service_answers(address, timeout=10.0):
  """Raises ConfigError when nothing listens at the tf.data service dispatcher `address`
  (a well-formed "grpc://host:port", or None): the service's client would wait forever."""
  if address is None:
    return
  host, port = address.split("://")[-1].rsplit(":", 1)
  try:
    socket.create_connection((host, int(port)), timeout=timeout).close()
  except OSError as e:
    raise ConfigError(
        f"InputPipeline.data_service={address!r}: no dispatcher answers there "
        f"({e.strerror or e}); start one (docs/input.md) or unset it to make batches "
        "here") from None


@gin.configurable
@dataclasses.dataclass(frozen=True)
class InputPipeline:
  """Builds the per-epoch training and the evaluation `tf.data.Dataset`s.

  Args:
    batch_size: the global batch, split evenly over replicas.
    image_size: training resolution (square); None: the model's.
    train_resize: None, or a larger square size training images are resized to
      before a random `image_size` crop (BiT's 160 -> 128; Kolesnikov et al. 2020).
    eval_image_size: test resolution; None: the model's (its card's test resolution
      when the model's input size is open).
    eval_crop_fraction: the centred square kept of the shorter side before resizing
      test images (1 keeps all; NFNets: S / (S + 32)); None: the card's.
    eval_resize_method: "bilinear" or "bicubic"; None: the card's.
    random_crop_padding: pixels of edge padding before a random crop (translation).
    random_crop_fill: None pads by reflection; a pixel value in [0, 255] pads with that
      constant (0: black, as torchvision's RandomCrop(32, padding=4); 127.5: the zero
      of inputs shifted by 0.5, as Menon et al.'s code pads).
    random_flip: random left-right flips (off for digits and text).
    random_resized_crop: None, or the (min, max) area fraction of a random crop of the
      source image, of aspect ratio (width / height) in `random_resized_crop_ratio`,
      resized to `image_size` (Szegedy et al. 2015's "inception crop", torchvision's
      RandomResizedCrop(scale=(0.08, 1))), instead of resizing the whole image, the
      box drawn by `random_resized_crop_sampler`. Images are then not cached;
      from image files, the shuffle holds the files' bytes and a JPEG is decoded only
      inside its crop's box (drawn from its header's shape: the same box, and the
      same pixels but the box's edge columns in 4:2:0 JPEGs; augment.decode_and_crop).
    random_resized_crop_sampler: how the crop's box is drawn, from (seed, epoch,
      position) either way: "model_garden", TF's stateless
      sample_distorted_bounding_box as Model Garden's and the TPU ResNet's inputs draw
      it (aspect ratio and height uniform, offsets that reach the bottom and right
      edges only when the box spans the image; 10 attempts, then the whole image;
      the default); or "torchvision", torchvision's
      RandomResizedCrop.get_params to its code (area uniform, aspect ratio
      log-uniform, offsets uniform integers; 10 attempts, then the centred crop of
      clamped aspect ratio: augment.torchvision_box), for recipes whose papers'
      code uses torchvision. At (0.08, 1) on a 500 x 375 image the two differ: mean
      area 0.37 (Model Garden's) against 0.43 (docs/input.md).
    random_resized_crop_method: "bilinear" or "bicubic", the crop's resize to
      `image_size`.
    random_resized_crop_antialias: antialias that resize (as torchvision's
      RandomResizedCrop on PIL images); False: plain, as Model Garden's and big_vision's
      ImageNet inputs resize (bilinear) and DeepMind's NFNet input (bicubic): aliased
      when shrinking, and a faster crop (docs/input.md).
    random_resized_crop_dct_scaling: decode a JPEG crop box at least twice
      `image_size` on both sides at 1/2, 1/4 or 1/8 of its size in libjpeg's IDCT
      (TensorFlow's `ratio`, PIL's draft mode), the largest that leaves it at least
      `image_size`, before the resize (`augment.decode_and_crop_scaled`). Faster for
      such boxes, other pixels (PSNR against the unscaled path: docs/input.md); such
      boxes are rare at 224 on ImageNet's 500 x 375 images, common at lower training
      resolutions. Off by default.
    color_jitter: () or (brightness, contrast, saturation): factors drawn from
      [1 - x, 1 + x], Model Garden's color_jitter (torchvision's ColorJitter without
      hue, in a fixed order where torchvision shuffles it).
    randaugment: (num_layers, magnitude) of Model Garden's RandAugment, () for none;
      None: the card's.
    randaugment_batched: run RandAugment over each batch (`randaugment_batched`: each
      image's draws from its (seed, epoch, position), so a resumed epoch draws alike;
      each op once on the images that drew it; Model Garden's pixels op by op; in the
      pipeline about as fast as per image, 1.01x-1.03x: docs/input.md); False: per
      image, with Model Garden's random stream (TensorFlow's op-level seeds, which the
      parallel map's calls race for: a rebuilt epoch's batches differ). Per image either way with `cutout` (it comes after
      RandAugment), echoing "after_augmentation" (copies share their augmentation) or
      images of no static size or not RGB.
    autoaugment: None, or a policy of Model Garden's AutoAugment (Cubuk et al. 2019):
      "reduced_cifar10" (the CIFAR-10 policy: 25 sub-policies), "v0", "svhn", ...; or
      "cifar10_pil": the same 25 sub-policies at the magnitudes of the widely copied
      PIL port (DeepVoltaire's CIFAR10Policy, as Ren et al.'s code has it:
      recipes/data/autoaugment_pil.py).
    autoaugment_translate: its translate_const, the shift in pixels at level 10 (Model
      Garden's 250 is for ImageNet-sized images: on 32-pixel CIFAR it shifts the image
      out of the frame; 16.1 puts level m at the PIL CIFAR policy's m/9 * 150/331 * 32).
    cutout: side in pixels of one square hole of zeros at a uniformly drawn centre,
      clipped at the border, after the other augmentations (DeVries & Taylor 2017,
      Cutout(n_holes=1, length=16)); 0 for none. Even sides only.
    uint8_batches: hand the model uint8 batches (each augmented image rounded, as
      torchvision's PIL pipeline and DALI hand them) and normalise them as the train
      and eval steps' first op, on the accelerator (`device_inputs`): a quarter of a
      float32 batch's bytes to the device, 1.20x-1.24x the host's rate (docs/input.md).
      The model then sees the rounded pixels (up to half a level from the float ones);
      the device's normalisation equals the host's of the same batch, and an exported
      model rounds as evaluation did. None (the default): uint8 unless MixUp, CutMix or
      Remix blend the batches (their blends are not whole pixels: float32, normalised
      on the host); True: uint8 (not with those); False: float32 (`hands_uint8`).
    mean, std: per-channel normalisation of [0, 1] pixels; None: the card's. One value
      each feeds the model one channel, the images' luma: a grey model
      (`zoo.build.input_channels = 1`) gets the RGB statistics (the card's or these)
      reduced the same way (`zoo.card.grey_statistics`); augmentation runs on RGB, the
      luma is taken last.
    shuffle_buffer: examples in the shuffle buffer (capped at the split's size).
    deterministic: fixed element order from parallel maps.
    cache: keep decoded, resized images in memory across epochs: True, False, or
      "auto" (when they take at most `cache_limit_mb`).
    echo_factor: data echoing (Choi et al. 2019): each example (or batch) is used
      this many times, on average; 1 turns it off.
    echo_placement: "before_augmentation", "after_augmentation" or "batch".
    echo_shuffle_buffer: shuffle after example echoing, so copies spread out.
    mixup_alpha, cutmix_alpha: Beta(alpha, alpha) of MixUp (Zhang et al. 2018) and
      CutMix (Yun et al. 2019), Model Garden's `MixupAndCutmix` on each global batch;
      labels become soft [batch, classes] targets. 0 and 0 turn both off.
    mix_prob, mix_switch_prob, mix_label_smoothing: chance a batch is mixed, chance
      a mixed batch uses CutMix, and the label smoothing applied with them.
    remix: None, or a `tricks.remix.Remix`: Remix (Chou et al. 2020) on each global
      batch with the training split's class counts (MixUp's images, the label to the
      minority class by their rule); it replaces mixup_alpha / cutmix_alpha.
    sampler: None (each example once an epoch, shuffled), or a `tricks.sampling.Sampler`:
      class-balanced, square-root or progressively balanced sampling (Kang et al.
      2020), from its `start_epoch` on (deferred re-sampling, Cao et al. 2019). A
      sampled epoch is drawn from (seed, epoch) and read from the source (not the
      cache).
    data_service: None, or the address of a tf.data service dispatcher
      ("grpc://host:port"): training batches are made by its workers' CPUs, which read
      the data at the same paths (docs/input.md). Evaluation stays local.
    data_service_mode: "parallel_epochs" (each worker makes the whole epoch; with one
      worker, the very batches made locally, and a resumed run sees the same) or
      "distributed_epoch" (the workers split the epoch; its order then depends on their
      timing).
  """

  batch_size: int = 32
  image_size: Optional[int] = None
  train_resize: Optional[int] = None
  eval_image_size: Optional[int] = None
  eval_crop_fraction: Optional[float] = None
  eval_resize_method: Optional[str] = None
  random_crop_padding: int = 0
  random_crop_fill: Optional[float] = None
  random_flip: bool = False
  random_resized_crop: Optional[Sequence[float]] = None
  random_resized_crop_ratio: Sequence[float] = (3 / 4, 4 / 3)
  random_resized_crop_sampler: str = "model_garden"
  random_resized_crop_method: str = "bilinear"
  random_resized_crop_antialias: bool = True
  random_resized_crop_dct_scaling: bool = False
  color_jitter: Sequence[float] = ()
  randaugment: Optional[Sequence[int]] = None
  randaugment_batched: bool = True
  autoaugment: Optional[str] = None
  autoaugment_translate: float = 250.0
  cutout: int = 0
  uint8_batches: Optional[bool] = None
  mean: Optional[Sequence[float]] = None
  std: Optional[Sequence[float]] = None
  shuffle_buffer: int = 10000
  deterministic: bool = True
  cache: Union[bool, str] = "auto"
  cache_limit_mb: int = 1024
  echo_factor: float = 1.0
  echo_placement: str = "before_augmentation"
  echo_shuffle_buffer: int = 1024
  mixup_alpha: float = 0.0
  cutmix_alpha: float = 0.0
  mix_prob: float = 1.0
  mix_switch_prob: float = 0.5
  mix_label_smoothing: float = 0.0
  sampler: Optional[sampling.Sampler] = None
  remix: Optional[Any] = None
  data_service: Optional[str] = None
  data_service_mode: str = "parallel_epochs"

  def __post_init__(self):
    if self.echo_placement not in ECHO_PLACEMENTS:
      raise ValueError(f"InputPipeline.echo_placement={self.echo_placement!r}; choose one of "
                       f"{', '.join(ECHO_PLACEMENTS)}")
    if self.mixup_alpha < 0 or self.cutmix_alpha < 0:
      raise ValueError(f"InputPipeline.mixup_alpha={self.mixup_alpha} and cutmix_alpha="
                       f"{self.cutmix_alpha} must be >= 0 (0 switches one off)")
    if self.uint8_batches is True and self.mixes:
      raise ValueError("InputPipeline.uint8_batches=True hands whole pixels, which MixUp, "
                       "CutMix and Remix blend: leave uint8_batches unset (None) or turn "
                       "the mixing off")
    if self.remix is not None and (self.mixup_alpha or self.cutmix_alpha):
      raise ValueError("InputPipeline.remix mixes the batch itself: set mixup_alpha and "
                       "cutmix_alpha to 0 (Remix's alpha is Remix.alpha)")
    # Working state, not settings: the in-memory caches and the RandAugment op.
    object.__setattr__(self, "_cached", {})
    object.__setattr__(self, "_randaugment", augment.randaugment_op(self.randaugment))
    object.__setattr__(self, "_randaugment_batched",
                       augment.randaugment_batched_op(self.randaugment))
    object.__setattr__(self, "_autoaugment", augment.autoaugment_op(
        self.autoaugment, self.autoaugment_translate))

  def unresolved(self):
    """The card fields still None."""
    return [f for f in CARD_FIELDS if getattr(self, f) is None]

  def plain_card(self, model_size=None):
    """The card of a model from outside the zoo: trained and tested alike at
    `image_size` (or the model's fixed size), whole images, ImageNet statistics."""
    size = self.image_size or model_size
    if size is None:
      raise ValueError("InputPipeline.image_size is unset and the model has no zoo card "
                       "and an open input size; bind InputPipeline.image_size")
    return card_lib.ModelCard(size, size, 1.0, "bilinear", card_lib.IMAGENET_MEAN,
                              card_lib.IMAGENET_STD, None, None)

  def _ready(self):
    """This pipeline, or, used without a model card, a copy on `plain_card`."""
    if not self.unresolved():
      return self
    if "plain" not in self._cached:
      self._cached["plain"] = self.with_card(self.plain_card())[0]
    return self._cached["plain"]

  def with_card(self, card, model_size=None, full_frame=False, channels=3):
    """A copy with the fields left None taken from `card` (a zoo ModelCard), and the
    values taken as {field: value}. A model with a fixed input size `model_size` trains
    and tests at that size; an open one trains at the card's resolution and tests at
    the card's test resolution, scaled with the training one (NFNet-F0: 192 -> 256),
    on the card's crop for that size (whole images when the source is `full_frame`).
    A model of one input `channels` (grey) takes the statistics (the card's, or RGB ones
    bound) reduced to one value each (`zoo.card.grey_statistics`). The Gin-built
    pipeline itself is not changed."""
    image_size = self.image_size or model_size or card.train_size
    eval_size = self.eval_image_size or model_size or int(round(
        image_size * card.test_size / card.train_size))
    values = dict(
        image_size=image_size, eval_image_size=eval_size,
        eval_crop_fraction=1.0 if full_frame else card.crop_for(eval_size),
        eval_resize_method=card.resize_method, mean=tuple(card.mean), std=tuple(card.std),
        randaugment=tuple(card.randaugment) if card.randaugment else ())
    taken = {f: values[f] for f in self.unresolved()}
    mean, std = taken.get("mean", self.mean), taken.get("std", self.std)
    if channels == 1 and len(mean) == 3 and len(std) == 3:  # RGB statistics, the card's
      taken["mean"], taken["std"] = card_lib.grey_statistics(mean, std)  # or bound
    return self.replace(**taken), taken

  def replace(self, **fields):
    """A copy with `fields` set (a plan's or a card's values); the Gin-built pipeline
    is not changed."""
    return dataclasses.replace(self, **fields)

  def check(self):
    """Raises ValueError naming the first bad setting (after card resolution)."""
    if self.unresolved():
      raise ValueError(f"InputPipeline.{self.unresolved()[0]} is unset and the model has no "
                       "zoo card to take it from; bind it")
    for name in ("batch_size", "image_size", "eval_image_size"):
      value = getattr(self, name)
      if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"InputPipeline.{name}={value!r} must be a whole number >= 1")
    if self.train_resize is not None and self.train_resize < self.image_size:
      raise ValueError(f"InputPipeline.train_resize={self.train_resize} is smaller than "
                       f"image_size={self.image_size}; resize to at least the crop size")
    if not 0 < self.eval_crop_fraction <= 1:
      raise ValueError(f"InputPipeline.eval_crop_fraction={self.eval_crop_fraction} must be "
                       "in (0, 1]")
    if not (self.uint8_batches is None or isinstance(self.uint8_batches, bool)):
      raise ValueError(f"InputPipeline.uint8_batches={self.uint8_batches!r} must be None, "
                       "True or False")
    if not isinstance(self.randaugment_batched, bool):
      raise ValueError(f"InputPipeline.randaugment_batched={self.randaugment_batched!r} "
                       "must be True or False")
    if not self.echo_factor >= 1:
      raise ValueError(f"InputPipeline.echo_factor={self.echo_factor} must be >= 1")
    if self.eval_resize_method not in card_lib.RESIZE_METHODS:
      raise ValueError(f"InputPipeline.eval_resize_method={self.eval_resize_method!r}; use "
                       f"one of {', '.join(card_lib.RESIZE_METHODS)}")
    if self.randaugment and len(tuple(self.randaugment)) != 2:
      raise ValueError(f"InputPipeline.randaugment={self.randaugment!r}; use (num_layers, "
                       "magnitude), or () for none")
    augment.check(self)
    for name in ("mix_prob", "mix_switch_prob", "mix_label_smoothing"):
      value = getattr(self, name)
      if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise ValueError(f"InputPipeline.{name}={value!r} must be a number in [0, 1]")
    for name in ("shuffle_buffer", "cache_limit_mb", "echo_shuffle_buffer"):
      value = getattr(self, name)
      if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"InputPipeline.{name}={value!r} must be a whole number >= 1")
    if self.cache not in (True, False, "auto"):
      raise ValueError(f"InputPipeline.cache={self.cache!r}; use True, False or 'auto'")
    check_data_service(self.data_service, self.data_service_mode)
    if (len(self.mean) not in (1, 3) or len(self.std) != len(self.mean)
        or min(self.std) <= 0):
      raise ValueError(f"InputPipeline.mean={self.mean} / std={self.std} need 3 values each "
                       "(1 each for a grey model), std > 0")

  def _options(self):
    options = tf.data.Options()
    options.deterministic = self.deterministic
    options.experimental_optimization.map_parallelization = True
    return options

  def _normalize(self, images):
    """(x / 255 - mean) / std of pixels in [0, 255], as one multiply-add over a whole
    batch (per image it cost as much as the antialiased resize: docs/input.md); of
    their luma for a grey model (one-value mean)."""
    mean = np.asarray(self.mean, np.float64)
    std = np.asarray(self.std, np.float64)
    scale = tf.constant(1.0 / (255.0 * std), tf.float32)
    images = tf.cast(images, tf.float32)
    if len(mean) == 1:
      images = card_lib.to_grey(images)
    return images * scale + tf.constant(-mean / std, tf.float32)

  def device_inputs(self, images):
    """A batch as the model takes it, in the train and eval steps: uint8 batches
    (`hands_uint8`) normalised there, on the accelerator, by the host's function;
    float batches, normalised on the host, as they are."""
    if images.dtype != tf.uint8:
      return images
    return self._normalize(images)

  def _resize(self, image):
    """The deterministic first step of training preprocessing (cached); the image as it
    is when a random resized crop comes later."""
    if self.random_resized_crop:
      return tf.cast(image, tf.float32)
    resize = self.train_resize or self.image_size
    return tf.image.resize(image, [resize, resize], antialias=True)

  def _augment(self, image, seed, randaugment=True):
    """The seeded training augmentation of a resized image (`augment.augment_image`),
    without RandAugment for `randaugment` False."""
    return augment.augment_image(
        self, image, seed, (self._autoaugment, self._randaugment if randaugment else None))

  def _randaugments_batches(self, echoing):
    """Whether RandAugment runs over batches in training (`randaugment_batched`)."""
    return (self._randaugment_batched is not None and self.randaugment_batched and
            not self.cutout and not (echoing and self.echo_placement == "after_augmentation"))

  def decodes_with_crop(self, source):
    """Whether training decodes only each random resized crop's window (files'
    bytes are shuffled, and `augment.decode_and_crop` decodes them)."""
    return bool(self.random_resized_crop) and source.read_encoded is not None

  def caches(self, num_examples, size, value_bytes=4):
    """Whether `num_examples` RGB images of `size`^2 pixels of `value_bytes` bytes a
    value (float32 4, uint8 1) are cached."""
    if self.random_resized_crop:  # whole source images, of any size
      return False
    if self.cache != "auto":
      return bool(self.cache)
    return num_examples * size * size * 3 * value_bytes <= self.cache_limit_mb * 2**20

  def _base(self, key, make, num_examples, size, value_bytes=4):
    """`make()` with its elements cached in memory (built once, shared by every epoch's
    dataset derived from it) when `caches` says so."""
    if not self.caches(num_examples, size, value_bytes):
      return make()
    source, rest = key[0], key[1:]
    key = (id(source),) + rest
    if key not in self._cached:  # the source is kept, so its id is not reused
      self._cached[key] = (source, make().cache())
    return self._cached[key][1]

  @property
  def hands_uint8(self):
    """Whether batches leave the host as uint8 pixels (`uint8_batches`; None: unless
    the batches are mixed)."""
    if self.uint8_batches is None:
      return not self.mixes
    return self.uint8_batches

  @property
  def mixes(self):
    """Whether training batches are mixed (and their labels soft)."""
    return bool(self.mixup_alpha or self.cutmix_alpha or self.remix is not None)

  def check_batch(self, num_examples, replicas):
    """A global batch splits over `replicas` and an epoch of `num_examples` (echoed
    ones counted) holds one at least; else one ConfigError line."""
    setting_types.whole("InputPipeline.batch_size", self.batch_size, 1)
    if self.batch_size % replicas:
      raise ConfigError(
          f"InputPipeline.batch_size={self.batch_size} does not split over {replicas} "
          "replicas; use a multiple of the replica count")
    if self.steps_per_epoch(num_examples) < 1:
      echoed = (f" (echoed x{self.echo_factor:g}: {self.echo_placement})"
                if self.echo_factor != 1 else "")
      raise ConfigError(
          f"the training split has {num_examples} examples{echoed}, fewer than one global "
          f"batch of {self.batch_size}; lower InputPipeline.batch_size or raise "
          "InputPipeline.echo_factor")

  def steps_per_epoch(self, num_examples):
    """Global batches in one epoch of `num_examples` (echoed ones included)."""
    if self.echo_factor == 1:
      return num_examples // self.batch_size
    if self.echo_placement == "batch":
      return data_echoing.echoed_count(num_examples // self.batch_size, self.echo_factor)
    return data_echoing.echoed_count(num_examples, self.echo_factor) // self.batch_size

  def _train_images(self, source, chosen):
    """The training examples `chosen`, resized; or their encoded bytes where training
    decodes only each random resized crop's window (`decodes_with_crop`)."""
    if self.decodes_with_crop(source):
      return source.read_encoded("train", chosen)
    return source.make_dataset("train", chosen).map(
        lambda image, label: (self._resize(image), label),
        num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)

  def _epoch_order(self, source, indices, epoch, seed, shuffle_seed):
    """The training examples `indices` in epoch `epoch`'s order: drawn by the sampler,
    or shuffled (from the cache when it holds them)."""
    if self.sampler is not None and self.sampler.active(epoch):
      order = self.sampler.epoch_order(source.train_labels[indices], source.num_classes,
                                       epoch, seed)
      if not source.sequential:  # drawn, already in order
        return self._train_images(source, indices[order])
      return self._drawn_counts(source, indices[order], shuffle_seed)
    ds = self._base((source, "train", indices.astype(np.int64).tobytes()),
                    lambda: self._train_images(source, indices), len(indices),
                    self.train_resize or self.image_size)
    return ds.shuffle(min(len(indices), self.shuffle_buffer), seed=shuffle_seed,
                      reshuffle_each_iteration=False)

  def _drawn_counts(self, source, drawn, shuffle_seed):
    """A sampled epoch of a source read in stored order (`Source.sequential`, TFDS):
    each drawn example read once and repeated as often as it was drawn, then shuffled.
    The drawn examples exactly, in the shuffle buffer's order, not the draw's."""
    unique, counts = np.unique(drawn, return_counts=True)
    ds = tf.data.Dataset.zip((self._train_images(source, unique),
                              tf.data.Dataset.from_tensor_slices(counts)))
    ds = ds.flat_map(lambda example, count: tf.data.Dataset.from_tensors(example).repeat(count))
    return ds.shuffle(min(len(drawn), self.shuffle_buffer), seed=shuffle_seed,
                      reshuffle_each_iteration=False)

  def _augmented(self, examples, epoch_seed, echoing):
    """(`examples` (position, example) augmented per image, from the key (seed, epoch,
    position); whether RandAugment then runs over their batches, where the examples
    are each image's whole pixels and its RandAugment draws)."""
    def prepare(position, example, over_batches):
      image, label = example
      key = tf.random.experimental.stateless_fold_in(epoch_seed, position)
      if not over_batches:
        image = self._augment(image, key)
        return (card_lib.whole_pixels(image) if self.hands_uint8 else image), label
      image = card_lib.whole_pixels(self._augment(image, key, randaugment=False))
      drawn = self._randaugment_batched.draws(key, tf.shape(image)[0], tf.shape(image)[1])
      return (image, drawn), label

    def mapped(over_batches):
      return examples.map(lambda position, example: prepare(position, example, over_batches),
                          num_parallel_calls=tf.data.AUTOTUNE, deterministic=self.deterministic)

    if self._randaugments_batches(echoing):
      ds = mapped(True)
      if augment.batchable(ds.element_spec[0][0]):
        return ds, True
    return mapped(False), False  # RandAugment per image (or none)

  def _finished_batches(self, batches, over_batches):
    """RandAugment over each batch where it runs there, then the normalisation (uint8
    batches leave the host as they are)."""
    def finish(images, label):
      if over_batches:
        images = self._randaugment_batched.distort(*images)
      return (images if self.hands_uint8 else self._normalize(images)), label

    if not over_batches and self.hands_uint8:
      return batches
    return batches.map(finish, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)

  def train_dataset(self, source, indices, epoch, seed, context=None):
    """Epoch `epoch` of the training examples `indices` (shuffled, augmented): global
    batches, or with `context` this input pipeline's per-replica batches."""
    if self.unresolved():
      return self._ready().train_dataset(source, indices, epoch, seed, context)
    n = len(indices)
    share = share_lib.Share.of(context, self.batch_size)
    epoch_seed = np.array([seed, epoch], dtype=np.int64)
    shuffle_seed = int(seed * 1_000_003 + epoch)
    echoing = self.echo_factor != 1

    def echo_examples(ds):
      ds = data_echoing.echo(ds, self.echo_factor, seed=shuffle_seed)
      return ds.shuffle(self.echo_shuffle_buffer, seed=shuffle_seed,
                        reshuffle_each_iteration=False)

    indices = np.asarray(indices)
    ds = self._epoch_order(source, indices, epoch, seed, shuffle_seed)
    if echoing and self.echo_placement == "before_augmentation":
      ds = echo_examples(ds)

    early = not share.whole and not echoing and not self.mixes
    ds = ds.enumerate()
    if early:  # keep this pipeline's share of each global batch, then augment it
      ds = share.keep(ds.take(self.steps_per_epoch(n) * self.batch_size))
    ds, over_batches = self._augmented(ds, epoch_seed, echoing)
    if echoing and self.echo_placement == "after_augmentation":
      ds = echo_examples(ds)
    ds = ds.batch(share.per_replica if early else self.batch_size, drop_remainder=True)
    ds = self._finished_batches(ds, over_batches)
    if self.remix is not None:
      counts = np.bincount(source.train_labels[indices], minlength=source.num_classes)
      ds = augment.remix(self.remix, ds, counts, epoch_seed)
    elif self.mixes:
      ds = augment.mix(self, ds, source.num_classes, shuffle_seed)
    if echoing and self.echo_placement == "batch":
      ds = data_echoing.echo(ds, self.echo_factor, seed=shuffle_seed)
    if echoing:  # a fractional factor varies the count: fix it at the expected one
      ds = ds.repeat().take(self.steps_per_epoch(n))
    if not share.whole and not early:
      ds = share.cut(ds)
    if self.data_service:  # the graph above runs on the service's workers
      ds = ds.apply(tf.data.experimental.service.distribute(
          processing_mode=self.data_service_mode, service=self.data_service))
    return ds.prefetch(tf.data.AUTOTUNE).with_options(self._options())

  def eval_image(self, image):
    """The evaluation preprocessing: centred square crop, resize, normalise (the same
    function the exported SavedModel serves with); with uint8 batches (`hands_uint8`),
    the crop's resized pixels rounded, normalised later by `device_inputs`."""
    if self.unresolved():
      return self._ready().eval_image(image)
    pixels = card_lib.eval_crop_resize(image, self.eval_image_size, self.eval_crop_fraction,
                                       self.eval_resize_method)
    return self._eval_output(pixels)

  def _eval_output(self, pixels):
    if self.hands_uint8:
      return card_lib.whole_pixels(pixels)
    return card_lib.normalize_pixels(pixels, self.mean, self.std)

  def eval_dataset(self, source, split="test", indices=None, context=None):
    """A split (or the examples `indices` of it), evaluation-preprocessed and padded
    with PAD_LABEL examples to whole global batches (with `context`, this input
    pipeline's per-replica share of them)."""
    if self.unresolved():
      return self._ready().eval_dataset(source, split, indices, context)
    share = share_lib.Share.of(context, self.batch_size)
    labels = source.test_labels if split == "test" else source.train_labels
    n = len(labels) if indices is None else len(indices)
    pad = -n % self.batch_size
    size = self.eval_image_size

    def preprocessed():
      chosen = None if indices is None else np.asarray(indices)
      if source.read_encoded is not None:  # image files: a JPEG decoded inside its crop
        return source.read_encoded(split, chosen).map(
            lambda encoded, label: (self._eval_output(card_lib.eval_crop_resize_encoded(
                encoded, size, self.eval_crop_fraction, self.eval_resize_method)), label),
            num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
      return source.make_dataset(split, chosen).map(
          lambda image, label: (self.eval_image(image), label),
          num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)

    key = (source, "eval", split, None if indices is None else
           np.asarray(indices, np.int64).tobytes())
    ds = self._base(key, preprocessed, n, size, value_bytes=1 if self.hands_uint8 else 4)
    if pad:
      shape = [size, size, 3 if self.hands_uint8 else len(self.mean)]
      filler = tf.data.Dataset.from_tensors(
          (tf.zeros(shape, tf.uint8 if self.hands_uint8 else tf.float32),
           tf.constant(PAD_LABEL, tf.int32)))
      ds = ds.concatenate(filler.repeat(pad))
    if not share.whole:
      ds = share.keep(ds.enumerate()).map(lambda _, example: example)
    ds = ds.batch(share.per_replica, drop_remainder=True)
    return ds.prefetch(tf.data.AUTOTUNE).with_options(self._options())

