"""The tf.data input pipeline: select, shuffle, decode, augment, batch, prefetch.

Training randomness is stateless and keyed by (seed, epoch, position in the epoch),
and the shuffle seed by (seed, epoch), so any epoch can be rebuilt exactly: a resumed
run sees the same batches as an uninterrupted one. Evaluation pads the test split to
whole global batches with label -1 (dropped when scoring), so every strategy, TPUs
included, sees static shapes.
"""

import gin
import numpy as np
import tensorflow as tf

# Imported here, not when first used: Model Garden registers Gin configurables on
# import, which Gin refuses once a config is locked (inside a run).
from official.vision.ops import augment
from tricks import data_echoing

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
PAD_LABEL = -1
ECHO_PLACEMENTS = ("before_augmentation", "after_augmentation", "batch")


@gin.configurable
class InputPipeline:
  """Builds the per-epoch training and the evaluation `tf.data.Dataset`s.

  Args:
    batch_size: the global batch, split evenly over replicas.
    image_size: training resolution (square).
    train_resize: None, or a larger square size training images are resized to
      before a random `image_size` crop (BiT's 160 -> 128; Kolesnikov et al. 2020).
    eval_image_size: test resolution; None uses `image_size`.
    eval_crop_fraction: centre crop kept before resizing test images (1 keeps all).
    random_crop_padding: pixels of edge padding before a random crop (translation).
    random_flip: random left-right flips (off for digits and text).
    randaugment: (num_layers, magnitude) of Model Garden's RandAugment, or None.
    mean, std: per-channel normalisation of [0, 1] pixels.
    shuffle_buffer: examples in the shuffle buffer (capped at the split's size).
    deterministic: fixed element order from parallel maps.
    echo_factor: data echoing (Choi et al. 2019): each example (or batch) is used
      this many times, on average; 1 turns it off.
    echo_placement: "before_augmentation", "after_augmentation" or "batch".
    echo_shuffle_buffer: shuffle after example echoing, so copies spread out.
    mixup_alpha, cutmix_alpha: Beta(alpha, alpha) of MixUp (Zhang et al. 2018) and
      CutMix (Yun et al. 2019), Model Garden's `MixupAndCutmix` on each global batch;
      labels become soft [batch, classes] targets. 0 and 0 turn both off.
    mix_prob, mix_switch_prob, mix_label_smoothing: chance a batch is mixed, chance
      a mixed batch uses CutMix, and the label smoothing applied with them.
  """

  def __init__(self, batch_size=32, image_size=64, train_resize=None, eval_image_size=None,
               eval_crop_fraction=1.0, random_crop_padding=0, random_flip=False,
               randaugment=None, mean=IMAGENET_MEAN, std=IMAGENET_STD,
               shuffle_buffer=10000, deterministic=True, echo_factor=1.0,
               echo_placement="before_augmentation", echo_shuffle_buffer=1024,
               mixup_alpha=0.0, cutmix_alpha=0.0, mix_prob=1.0, mix_switch_prob=0.5,
               mix_label_smoothing=0.0):
    if echo_placement not in ECHO_PLACEMENTS:
      raise ValueError(f"unknown echo_placement {echo_placement!r}; choose one of "
                       f"{ECHO_PLACEMENTS}")
    self.batch_size = batch_size
    self.image_size = image_size
    if train_resize is not None and train_resize < image_size:
      raise ValueError(f"InputPipeline.train_resize={train_resize} is smaller than "
                       f"image_size={image_size}; resize to at least the crop size")
    self.train_resize = train_resize
    self.eval_image_size = eval_image_size or image_size
    self.eval_crop_fraction = eval_crop_fraction
    self.random_crop_padding = random_crop_padding
    self.random_flip = random_flip
    self.randaugment = randaugment
    self.mean = tf.constant(mean, tf.float32)
    self.std = tf.constant(std, tf.float32)
    self.shuffle_buffer = shuffle_buffer
    self.deterministic = deterministic
    self.echo_factor = echo_factor
    self.echo_placement = echo_placement
    self.echo_shuffle_buffer = echo_shuffle_buffer
    if mixup_alpha < 0 or cutmix_alpha < 0:
      raise ValueError(f"mixup_alpha={mixup_alpha} and cutmix_alpha={cutmix_alpha} must "
                       "be >= 0 (0 switches one off)")
    self.mixup_alpha = mixup_alpha
    self.cutmix_alpha = cutmix_alpha
    self.mix_prob = mix_prob
    self.mix_switch_prob = mix_switch_prob
    self.mix_label_smoothing = mix_label_smoothing
    self._randaugment = None
    if randaugment:
      layers, magnitude = randaugment
      self._randaugment = augment.RandAugment(num_layers=layers, magnitude=magnitude)

  def _options(self):
    options = tf.data.Options()
    options.deterministic = self.deterministic
    options.experimental_optimization.map_parallelization = True
    return options

  def _normalize(self, image):
    return (tf.cast(image, tf.float32) / 255.0 - self.mean) / self.std

  def _augment(self, image, seed):
    """Resize, then seeded crop-with-padding, flip and RandAugment (uint8 in)."""
    size = self.image_size
    resize = self.train_resize or size
    image = tf.image.resize(image, [resize, resize], antialias=True)
    if resize > size:
      image = tf.image.stateless_random_crop(image, [size, size, 3], seed=seed + 2)
    if self.random_crop_padding:
      pad = self.random_crop_padding
      image = tf.pad(image, [[pad, pad], [pad, pad], [0, 0]], mode="SYMMETRIC")
      image = tf.image.stateless_random_crop(image, [size, size, 3], seed=seed)
    if self.random_flip:
      image = tf.image.stateless_random_flip_left_right(image, seed=seed + 1)
    if self._randaugment is not None:
      image = tf.cast(self._randaugment.distort(
          tf.cast(tf.clip_by_value(tf.round(image), 0, 255), tf.uint8)), tf.float32)
    return image

  @property
  def mixes(self):
    """Whether training batches are mixed (and their labels soft)."""
    return bool(self.mixup_alpha or self.cutmix_alpha)

  def _mix(self, ds, num_classes, seed):
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
    mixer = augment.MixupAndCutmix(
        num_classes=num_classes, mixup_alpha=self.mixup_alpha,
        cutmix_alpha=self.cutmix_alpha, prob=self.mix_prob,
        switch_prob=self.mix_switch_prob, label_smoothing=self.mix_label_smoothing)
    previous = tf.compat.v1.get_seed(None)[0]
    tf.random.set_seed(seed)
    try:
      return ds.map(lambda images, labels: mixer.distort(images, tf.cast(labels, tf.int32)))
    finally:
      tf.random.set_seed(previous)

  def steps_per_epoch(self, num_examples):
    """Global batches in one epoch of `num_examples` (echoed ones included)."""
    if self.echo_factor == 1:
      return num_examples // self.batch_size
    if self.echo_placement == "batch":
      return data_echoing.echoed_count(num_examples // self.batch_size, self.echo_factor)
    return data_echoing.echoed_count(num_examples, self.echo_factor) // self.batch_size

  def train_dataset(self, source, indices, epoch, seed):
    """Epoch `epoch` of the training examples `indices` (shuffled, augmented)."""
    n = len(indices)
    epoch_seed = np.array([seed, epoch], dtype=np.int64)
    shuffle_seed = int(seed * 1_000_003 + epoch)
    echoing = self.echo_factor != 1

    def echo_examples(ds):
      ds = data_echoing.echo(ds, self.echo_factor, seed=shuffle_seed)
      return ds.shuffle(self.echo_shuffle_buffer, seed=shuffle_seed,
                        reshuffle_each_iteration=False)

    ds = source.make_dataset("train", np.asarray(indices))
    ds = ds.shuffle(min(n, self.shuffle_buffer), seed=shuffle_seed,
                    reshuffle_each_iteration=False)
    if echoing and self.echo_placement == "before_augmentation":
      ds = echo_examples(ds)

    def prepare(position, example):
      image, label = example
      key = tf.random.experimental.stateless_fold_in(epoch_seed, position)
      return self._normalize(self._augment(image, key)), label

    ds = ds.enumerate().map(prepare, num_parallel_calls=tf.data.AUTOTUNE,
                            deterministic=self.deterministic)
    if echoing and self.echo_placement == "after_augmentation":
      ds = echo_examples(ds)
    ds = ds.batch(self.batch_size, drop_remainder=True)
    if self.mixes:
      ds = self._mix(ds, source.num_classes, shuffle_seed)
    if echoing and self.echo_placement == "batch":
      ds = data_echoing.echo(ds, self.echo_factor, seed=shuffle_seed)
    if echoing:  # a fractional factor varies the count: fix it at the expected one
      ds = ds.repeat().take(self.steps_per_epoch(n))
    return ds.prefetch(tf.data.AUTOTUNE).with_options(self._options())

  def eval_image(self, image):
    """Centre crop, resize to the eval resolution, normalise."""
    if self.eval_crop_fraction < 1.0:
      image = tf.image.central_crop(image, self.eval_crop_fraction)
    size = self.eval_image_size
    return self._normalize(tf.image.resize(image, [size, size], antialias=True))

  def eval_dataset(self, source):
    """The test split, padded with PAD_LABEL examples to whole global batches."""
    n = len(source.test_labels)
    pad = -n % self.batch_size
    size = self.eval_image_size
    ds = source.make_dataset("test", None).map(
        lambda image, label: (self.eval_image(image), label),
        num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    if pad:
      filler = tf.data.Dataset.from_tensors(
          (tf.zeros([size, size, 3], tf.float32), tf.constant(PAD_LABEL, tf.int32)))
      ds = ds.concatenate(filler.repeat(pad))
    ds = ds.batch(self.batch_size, drop_remainder=True)
    return ds.prefetch(tf.data.AUTOTUNE).with_options(self._options())
