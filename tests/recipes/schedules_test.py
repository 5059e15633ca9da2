"""Schedule builders get the run's step counts from the trainer."""

import tensorflow as tf

from recipes import schedules


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


if __name__ == "__main__":
  tf.test.main()
