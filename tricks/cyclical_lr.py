"""Cyclical learning rates (Smith 2017, arXiv:1506.01186, section 3.1).

    cycle = floor(1 + t / (2 * step_size))
    x     = |t / step_size - 2 * cycle + 1|
    lr(t) = base_lr + (max_lr - base_lr) * max(0, 1 - x) * scale(cycle, t)

scale = 1 (triangular), 1 / 2^(cycle - 1) (triangular2), gamma^t (exp_range).
"""

import tensorflow as tf
import tf_keras

MODES = ("triangular", "triangular2", "exp_range")


@tf_keras.utils.register_keras_serializable(package="tricks")
class CyclicalLearningRate(tf_keras.optimizers.schedules.LearningRateSchedule):
  """Smith's cyclical learning rate as a serialisable tf_keras schedule."""

  def __init__(self, base_lr, max_lr, step_size, mode="triangular", gamma=1.0,
               name=None):
    if mode not in MODES:
      raise ValueError(f"unknown cyclical LR mode {mode!r}; choose one of {MODES}")
    if step_size <= 0:
      raise ValueError(f"cyclical LR step_size must be > 0, got {step_size}")
    self.base_lr = base_lr
    self.max_lr = max_lr
    self.step_size = step_size
    self.mode = mode
    self.gamma = gamma
    self.name = name

  def __call__(self, step):
    t = tf.cast(step, tf.float32)
    step_size = tf.cast(self.step_size, tf.float32)
    cycle = tf.floor(1.0 + t / (2.0 * step_size))
    x = tf.abs(t / step_size - 2.0 * cycle + 1.0)
    if self.mode == "triangular":
      scale = 1.0
    elif self.mode == "triangular2":
      scale = 1.0 / tf.pow(2.0, cycle - 1.0)
    else:
      scale = tf.pow(tf.cast(self.gamma, tf.float32), t)
    return self.base_lr + (self.max_lr - self.base_lr) * tf.maximum(0.0, 1.0 - x) * scale

  def get_config(self):
    return dict(base_lr=self.base_lr, max_lr=self.max_lr, step_size=self.step_size,
                mode=self.mode, gamma=self.gamma, name=self.name)
