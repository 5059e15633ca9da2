"""Linear warm-up in front of any learning-rate schedule (Goyal et al. 2017,
arXiv:1706.02677, section 2.2), serialisable with the schedule it wraps:

    lr(t) = schedule(W) * t / W   for t < W,      lr(t) = schedule(t)   after,

so the rate climbs from 0 to where the wrapped schedule stands at the end of warm-up
and continues from there. (Model Garden's LinearWarmup cannot be restored from its
config: it drops the wrapped schedule's class.)
"""

import tensorflow as tf
import tf_keras


@tf_keras.utils.register_keras_serializable(package="tricks")
class LinearWarmup(tf_keras.optimizers.schedules.LearningRateSchedule):
  """`schedule` preceded by `warmup_steps` of linear warm-up from 0."""

  def __init__(self, schedule, warmup_steps, name=None):
    if isinstance(schedule, dict):
      schedule = tf_keras.optimizers.schedules.deserialize(schedule)
    if warmup_steps < 0:
      raise ValueError(f"warmup_steps must be >= 0, got {warmup_steps}")
    self.schedule = schedule
    self.warmup_steps = warmup_steps
    self.name = name

  def __call__(self, step):
    after = tf.cast(self.schedule(step), tf.float32)
    if not self.warmup_steps:
      return after
    t = tf.cast(step, tf.float32)
    target = tf.cast(self.schedule(self.warmup_steps), tf.float32)
    return tf.where(t < self.warmup_steps, target * t / self.warmup_steps, after)

  def get_config(self):
    return dict(schedule=tf_keras.optimizers.schedules.serialize(self.schedule),
                warmup_steps=self.warmup_steps, name=self.name)
