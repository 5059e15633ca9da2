"""Training augmentation of the input pipeline (`pipeline.InputPipeline`'s fields).

Per image, after the (cached) resize: a seeded random crop (a random resized "inception"
crop, its box drawn as Model Garden's or as torchvision's, a crop of a larger resize, or
a crop after edge padding) and flip, drawn from
(seed, epoch, position), then Model Garden's colour jitter, AutoAugment and RandAugment
and Cutout. Per global batch: Model Garden's MixUp / CutMix, with soft labels.

`settings` below is an `InputPipeline`: these functions read its augmentation fields
(documented there) and change nothing.
"""

import numpy as np
import tensorflow as tf

# Imported here, not when first used: Model Garden registers Gin configurables on
# import, which Gin refuses once a config is locked (inside a run).
from official.vision.ops import augment as mg_augment
from official.vision.ops import preprocess_ops
from recipes.data import autoaugment_pil
from recipes.data import randaugment as randaugment_lib
from recipes.data import randaugment_batched
from zoo import card as card_lib

# The PIL port's CIFAR-10 policy at its own magnitudes (Ren et al.'s copy).
PIL_POLICIES = {"cifar10_pil": autoaugment_pil.CIFAR10Policy}
# The scalings libjpeg's IDCT can decode at (TensorFlow's JPEG decoders' `ratio`).
DCT_RATIOS = (1, 2, 4, 8)


def randaugment_op(randaugment):
  """Model Garden's RandAugment for (num_layers, magnitude) with the same pixels at less
  cost (`randaugment.RandAugment`); None for () or None."""
  return randaugment_lib.RandAugment(*randaugment) if randaugment else None


def randaugment_batched_op(randaugment):
  """RandAugment (num_layers, magnitude) over batches (`randaugment_batched`); None for
  () or None."""
  if not randaugment:
    return None
  try:
    return randaugment_batched.BatchedRandAugment(*randaugment)
  except (TypeError, ValueError) as e:
    raise ValueError(f"InputPipeline.randaugment={tuple(randaugment)!r}: {e}") from None


def batchable(spec):
  """Whether images of tf.TensorSpec `spec` (one image) take RandAugment over batches:
  uint8 RGB of a static size, 3 pixels or more a side (Sharpness's 3 x 3 kernel; per
  image, smaller ones take Model Garden's)."""
  return (spec.dtype == tf.uint8 and spec.shape.rank == 3 and
          spec.shape.is_fully_defined() and spec.shape[-1] == 3 and
          min(spec.shape[0], spec.shape[1]) >= 3)


def autoaugment_op(policy, translate):
  """Model Garden's AutoAugment `policy` shifting `translate` pixels at level 10, or
  'cifar10_pil' (autoaugment_pil: the PIL port's policy, its own magnitudes; translate
  unused); None for no policy. Raises ValueError naming the InputPipeline field at
  fault."""
  if policy is None:
    return None
  if not isinstance(policy, str):
    raise ValueError(f"InputPipeline.autoaugment={policy!r} must be a policy name "
                     "such as 'reduced_cifar10', or None")
  if policy in PIL_POLICIES:
    return PIL_POLICIES[policy]()
  if (isinstance(translate, bool) or not isinstance(translate, (int, float))
      or not translate > 0):
    raise ValueError(f"InputPipeline.autoaugment_translate={translate!r} must be a number of "
                     "pixels > 0")
  try:
    return mg_augment.AutoAugment(augmentation_name=policy, translate_const=float(translate))
  except ValueError as e:
    raise ValueError(f"InputPipeline.autoaugment={policy!r} is not a policy of "
                     f"Model Garden's AutoAugment ({e})") from None


