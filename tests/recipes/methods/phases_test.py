"""Phases as data: placement in the run, validation, trainable sets and the schedule."""

import numpy as np
import tensorflow as tf
import tf_keras

from recipes.errors import ConfigError
from recipes.experiment import Phase
from recipes.methods import phases
from recipes.methods import schedules


def tiny_model():
  inputs = tf_keras.Input((4,), name="images")
  x = tf_keras.layers.Dense(3, name="stage1_dense")(inputs)
  x = tf_keras.layers.Dense(3, name="stage2_dense")(x)
  return tf_keras.Model(inputs, tf_keras.layers.Dense(2, name="logits")(x))


class PhasesTest(tf.test.TestCase):

  def test_no_phases_is_one_span_of_the_whole_run(self):
    self.assertEqual(phases.place((), 5, 10, 47),
                     [phases.Span(0, 5, 0, 47, "all", 1.0)])

  def test_head_then_rest(self):
    spans = phases.place([Phase(2, "head"), Phase(None, "all", 0.1)], 5, 10, 50)
    self.assertEqual(spans, [phases.Span(0, 2, 0, 20, "head", 1.0),
                             phases.Span(2, 5, 20, 50, "all", 0.1)])
    self.assertEqual(phases.span_at(spans, 1).trainable, "head")
    self.assertEqual(phases.span_at(spans, 2).trainable, "all")
    self.assertEqual(phases.span_at(spans, 5).trainable, "all")  # after the end

  def test_an_empty_phase_is_skipped(self):
    spans = phases.place([Phase(0, "head"), Phase(None, "all", 0.1)], 3, 4, 12)
    self.assertEqual(spans, [phases.Span(0, 3, 0, 12, "all", 0.1)])

  def test_bad_phases(self):
    cases = [
        ([Phase(None), Phase(1)], "only the last phase"),
        ([Phase(2), Phase(2)], "cover 4 epochs but the run has 3"),
        ([Phase(1), Phase(1)], "cover 2 epochs but the run has 3"),
        ([Phase(-1), Phase(None)], "whole number >= 0"),
        ([Phase(None, "(")], "not 'all', 'head' or a regex"),
        ([Phase(None, "all", 0.0)], "lr_scale=0.0 must be a number > 0"),
        ([Phase(None, "all", "fast")], "lr_scale='fast' must be a number > 0"),
        ([Phase(0)], "cover 0 epochs"),
        ([Phase(3, "head"), Phase(None, "all", 0.1)], "leaving it none"),
    ]
    for given, message in cases:
      with self.assertRaisesRegex(ConfigError, message, msg=str(given)):
        phases.place(given, 3, 4, 12)

  def test_set_trainable(self):
    model = tiny_model()
    phases.set_trainable(model, "head")
    self.assertEqual([v.name for v in model.trainable_variables],
                     ["logits/kernel:0", "logits/bias:0"])
    phases.set_trainable(model, "stage2|logits")
    self.assertEqual(len(model.trainable_variables), 4)
    phases.set_trainable(model, "all")
    self.assertEqual(len(model.trainable_variables), 6)
    phases.set_trainable(model, "stage1")  # freezes the head ...
    phases.set_trainable(model, "head")  # ... which a head phase then trains
    self.assertEqual([v.name for v in model.trainable_variables],
                     ["logits/kernel:0", "logits/bias:0"])

  def test_each_span_runs_its_own_schedule_scaled(self):
    spans = phases.place([Phase(2, "head"), Phase(None, "all", 0.1)], 6, 5, 30)
    lr = phases.schedule(spans, lambda total_steps, steps_per_epoch: schedules.warmup_cosine(
        total_steps, steps_per_epoch, peak_lr=0.2), 5)
    # Span 1: a 10-step cosine from 0.2; span 2: a 20-step cosine from 0.02.
    self.assertAllClose([lr(0), lr(5), lr(9), lr(10), lr(20), lr(30)],
                        [0.2, 0.1, 0.2 * 0.5 * (1 + np.cos(0.9 * np.pi)), 0.02, 0.01, 0.0],
                        atol=1e-6)

  def test_three_spans_with_constant_rates(self):
    spans = phases.place([Phase(1, "head"), Phase(1, "stage2"), Phase(None)], 3, 4, 12)
    lr = phases.schedule(spans, lambda total_steps, steps_per_epoch: 0.5, 4)
    self.assertAllClose([lr(0), lr(3), lr(4), lr(8), lr(11)], [0.5] * 5)
    spans = phases.place([Phase(1, "head", 2.0), Phase(None, "all", 0.2)], 3, 4, 12)
    lr = phases.schedule(spans, lambda total_steps, steps_per_epoch: 0.5, 4)
    self.assertAllClose([lr(3), lr(4)], [1.0, 0.1])

  def test_one_unscaled_span_keeps_the_schedule_as_built(self):
    built = schedules.warmup_cosine(12, 4, peak_lr=0.1)
    lr = phases.schedule(phases.place((), 3, 4, 12), lambda **kw: built, 4)
    self.assertIs(lr, built)


if __name__ == "__main__":
  tf.test.main()
