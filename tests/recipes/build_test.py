"""recipes/build.py: the validation hold-out is drawn before the long-tail draw (so it
stays balanced and disjoint from training), a run measured in steps gets
ceil(steps / steps_per_epoch) epochs, and a run without a hyperrule keeps its own
settings."""

import numpy as np
import tensorflow as tf

from recipes import build
from recipes import experiment
from recipes.data import long_tail
from recipes.data import pipeline
from recipes.data import source as source_lib


def balanced_source(per_class=30, classes=3):
  labels = np.repeat(np.arange(classes), per_class).astype(np.int32)
  return source_lib.Source(name="toy", class_names=[str(c) for c in range(classes)],
                           train_labels=labels, test_labels=labels[:classes],
                           make_dataset=None)


class BuildTest(tf.test.TestCase):

  def test_holdout_before_the_long_tail_draw(self):
    source = balanced_source()
    task = experiment.Task(data=lambda: source, model=None, validation_per_class=5,
                           long_tail=long_tail.LongTail(rho=5.0, seed=0))
    data = build.load_data(task, seed=1)
    self.assertAllEqual(np.bincount(source.train_labels[data.validation]), [5, 5, 5])
    self.assertEmpty(np.intersect1d(data.validation, data.train))
    # The pool after the hold-out: 25 a class; rho = 5 over 3 classes: 25, 11, 5.
    self.assertAllEqual(data.counts, [25, 11, 5])
    self.assertAllEqual(np.bincount(source.train_labels[data.train]), data.counts)
    self.assertEqual(data.validation_split, "train")

  def test_run_length_in_steps(self):
    feed = pipeline.InputPipeline(batch_size=4)
    data = build.Data(None, np.arange(30), np.zeros([0], np.int64), np.array([30]))
    length = build.run_length(experiment.Optimization(), experiment.Runtime(epochs=9),
                              data, feed, steps=17, model=None)
    # 30 // 4 = 7 steps an epoch; 17 steps -> 3 epochs, the last one short.
    self.assertEqual((length.steps_per_epoch, length.epochs, length.total_steps),
                     (7, 3, 17))
    length = build.run_length(experiment.Optimization(), experiment.Runtime(epochs=9),
                              data, feed, steps=None, model=None)
    self.assertEqual((length.epochs, length.total_steps), (9, 63))

  def test_no_hyperrule_keeps_the_runs_settings(self):
    rate = lambda total_steps, steps_per_epoch: 0.1
    plan = build.plan_run(experiment.Optimization(learning_rate=rate),
                          experiment.Runtime(steps=40), None, None)
    self.assertEqual((plan.pipeline, plan.steps, plan.notes, plan.derived),
                     ({}, 40, [], {}))
    self.assertIs(plan.learning_rate, rate)


if __name__ == "__main__":
  tf.test.main()