def check(settings):
  """Raises ValueError naming the first bad crop, colour or cutout setting."""
  padding = settings.random_crop_padding
  if isinstance(padding, bool) or not isinstance(padding, int) or padding < 0:
    raise ValueError(f"InputPipeline.random_crop_padding={padding!r} must "
                     "be a whole number >= 0")
  fill = settings.random_crop_fill
  if fill is not None and (isinstance(fill, bool) or not isinstance(fill, (int, float))
                           or not 0 <= fill <= 255):
    raise ValueError(f"InputPipeline.random_crop_fill={fill!r} must be a pixel value in "
                     "[0, 255], or None to pad by reflection")
  crop = settings.random_resized_crop
  if crop is not None and not (len(tuple(crop)) == 2 and 0 < crop[0] <= crop[1] <= 1):
    raise ValueError(f"InputPipeline.random_resized_crop={crop!r} must be (min, max) area "
                     "fractions with 0 < min <= max <= 1, e.g. (0.08, 1.0), or None")
  ratio = tuple(settings.random_resized_crop_ratio)
  if not (len(ratio) == 2 and 0 < ratio[0] <= ratio[1]):
    raise ValueError(f"InputPipeline.random_resized_crop_ratio={ratio!r} must be (min, "
                     "max) aspect ratios with 0 < min <= max, e.g. (0.75, 1.333)")
  if settings.random_resized_crop_sampler not in CROP_SAMPLERS:
    raise ValueError("InputPipeline.random_resized_crop_sampler="
                     f"{settings.random_resized_crop_sampler!r}; use one of "
                     f"{', '.join(CROP_SAMPLERS)}")
  if settings.random_resized_crop_method not in card_lib.RESIZE_METHODS:
    raise ValueError("InputPipeline.random_resized_crop_method="
                     f"{settings.random_resized_crop_method!r}; use one of "
                     f"{', '.join(card_lib.RESIZE_METHODS)}")
  for name in ("random_resized_crop_antialias", "random_resized_crop_dct_scaling"):
    if not isinstance(getattr(settings, name), bool):
      raise ValueError(f"InputPipeline.{name}={getattr(settings, name)!r} must be True or "
                       "False")
  jitter = tuple(settings.color_jitter)
  if jitter and (len(jitter) != 3 or min(jitter) < 0):
    raise ValueError(f"InputPipeline.color_jitter={jitter!r} must be () or (brightness, "
                     "contrast, saturation), each >= 0")
  cutout = settings.cutout
  if isinstance(cutout, bool) or not isinstance(cutout, int) or cutout < 0 or cutout % 2:
    raise ValueError(f"InputPipeline.cutout={cutout!r} must be an even whole number "
                     "of pixels >= 0 (0: no cutout)")


# The random resized crop's samplers (InputPipeline.random_resized_crop_sampler).
CROP_SAMPLERS = ("model_garden", "torchvision")
ATTEMPTS = 10  # both samplers' tries before their fallback


def model_garden_box(settings, shape, seed):
  """(begin, extent) of the seeded random resized crop of an image of `shape`
  ([height, width, ...]) as Model Garden's and the TPU ResNet's inputs draw it: TF's
  stateless sample_distorted_bounding_box (aspect ratio and height uniform; offsets
  that reach the bottom and right edges only when the box spans the image; 10
  attempts, then the whole image)."""
  begin, extent, _ = tf.image.stateless_sample_distorted_bounding_box(
      tf.concat([shape[:2], [3]], 0), tf.constant([[[0.0, 0.0, 1.0, 1.0]]]), seed=seed + 3,
      min_object_covered=float(settings.random_resized_crop[0]),
      aspect_ratio_range=[float(r) for r in settings.random_resized_crop_ratio],
      area_range=[float(a) for a in settings.random_resized_crop], max_attempts=ATTEMPTS,
      use_image_if_no_bounding_boxes=True)
  return begin, extent


