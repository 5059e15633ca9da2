"""Learning-rate schedule builders: the trainer calls them with the run's step counts."""

import math

import gin
import numpy as np
import tensorflow as tf
import tf_keras

from recipes.errors import ConfigError
from tricks import cyclical_lr
from tricks import warmup as warmup_lib


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
  return warmup_lib.LinearWarmup(schedule, warmup_steps) if warmup_steps else schedule


@tf_keras.utils.register_keras_serializable(package="recipes")
class Piecewise(tf_keras.optimizers.schedules.LearningRateSchedule):
  """values[k] from step boundaries[k - 1] on (values[0] before boundaries[0]).

  Unlike tf_keras's PiecewiseConstantDecay (which changes one step after a boundary and
  builds a branch a piece), the value changes at the boundary itself and any number of
  pieces costs one comparison: a rate set once an epoch, as PyTorch's schedulers are,
  is one piece an epoch.
  """

  def __init__(self, boundaries, values, name=None):
    if len(values) != len(boundaries) + 1:
      raise ValueError(f"Piecewise needs one value more than boundaries; got "
                       f"{len(boundaries)} boundaries and {len(values)} values")
    if list(boundaries) != sorted(boundaries):
      raise ValueError(f"Piecewise boundaries must increase; got {list(boundaries)}")
    self.boundaries = [int(b) for b in boundaries]
    self.values = [float(v) for v in values]
    self.name = name

  def __call__(self, step):
    step = tf.cast(step, tf.int64)
    passed = tf.reduce_sum(tf.cast(step >= tf.constant(self.boundaries, tf.int64, [
        len(self.boundaries)]), tf.int32))
    return tf.gather(tf.constant(self.values, tf.float32), passed)

  def get_config(self):
    return dict(boundaries=self.boundaries, values=self.values, name=self.name)


def _per_epoch(values, steps_per_epoch):
  """values[e] for every step of 0-based epoch e (the last value after the list)."""
  return Piecewise([e * steps_per_epoch for e in range(1, len(values))], values)


