"""Learning-rate schedule builders: the trainer calls them with the run's step counts."""

import gin
import tf_keras

from tricks import cyclical_lr
from tricks import warmup


def _number(name, value, knob):
  if isinstance(value, bool) or not isinstance(value, (int, float)):
    raise ValueError(f"{name}={value!r} must be a number; check {knob}")


def _at_least(name, value, minimum, knob):
  if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= minimum:
    raise ValueError(f"{name}={value!r} must be a number >= {minimum}; check {knob}")


@gin.configurable
def constant(total_steps, steps_per_epoch, learning_rate=gin.REQUIRED):
  del total_steps, steps_per_epoch
  _number("constant.learning_rate", learning_rate, "LEARNING_RATE")
  return learning_rate


@gin.configurable
def warmup_cosine(total_steps, steps_per_epoch, peak_lr=gin.REQUIRED, warmup_epochs=0,
                  final_fraction=0.0):
  """Linear warm-up from 0 over `warmup_epochs`, then cosine decay to the end."""
  _number("warmup_cosine.peak_lr", peak_lr, "LEARNING_RATE")
  _at_least("warmup_cosine.warmup_epochs", warmup_epochs, 0, "WARMUP_EPOCHS")
  if isinstance(final_fraction, bool) or not isinstance(final_fraction, (int, float)) or not (
      0 <= final_fraction <= 1):
    raise ValueError(f"warmup_cosine.final_fraction={final_fraction!r} must be in [0, 1]")
  warmup_steps = int(round(warmup_epochs * steps_per_epoch))
  decay_steps = max(1, total_steps - warmup_steps)
  if not warmup_steps:
    return tf_keras.optimizers.schedules.CosineDecay(peak_lr, decay_steps, alpha=final_fraction)
  return tf_keras.optimizers.schedules.CosineDecay(
      0.0, decay_steps, alpha=final_fraction, warmup_target=peak_lr,
      warmup_steps=warmup_steps)


@gin.configurable
def cyclical(total_steps, steps_per_epoch, base_lr=gin.REQUIRED, max_lr=gin.REQUIRED,
             step_size_epochs=2.0, mode="triangular", gamma=1.0, warmup_epochs=0):
  """Smith's cyclical rate; a half cycle lasts `step_size_epochs` epochs, optionally
  after `warmup_epochs` of linear warm-up."""
  del total_steps
  _number("cyclical.base_lr", base_lr, "BASE_LR")
  _number("cyclical.max_lr", max_lr, "MAX_LR")
  _at_least("cyclical.warmup_epochs", warmup_epochs, 0, "WARMUP_EPOCHS")
  if not step_size_epochs > 0:
    raise ValueError(f"cyclical.step_size_epochs={step_size_epochs!r} must be > 0")
  schedule = cyclical_lr.CyclicalLearningRate(
      base_lr, max_lr, step_size=max(1, int(round(step_size_epochs * steps_per_epoch))),
      mode=mode, gamma=gamma)
  warmup_steps = int(round(warmup_epochs * steps_per_epoch))
  return warmup.LinearWarmup(schedule, warmup_steps) if warmup_steps else schedule