def torchvision_draws(scale, ratio, seed):
  """The uniform draws of one torchvision RandomResizedCrop.get_params, stateless from
  `seed`: `ATTEMPTS` area fractions in [scale), `ATTEMPTS` log aspect ratios in
  [log ratio) (both float32, as torch.empty(1).uniform_ draws them: computed in double
  from float32 bounds, stored as float32), and 2 numbers in [0, 1) for the accepted
  attempt's offsets (torch.randint(0, n) as floor(u n))."""
  u = tf.random.stateless_uniform([2 * ATTEMPTS + 2], seed=seed + 3, dtype=tf.float64)
  low, high = (float(np.float32(s)) for s in scale)
  log_low, log_high = (float(x) for x in np.log(np.asarray(ratio, np.float32)))
  fractions = tf.cast(low + u[:ATTEMPTS] * (high - low), tf.float32)
  log_ratios = tf.cast(log_low + u[ATTEMPTS:2 * ATTEMPTS] * (log_high - log_low), tf.float32)
  return fractions, log_ratios, u[2 * ATTEMPTS:]


def torchvision_box_of_draws(shape, ratio, fractions, log_ratios, offsets):
  """(begin, extent) of torchvision's RandomResizedCrop.get_params
  (torchvision/transforms/transforms.py) for an image of `shape` given its draws
  (`torchvision_draws`): attempt k takes the area fraction fractions[k] of the image
  at aspect exp(log_ratios[k]) (float32, as torch.exp), w = round(sqrt(area * aspect)),
  h = round(sqrt(area / aspect)) (Python's round: half to even, as tf.round); the first
  attempt with 0 < w <= width and 0 < h <= height is kept, at offsets uniform integers
  in [0, height - h] and [0, width - w]. With none, the centred crop of the whole image,
  its aspect ratio clamped to `ratio`. All the attempts at once, no loop."""
  height = tf.cast(shape[0], tf.float64)
  width = tf.cast(shape[1], tf.float64)
  target = height * width * tf.cast(fractions, tf.float64)
  aspect = tf.cast(tf.exp(tf.cast(log_ratios, tf.float32)), tf.float64)
  w = tf.round(tf.sqrt(target * aspect))
  h = tf.round(tf.sqrt(target / aspect))
  ok = (w > 0) & (w <= width) & (h > 0) & (h <= height)
  attempts = tf.range(tf.size(ok))
  first = tf.reduce_min(tf.where(ok, attempts, tf.size(ok) - 1))  # the first that fits
  h_ok, w_ok = h[first], w[first]
  offsets = tf.cast(offsets, tf.float64)
  i_ok = tf.minimum(tf.floor(offsets[0] * (height - h_ok + 1)), height - h_ok)
  j_ok = tf.minimum(tf.floor(offsets[1] * (width - w_ok + 1)), width - w_ok)
  # The fallback: the whole image, its aspect ratio clamped to [min, max], centred.
  low, high = float(min(ratio)), float(max(ratio))
  in_ratio = width / height
  w_fb = tf.where(in_ratio > high, tf.round(height * high), width)
  h_fb = tf.where(in_ratio < low, tf.round(width / low), height)
  i_fb = tf.math.floordiv(height - h_fb, 2)
  j_fb = tf.math.floordiv(width - w_fb, 2)
  found = tf.reduce_any(ok)
  box = tf.cast(tf.where(found, tf.stack([i_ok, j_ok, h_ok, w_ok]),
                         tf.stack([i_fb, j_fb, h_fb, w_fb])), tf.int32)
  return tf.stack([box[0], box[1], 0]), tf.stack([box[2], box[3], -1])


def torchvision_box(settings, shape, seed):
  """(begin, extent) of the seeded random resized crop of an image of `shape` as
  torchvision's RandomResizedCrop draws it (area uniform, aspect log-uniform, offsets
  anywhere the box fits; the centred crop after 10 attempts), from (seed) alone."""
  draws = torchvision_draws(settings.random_resized_crop, settings.random_resized_crop_ratio,
                            seed)
  return torchvision_box_of_draws(shape, settings.random_resized_crop_ratio, *draws)


def crop_box(settings, shape, seed):
  """(begin, extent) of the seeded random resized crop of an image of `shape`
  ([height, width, ...]) by `settings.random_resized_crop_sampler`: the box depends on
  the shape and the seed only (the same from a JPEG's header as from the decoded
  image)."""
  if settings.random_resized_crop_sampler == "torchvision":
    return torchvision_box(settings, shape, seed)
  return model_garden_box(settings, shape, seed)