def _epochs(total_steps, steps_per_epoch):
  return max(1, -(-total_steps // steps_per_epoch))


@gin.configurable
def step_decay(total_steps, steps_per_epoch, base_lr=gin.REQUIRED, boundaries=(),
               multipliers=(), warmup_epochs=0, warmup="step"):
  """`base_lr` times `multipliers[k]` from epoch `boundaries[k]` on (He et al. 2016's
  step schedule; epochs may be fractional), after a linear warm-up (Goyal et al. 2017).

  `warmup='step'`: from 0, rising every step over `warmup_epochs` (Menon et al.'s and
  Cui et al.'s code). `warmup='epoch'`: 1-based epoch e <= W trains at base_lr * e / W,
  constant within the epoch (Cao et al.'s `adjust_learning_rate`: 0.02, 0.04, ... 0.1);
  the boundaries then count whole epochs. The multipliers are each relative to
  `base_lr`, not to the previous piece.
  """
  _number("step_decay.base_lr", base_lr, "LEARNING_RATE")
  _at_least("step_decay.warmup_epochs", warmup_epochs, 0, "step_decay.warmup_epochs")
  boundaries, multipliers = list(boundaries), list(multipliers)
  if len(boundaries) != len(multipliers):
    raise ValueError(f"step_decay has {len(boundaries)} boundaries and {len(multipliers)} "
                     "multipliers; give one multiplier a boundary")
  for b in boundaries:
    _at_least("step_decay.boundaries", b, warmup_epochs, "step_decay.boundaries (epochs "
              "after the warm-up)")
  for m in multipliers:
    _number("step_decay.multipliers", m, "step_decay.multipliers")
  if boundaries != sorted(boundaries):
    raise ValueError(f"step_decay.boundaries={boundaries} must increase")
  if warmup == "epoch":
    if any(b != int(b) for b in boundaries) or warmup_epochs != int(warmup_epochs):
      raise ValueError("step_decay with warmup='epoch' counts whole epochs: make "
                       "boundaries and warmup_epochs whole numbers")
    values = []
    for epoch in range(_epochs(total_steps, steps_per_epoch)):
      scale = ([1.0] + [m for b, m in zip(boundaries, multipliers) if epoch >= b])[-1]
      if epoch < warmup_epochs:
        scale = (epoch + 1) / warmup_epochs
      values.append(base_lr * scale)
    return _per_epoch(values, steps_per_epoch)
  if warmup != "step":
    raise ValueError(f"step_decay.warmup={warmup!r} must be 'step' or 'epoch'")
  schedule = Piecewise([int(round(b * steps_per_epoch)) for b in boundaries],
                       [base_lr] + [base_lr * m for m in multipliers])
  warmup_steps = int(round(warmup_epochs * steps_per_epoch))
  return warmup_lib.LinearWarmup(schedule, warmup_steps) if warmup_steps else schedule


@gin.configurable
def epoch_cosine(total_steps, steps_per_epoch, peak_lr=gin.REQUIRED, warmup_epochs=0,
                 warmup_start_lr=None, final_lr=0.0):
  """Cosine annealing (Loshchilov & Hutter 2017, eq. 5) set once at the start of each
  epoch, as PyTorch's CosineAnnealingLR with `scheduler.step()` before the epoch:

      1-based epoch e >= W trains at final + (peak - final) (1 + cos(pi (e - W) / (E - W))) / 2

  so without warm-up (W = 0; Kang et al. 2020) epoch 1 is already below the peak and
  the last epoch E trains at `final_lr`. With `warmup_epochs` W >= 2 (Ren et al. 2020's
  CosineAnnealingLRWarmup), epochs e < W rise linearly from `warmup_start_lr` at e = 1
  to the peak at e = W: start + (peak - start) (e - 1) / (W - 1).
  """
  _number("epoch_cosine.peak_lr", peak_lr, "LEARNING_RATE")
  _number("epoch_cosine.final_lr", final_lr, "epoch_cosine.final_lr")
  _at_least("epoch_cosine.warmup_epochs", warmup_epochs, 0, "epoch_cosine.warmup_epochs")
  if warmup_epochs != int(warmup_epochs) or warmup_epochs == 1:
    raise ValueError(f"epoch_cosine.warmup_epochs={warmup_epochs!r} must be 0 or a whole "
                     "number >= 2 (the warm-up's first and last epochs differ)")
  if warmup_epochs:
    _number("epoch_cosine.warmup_start_lr", warmup_start_lr, "epoch_cosine.warmup_start_lr")
  epochs = _epochs(total_steps, steps_per_epoch)
  if warmup_epochs >= epochs:
    raise ValueError(f"epoch_cosine.warmup_epochs={warmup_epochs} leaves no epoch of the "
                     f"{epochs} for the cosine; lower it or train longer")
  values = []
  for e in range(1, epochs + 1):
    if e < warmup_epochs:
      values.append(warmup_start_lr + (peak_lr - warmup_start_lr) * (e - 1) /
                    (warmup_epochs - 1))
    else:
      progress = (e - warmup_epochs) / (epochs - warmup_epochs)
      values.append(final_lr + (peak_lr - final_lr) * (1 + math.cos(math.pi * progress)) / 2)
  return _per_epoch(values, steps_per_epoch)


def check_learning_rates(schedule, total_steps, samples=257):
  """Checks a learning-rate schedule (a number or a schedule of the step) at `samples`
  steps spread over the run: finite everywhere, never negative, positive somewhere."""
  steps = np.unique(np.linspace(0, max(total_steps - 1, 0), samples).round().astype(np.int64))
  values = []
  for step in steps:
    try:
      value = schedule(step) if callable(schedule) else schedule
      values.append(float(value))
    except (TypeError, ValueError, tf.errors.OpError):
      value = schedule
      raise ConfigError(f"the learning rate is {value!r}, not a number; check "
                        "LEARNING_RATE / Optimization.learning_rate") from None
  values = np.asarray(values)
  for step, value in zip(steps, values):
    if not math.isfinite(value):
      raise ConfigError(f"the learning rate is {value:g} at step {step}; it must be a finite "
                        "number > 0: check LEARNING_RATE / Optimization.learning_rate")
    if value < 0:
      raise ConfigError(f"the learning rate is {value:g} at step {step}; it must be > 0 (a "
                        "negative rate climbs the loss): check LEARNING_RATE")
  if not values.max() > 0:
    raise ConfigError(f"the learning rate is {values.max():g} at every step; it must be > 0 "
                      "somewhere: check LEARNING_RATE / Optimization.learning_rate")
