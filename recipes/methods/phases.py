"""Training phases as data: each `Phase` has its epochs, trainable layers and rate scale.

Fine-tuning's head-then-everything schedule (LP-FT, Kumar et al. 2022; gradual
unfreezing, Howard & Ruder 2018) is two phases, `[Phase(2, 'head'), Phase(None, 'all',
0.1)]`; decoupled long-tail training's classifier re-training (Kang et al. 2020) is
one more. Each phase runs the recipe's schedule over its own steps, scaled.
"""

import dataclasses
import numbers
import re
from typing import List

import tensorflow as tf
import tf_keras

from recipes.errors import ConfigError
from zoo import finetune


@dataclasses.dataclass(frozen=True)
class Span:
  """A phase placed in the run: epochs [start, end), steps [first_step, last_step)."""
  start: int
  end: int
  first_step: int
  last_step: int
  trainable: str
  lr_scale: float


def _check_trainable(trainable, index):
  if trainable in ("all", "head"):
    return
  try:
    re.compile(trainable)
  except (re.error, TypeError):
    raise ConfigError(f"Optimization.phases[{index}].trainable={trainable!r} is not 'all', "
                      "'head' or a regex over layer names") from None


def check(phases):
  """Each phase on its own (before anything is built): its trainable set, rate scale and
  length."""
  for i, phase in enumerate(phases):
    _check_trainable(phase.trainable, i)
    scale = phase.lr_scale
    if isinstance(scale, bool) or not isinstance(scale, numbers.Real) or not scale > 0:
      raise ConfigError(f"Optimization.phases[{i}].lr_scale={scale!r} must be a number > 0")
    if phase.epochs is not None and (isinstance(phase.epochs, bool) or not isinstance(
        phase.epochs, int) or phase.epochs < 0):
      raise ConfigError(f"Optimization.phases[{i}].epochs={phase.epochs!r} must be a whole "
                        "number >= 0 or None (e.g. HEAD_EPOCHS = 2)")


def place(phases, epochs, steps_per_epoch, total_steps) -> List[Span]:
  """The phases laid end to end over `epochs`; validates them. No phases: one span."""
  if not phases:
    return [Span(0, epochs, 0, total_steps, "all", 1.0)]
  check(phases)
  spans, start = [], 0
  for i, phase in enumerate(phases):
    if phase.epochs is None:
      if i != len(phases) - 1:
        raise ConfigError(f"Optimization.phases[{i}] has epochs=None (the rest of the run); "
                          "only the last phase may")
      if start >= epochs:
        raise ConfigError(f"Optimization.phases before the last take all {epochs} epochs, "
                          "leaving it none; raise Runtime.epochs or shorten them "
                          "(e.g. HEAD_EPOCHS < EPOCHS)")
      end = epochs
    else:
      end = start + phase.epochs
    if end > epochs or (i == len(phases) - 1 and end != epochs):
      raise ConfigError(f"Optimization.phases cover {end} epochs but the run has {epochs}; "
                        "make the last phase's epochs None (the rest) or match Runtime.epochs")
    if end > start:
      spans.append(Span(start, end, start * steps_per_epoch,
                        min(end * steps_per_epoch, total_steps), phase.trainable,
                        float(phase.lr_scale)))
    start = end
  if not spans:
    raise ConfigError("Optimization.phases are all empty (0 epochs); give one phase epochs")
  return spans


def span_at(spans, epoch):
  """The span that trains `epoch` (the last one from the run's end on)."""
  return next((s for s in spans if epoch < s.end), spans[-1])


def set_trainable(model, trainable, head=finetune.HEAD):
  """Marks the top-level layers of `model` trainable per `trainable` ('all', 'head', or
  a regex). Frozen BatchNorm layers normalise with their moving statistics."""
  if trainable == "head":
    trainable = f"^{re.escape(head)}$"
  pattern = None if trainable == "all" else re.compile(trainable)
  for layer in model.layers:
    layer.trainable = pattern is None or bool(pattern.search(layer.name))
  return model


class PhasedSchedule(tf_keras.optimizers.schedules.LearningRateSchedule):
  """Span i's schedule, evaluated at (step - its first step), times its scale."""

  def __init__(self, boundaries, schedules, scales):
    self.boundaries = [int(b) for b in boundaries]  # first step of spans 1 ..
    self.schedules = list(schedules)
    self.scales = [float(s) for s in scales]

  @staticmethod
  def _value(schedule, step):
    if isinstance(schedule, tf_keras.optimizers.schedules.LearningRateSchedule):
      return tf.cast(schedule(step), tf.float32)
    return tf.constant(schedule, tf.float32)

  def __call__(self, step):
    step = tf.cast(step, tf.int64)
    starts = [0] + self.boundaries
    rate = self.scales[0] * self._value(self.schedules[0], step)
    for start, schedule, scale in zip(starts[1:], self.schedules[1:], self.scales[1:]):
      rate = tf.where(step < start, rate,
                      scale * self._value(schedule, tf.maximum(step - start, 0)))
    return rate

  def get_config(self):
    return dict(boundaries=self.boundaries, schedules=self.schedules, scales=self.scales)


def schedule(spans, learning_rate, steps_per_epoch):
  """The run's learning rate: one span's schedule as built, or a PhasedSchedule."""
  built = [learning_rate(total_steps=s.last_step - s.first_step,
                         steps_per_epoch=steps_per_epoch) for s in spans]
  if len(spans) == 1 and spans[0].lr_scale == 1.0:
    return built[0]
  return PhasedSchedule([s.first_step for s in spans[1:]], built,
                        [s.lr_scale for s in spans])