def dct_ratio_index(extent, size):
  """Index into DCT_RATIOS of the largest scaling r that leaves a box of `extent`
  ([height, width]) at least `size` on both sides (h // r and w // r >= size): 0, no
  scaling, for a box under 2 * size on a side."""
  short = tf.minimum(extent[0], extent[1])
  return tf.reduce_sum(tf.cast(short // tf.constant(DCT_RATIOS[1:]) >= size, tf.int32))


def decode_and_crop_scaled(encoded, begin, extent, size):
  """The box (`begin`, `extent`) of a JPEG decoded at 1 / r of its size in libjpeg's
  IDCT (r of DCT_RATIOS by `dct_ratio_index`): the window in the scaled image's pixels,
  begin // r and extent // r (libjpeg's scaled image is ceil(side / r), so it fits); its
  area is at most (r - 1) pixels of the original from the box's top left and under 2r
  short of its extent. Where r > 1 the decode skips most of the IDCT's and colour
  conversion's work, and the resize after it shrinks less."""

  def at(r):
    window = tf.stack([begin[0] // r, begin[1] // r, extent[0] // r, extent[1] // r])
    return lambda: tf.image.decode_and_crop_jpeg(encoded, window, channels=3, ratio=r)

  return tf.switch_case(dct_ratio_index(extent, size), [at(r) for r in DCT_RATIOS])


def static_channels(image, channels):
  """`image` [height, width, channels] with its channel count in the static shape: a
  crop by a drawn box (`tf.slice`, a `tf.cond` of decodes) loses it, and RandAugment's
  ops on three channels at once (recipes/data/randaugment.py) need it to be known, or
  run Model Garden's slower ops (the same pixels)."""
  image.set_shape([None, None, channels])
  return image


def decode_and_crop(settings, encoded, seed):
  """The random resized crop's box of an encoded image, decoded alone: JPEGs through
  libjpeg-turbo's cropped decode (`decode_and_crop_jpeg`, the box drawn from the header's
  shape, as Model Garden's and the TPU ResNet's input do), other formats decoded whole
  then sliced. The same pixels as `decode_image` then slicing the same box; with
  `random_resized_crop_dct_scaling`, a JPEG box of 2 * image_size or more on both sides
  is decoded scaled down (`decode_and_crop_scaled`: other pixels, docs/input.md)."""

  def jpeg():
    begin, extent = crop_box(settings, tf.image.extract_jpeg_shape(encoded), seed)
    if settings.random_resized_crop_dct_scaling:
      return decode_and_crop_scaled(encoded, begin, extent, settings.image_size)
    window = tf.stack([begin[0], begin[1], extent[0], extent[1]])
    return tf.image.decode_and_crop_jpeg(encoded, window, channels=3)

  def other():
    image = tf.io.decode_image(encoded, channels=3, expand_animations=False)
    image.set_shape([None, None, 3])
    begin, extent = crop_box(settings, tf.shape(image), seed)
    return tf.slice(image, begin, extent)

  return static_channels(tf.cond(tf.io.is_jpeg(encoded), jpeg, other), 3)


def resize_crop(settings, image):
  """The random resized crop `image` resized to `image_size` by its method. Antialiased
  bilinear on a crop no larger than the output on either side is plain bilinear (the
  triangle kernel only widens when it shrinks; equal to float rounding), and plain
  bilinear costs about a sixth of TensorFlow's ScaleAndTranslate (docs/input.md), so
  such crops take it."""
  size = settings.image_size
  method, antialias = settings.random_resized_crop_method, settings.random_resized_crop_antialias
  if not (antialias and method == "bilinear"):
    return tf.image.resize(image, [size, size], method=method, antialias=antialias)
  return tf.cond(tf.reduce_all(tf.shape(image)[:2] <= size),
                 lambda: tf.image.resize(image, [size, size]),
                 lambda: tf.image.resize(image, [size, size], antialias=True))


def _crop(settings, image, seed):
  """The seeded random resized crop (of an encoded image: decoded with the crop), crop
  of a larger resize, or crop after padding."""
  size = settings.image_size
  if settings.random_resized_crop:
    if image.dtype == tf.string:
      image = decode_and_crop(settings, image, seed)
    else:
      begin, extent = crop_box(settings, tf.shape(image), seed)
      image = static_channels(tf.slice(image, begin, extent), image.shape[-1])
    image = resize_crop(settings, image)
  elif (settings.train_resize or size) > size:
    image = tf.image.stateless_random_crop(image, [size, size, 3], seed=seed + 2)
  if settings.random_crop_padding:
    pad = settings.random_crop_padding
    if settings.random_crop_fill is None:
      image = tf.pad(image, [[pad, pad], [pad, pad], [0, 0]], mode="SYMMETRIC")
    else:
      image = tf.pad(image, [[pad, pad], [pad, pad], [0, 0]],
                     constant_values=float(settings.random_crop_fill))
    image = tf.image.stateless_random_crop(image, [size, size, 3], seed=seed)
  return image


def augment_image(settings, image, seed, model_garden_ops=()):
  """Seeded crop, crop-with-padding and flip, then colour jitter, `model_garden_ops`
  (AutoAugment, RandAugment; None where off) and Cutout (Model Garden's: drawn from TF's
  op-level seeds, not from (seed, epoch, position), so a resumed epoch redraws them) of
  a resized image (with a random resized crop: of the source image, or of its encoded
  bytes, a scalar string, decoded with the crop)."""
  image = _crop(settings, image, seed)
  if settings.random_flip:
    image = tf.image.stateless_random_flip_left_right(image, seed=seed + 1)
  uint8_ops = [op.distort for op in model_garden_ops if op]
  if settings.color_jitter:
    uint8_ops.insert(0, lambda x: preprocess_ops.color_jitter(x, *settings.color_jitter))
  if uint8_ops:  # Model Garden's ops take and give uint8 pixels: convert once
    image = card_lib.whole_pixels(image)
    for op in uint8_ops:
      image = op(image)
    image = tf.cast(image, tf.float32)
  if settings.cutout:
    image = mg_augment.cutout(image, settings.cutout // 2, replace=0)
  return image


def mix(settings, batches, num_classes, seed):
  """Model Garden's MixupAndCutmix over batches. Its random ops are stateful and
  seeded from the global seed when traced: tracing under the epoch's seed (then
  putting the global seed back) makes each epoch's draws differ from the last and
  repeat exactly on a rebuilt (resumed) epoch. The map is sequential so the draws
  meet the batches in order.

  Known deviation, left as Model Garden has it: its CutMix weighs the labels with
  lam = 1 - r_h r_w / HW of the box as drawn, before the box is clipped at the image
  border (and rounded to even sides), so the image's own label can be under-weighted
  against the share of pixels it keeps; Yun et al.'s code re-computes lam after
  clipping.
  """
  mixer = mg_augment.MixupAndCutmix(
      num_classes=num_classes, mixup_alpha=settings.mixup_alpha,
      cutmix_alpha=settings.cutmix_alpha, prob=settings.mix_prob,
      switch_prob=settings.mix_switch_prob, label_smoothing=settings.mix_label_smoothing)
  previous = tf.compat.v1.get_seed(None)[0]
  tf.random.set_seed(seed)
  try:
    return batches.map(
        lambda images, labels: mixer.distort(images, tf.cast(labels, tf.int32)))
  finally:
    tf.random.set_seed(previous)


REMIX_SALT = 0x7e31  # Remix's draws: their own stream of the epoch's seed


def remix(remixer, batches, class_counts, epoch_seed):
  """Remix (a tricks.remix.Remix) on each global batch with the training split's
  class counts; batch b's draws from (seed, epoch, b), so a rebuilt (resumed) epoch
  mixes alike."""
  base = tf.random.experimental.stateless_fold_in(epoch_seed, REMIX_SALT)

  def mix(b, batch):
    images, labels = batch
    return remixer.mix(images, labels, class_counts,
                       tf.random.experimental.stateless_fold_in(base, b))

  return batches.enumerate().map(mix)
