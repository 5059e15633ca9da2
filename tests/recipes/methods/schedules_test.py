"""Schedule builders get the run's step counts from the trainer."""

import math

import tensorflow as tf
import tf_keras

from recipes.methods import schedules


class SchedulesTest(tf.test.TestCase):

  def test_warmup_then_cosine(self):
    lr = schedules.warmup_cosine(total_steps=100, steps_per_epoch=10, peak_lr=1.0,
                                 warmup_epochs=2)
    self.assertAllClose([lr(0), lr(10), lr(20)], [0.0, 0.5, 1.0], atol=1e-6)
    # Half-way through the 80 decay steps the cosine is at half the peak.
    self.assertAllClose(lr(60), 0.5, atol=1e-6)
    self.assertAllClose(lr(100), 0.0, atol=1e-6)

  def test_cosine_without_warmup(self):
    lr = schedules.warmup_cosine(total_steps=10, steps_per_epoch=5, peak_lr=0.2)
    self.assertAllClose([lr(0), lr(5), lr(10)], [0.2, 0.1, 0.0], atol=1e-6)

  def test_cyclical_step_size_in_epochs(self):
    lr = schedules.cyclical(total_steps=100, steps_per_epoch=4, base_lr=0.1, max_lr=0.5,
                            step_size_epochs=2)
    self.assertEqual(lr.step_size, 8)
    self.assertAllClose([lr(0), lr(8), lr(16)], [0.1, 0.5, 0.1])

  def test_cyclical_after_warmup(self):
    lr = schedules.cyclical(total_steps=100, steps_per_epoch=4, base_lr=0.1, max_lr=0.5,
                            step_size_epochs=2, warmup_epochs=1)
    # Warm-up over 4 steps to clr(4) = 0.3, then the cycle: clr(8) = 0.5.
    self.assertAllClose([lr(0), lr(2), lr(4), lr(8)], [0.0, 0.15, 0.3, 0.5], rtol=1e-6)

  def test_constant(self):
    self.assertEqual(schedules.constant(1, 1, learning_rate=0.3), 0.3)

  def test_cao_step_decay_with_epoch_warmup(self):
    # kaidic/LDAM-DRW cifar_train.py adjust_learning_rate, with their 0-based epoch:
    # e = epoch + 1; e <= 5: 0.1 e / 5; e > 180: 0.1 * 1e-4; e > 160: 0.1 * 0.01; else 0.1.
    def theirs(epoch):
      e = epoch + 1
      return 0.1 * e / 5 if e <= 5 else 1e-5 if e > 180 else 1e-3 if e > 160 else 0.1
    spe = 97
    lr = schedules.step_decay(total_steps=200 * spe, steps_per_epoch=spe, base_lr=0.1,
                              warmup_epochs=5, warmup="epoch", boundaries=(160, 180),
                              multipliers=(0.01, 0.0001))
    for epoch in (0, 1, 4, 5, 159, 160, 179, 180, 199):
      for step in (epoch * spe, epoch * spe + spe - 1):
        self.assertAllClose(lr(step), theirs(epoch), rtol=1e-6, msg=f"epoch {epoch}")
    self.assertAllClose(lr(10**6), 1e-5, rtol=1e-6)

  def test_menon_step_decay_with_step_warmup(self):
    # google-research logit_adjustment utils.LearningRateSchedule, CIFAR-10-LT: t = step /
    # steps_per_epoch; linear 0 -> 0.1 over t < 20; x0.1 from 604, x0.01 from 926, x0.001
    # from 1128.
    spe = 96
    lr = schedules.step_decay(total_steps=1241 * spe, steps_per_epoch=spe, base_lr=0.1,
                              warmup_epochs=20, boundaries=(604, 926, 1128),
                              multipliers=(0.1, 0.01, 0.001))
    for t, want in ((0, 0.0), (5, 0.025), (19.5, 0.0975), (20, 0.1), (603.99, 0.1),
                    (604, 0.01), (925.99, 0.01), (926, 0.001), (1128, 0.0001)):
      self.assertAllClose(lr(int(round(t * spe))), want, rtol=1e-5, msg=f"t={t}")

  def test_ren_epoch_cosine_with_warmup(self):
    # BALMS utils.CosineAnnealingLRWarmup(T_max=591, warmup_epochs=37, base_lr=0.05,
    # warmup_lr=0.1), stepped before each epoch e = 1..591 (CIFAR-10-LT, 21 steps an epoch).
    def theirs(e):
      if e < 37:
        return (0.1 - 0.05) / 36 * (e - 1) + 0.05
      return 0.1 * (1 + math.cos(math.pi * (e - 37) / (591 - 37))) / 2
    spe = 21
    lr = schedules.epoch_cosine(total_steps=591 * spe, steps_per_epoch=spe, peak_lr=0.1,
                                warmup_epochs=37, warmup_start_lr=0.05)
    for e in (1, 2, 36, 37, 38, 300, 590, 591):
      for step in ((e - 1) * spe, e * spe - 1):
        self.assertAllClose(lr(step), theirs(e), atol=1e-7, msg=f"epoch {e}")
    self.assertEqual(float(lr(591 * spe - 1)), 0.0)

  def test_kang_epoch_cosine(self):
    # classifier-balancing: CosineAnnealingLR(T_max=90, eta_min=0) stepped before each
    # epoch: epoch e trains at 0.2 (1 + cos(pi e / 90)) / 2; epoch 1 at 0.19994, 90 at 0.
    lr = schedules.epoch_cosine(total_steps=90 * 226, steps_per_epoch=226, peak_lr=0.2)
    self.assertAllClose(lr(0), 0.1 * (1 + math.cos(math.pi / 90)), rtol=1e-6)
    self.assertAllClose(lr(0), 0.19994, atol=1e-5)
    self.assertAllClose(lr(44 * 226 + 5), 0.1, rtol=1e-6)  # epoch 45: cos(pi / 2) = 0
    self.assertEqual(float(lr(90 * 226 - 1)), 0.0)

  def test_piecewise_changes_at_the_boundary_and_serialises(self):
    lr = schedules.Piecewise([3, 5], [1.0, 0.5, 0.25])
    self.assertAllClose([lr(s) for s in range(7)], [1, 1, 1, 0.5, 0.5, 0.25, 0.25])
    again = tf_keras.optimizers.schedules.deserialize(
        tf_keras.optimizers.schedules.serialize(lr))
    self.assertAllClose(again(4), 0.5)

  def test_bad_schedules_say_what_to_fix(self):
    with self.assertRaisesRegex(ValueError, "one multiplier a boundary"):
      schedules.step_decay(10, 1, base_lr=0.1, boundaries=(3,), multipliers=())
    with self.assertRaisesRegex(ValueError, "must increase"):
      schedules.step_decay(10, 1, base_lr=0.1, boundaries=(5, 3), multipliers=(1, 1))
    with self.assertRaisesRegex(ValueError, "'step' or 'epoch'"):
      schedules.step_decay(10, 1, base_lr=0.1, warmup="epochs")
    with self.assertRaisesRegex(ValueError, "whole numbers"):
      schedules.step_decay(10, 1, base_lr=0.1, warmup="epoch", boundaries=(2.5,),
                           multipliers=(0.1,))
    with self.assertRaisesRegex(ValueError, "leaves no epoch"):
      schedules.epoch_cosine(10, 1, peak_lr=0.1, warmup_epochs=10, warmup_start_lr=0.0)
    with self.assertRaisesRegex(ValueError, "0 or a whole number >= 2"):
      schedules.epoch_cosine(10, 1, peak_lr=0.1, warmup_epochs=1, warmup_start_lr=0.0)
    with self.assertRaisesRegex(ValueError, "warmup_start_lr"):
      schedules.epoch_cosine(10, 1, peak_lr=0.1, warmup_epochs=3)


if __name__ == "__main__":
  tf.test.main()
