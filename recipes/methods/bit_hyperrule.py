"""BiT-HyperRule: fine-tuning settings from the data set (Kolesnikov et al. 2020, sec. 3.3).

For a task of N training images at resolution H x W, with SGD (momentum 0.9) at
batch 512 from rate 0.003:
- schedule: N < 20k: 500 steps; N < 500k: 10k steps; else 20k steps. Linear warm-up
  over the first support, then the rate falls 10x at each later support:
      N < 20k    [100, 200, 300, 400, 500]
      N < 500k   [500, 3000, 6000, 9000, 10000]
      otherwise  [500, 6000, 12000, 18000, 20000]
- resolution: H * W < 96 * 96: resize to 160, random crop 128; else 512 and 480.
  (Test images are resized to the crop size.)
- MixUp (alpha = 0.1) from N >= 20k on.
The supports and figures are those of google-research/big_transfer's bit_hyperrule.py.
`schedule_scale` shrinks the schedule for CPU-sized runs; the rate follows the batch
linearly (0.003 * batch / 512).
"""

import dataclasses
from typing import Any, Mapping

import gin
import tensorflow as tf
import tf_keras

SMALL, LARGE = 20_000, 500_000
SUPPORTS = {
    "small": (100, 200, 300, 400, 500),
    "medium": (500, 3000, 6000, 9000, 10_000),
    "large": (500, 6000, 12_000, 18_000, 20_000),
}


class BitSchedule(tf_keras.optimizers.schedules.LearningRateSchedule):
  """Linear warm-up to `peak` over `supports[0]` steps, then peak / 10^k after the
  k-th later support is passed (BiT's get_lr; constant after the last)."""

  def __init__(self, peak, supports):
    self.peak = float(peak)
    self.supports = tuple(int(s) for s in supports)

  def __call__(self, step):
    step = tf.cast(step, tf.float32)
    warmup = float(self.supports[0])
    decays = tf.add_n([tf.cast(step > s, tf.float32) for s in self.supports[1:]])
    rate = self.peak * tf.pow(0.1, decays)
    return tf.where(step < warmup, self.peak * step / warmup, rate)

  def get_config(self):
    return dict(peak=self.peak, supports=self.supports)


@dataclasses.dataclass(frozen=True)
class Plan:
  """Settings a rule derives from the data, applied before anything is built.

  `pipeline` holds InputPipeline fields, `steps` the run's length, `learning_rate`
  the schedule (in place of Optimization.learning_rate), `note` what was chosen."""
  steps: int
  learning_rate: Any
  pipeline: Mapping[str, Any]
  note: str


@gin.configurable
class BitHyperRule:
  """The rule, as the trainer asks it: `Optimization.hyperrule = @BitHyperRule()`."""

  def __init__(self, base_lr=0.003, base_batch_size=512, schedule_scale=1.0,
               mixup_alpha=0.1, small_area=96 * 96, small_resolution=(160, 128),
               large_resolution=(512, 480)):
    if not 0 < schedule_scale <= 1:
      raise ValueError(f"BitHyperRule.schedule_scale={schedule_scale} must be in (0, 1]")
    self.base_lr = base_lr
    self.base_batch_size = base_batch_size
    self.schedule_scale = schedule_scale
    self.mixup = mixup_alpha
    self.small_area = small_area
    self.small_resolution = tuple(small_resolution)
    self.large_resolution = tuple(large_resolution)

  @staticmethod
  def size_class(num_examples):
    if num_examples < SMALL:
      return "small"
    return "medium" if num_examples < LARGE else "large"

  def supports(self, num_examples):
    """The schedule's supports in steps, scaled by `schedule_scale` (each >= 1)."""
    scaled = [max(1, int(round(s * self.schedule_scale)))
              for s in SUPPORTS[self.size_class(num_examples)]]
    return tuple(max(s, i + 1) for i, s in enumerate(scaled))  # strictly increasing

  def steps(self, num_examples):
    return self.supports(num_examples)[-1]

  def learning_rate(self, num_examples, batch_size):
    return BitSchedule(self.base_lr * batch_size / self.base_batch_size,
                       self.supports(num_examples))

  def mixup_alpha(self, num_examples):
    return self.mixup if num_examples >= SMALL else 0.0

  def resolution(self, height, width):
    """(resize, crop) for images of `height` x `width`."""
    small = height * width < self.small_area
    return self.small_resolution if small else self.large_resolution

  def describe(self, num_examples, height, width, batch_size):
    resize, crop = self.resolution(height, width)
    return (f"BiT-HyperRule: {num_examples} examples ({self.size_class(num_examples)}) -> "
            f"{self.steps(num_examples)} steps, supports {list(self.supports(num_examples))}, "
            f"peak rate {self.base_lr * batch_size / self.base_batch_size:g} at batch "
            f"{batch_size}; {height}x{width} images -> resize {resize}, crop {crop}; "
            f"MixUp alpha {self.mixup_alpha(num_examples):g}")

  def plan(self, num_examples, height, width, batch_size, cutmix=False):
    """The `Plan` for a training set of `num_examples` images of `height` x `width` at
    `batch_size`; MixUp is left alone when the recipe uses CutMix."""
    resize, crop = self.resolution(height, width)
    pipeline = dict(train_resize=resize, image_size=crop, eval_image_size=crop)
    if not cutmix:
      pipeline["mixup_alpha"] = self.mixup_alpha(num_examples)
    return Plan(self.steps(num_examples), self.learning_rate(num_examples, batch_size),
                pipeline, self.describe(num_examples, height, width, batch_size))
