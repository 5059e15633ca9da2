"""recipes/build.py: the validation hold-out is drawn before the long-tail draw (so it
stays balanced and disjoint from training), a k-shot draw takes exactly k examples a
class by its own seed, a run measured in steps gets
ceil(steps / steps_per_epoch) epochs, and a run without a hyperrule keeps its own
settings."""

import numpy as np
import tensorflow as tf
import tf_keras

from recipes import build
from recipes import experiment
from recipes.data import long_tail
from recipes.data import pipeline
from recipes.data import source as source_lib
from recipes.errors import ConfigError


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

  def test_k_shot_draw(self):
    labels = np.repeat(np.arange(4), [30, 12, 20, 9]).astype(np.int32)
    np.random.default_rng(7).shuffle(labels)
    source = source_lib.Source(name="toy", class_names=list("abcd"), train_labels=labels,
                               test_labels=labels[:4], make_dataset=None)

    def draw(k=3, draw_seed=5, run_seed=1, validation=4):
      task = experiment.Task(data=lambda: source, model=None, examples_per_class=k,
                             examples_per_class_seed=draw_seed,
                             validation_per_class=validation)
      return build.load_data(task, seed=run_seed)

    data = draw()
    # Exactly k of every class, no example twice, none of them held out for validation.
    self.assertAllEqual(np.bincount(labels[data.train], minlength=4), [3, 3, 3, 3])
    self.assertAllEqual(data.counts, [3, 3, 3, 3])
    self.assertLen(np.unique(data.train), 12)
    self.assertAllEqual(np.bincount(labels[data.validation], minlength=4), [4, 4, 4, 4])
    self.assertEmpty(np.intersect1d(data.train, data.validation))
    # A function of examples_per_class_seed alone: the run's seed changes nothing.
    again = draw(run_seed=2)
    self.assertAllEqual(again.train, data.train)
    self.assertAllEqual(again.validation, data.validation)
    other = draw(draw_seed=6)
    self.assertNotAllEqual(other.train, data.train)
    self.assertAllEqual(np.bincount(labels[other.train], minlength=4), [3, 3, 3, 3])
    # Without a hold-out the k come from the whole training split; each seed its own.
    whole = [draw(validation=0, draw_seed=s).train for s in range(5)]
    self.assertLen({w.tobytes() for w in whole}, 5)
    # The draw is LongTail(rho=1, n_max=k)'s, example for example (the few-shot digits
    # recipes drew with it before), computed here with rng calls written out.
    rng = np.random.default_rng(5)
    want = np.sort(np.concatenate([rng.choice(np.flatnonzero(labels == c), 3, replace=False)
                                   for c in range(4)]))
    self.assertAllEqual(draw(validation=0).train, want)
    self.assertAllEqual(draw(validation=0).train,
                        long_tail.LongTail(rho=1, n_max=3, seed=5).select(labels, 4))
    # Class 3 has 9 examples, 5 after the hold-out of 4.
    with self.assertRaisesRegex(ConfigError, r"^Task.examples_per_class=6: class 3 has only "
                                r"5 training examples \(after any validation hold-out; 1 "
                                r"classes have fewer than 6\); lower Task.examples_per_class$"):
      draw(k=6)
    for bad in (0, -1):
      with self.assertRaisesRegex(ConfigError, f"examples_per_class={bad} must be a whole "
                                  "number >= 1 or None"):
        source_lib.per_class_draw(labels, bad, 0, 4)

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

  def test_optimizer_settings(self):
    build.optimizer_settings(tf_keras.optimizers.SGD(0.1, weight_decay=1e-4))
    for wrong, pattern in (
        (tf_keras.optimizers.legacy.SGD(0.1), "built a SGD, not a tf_keras optimizer; bind "
                                              "a tf_keras.optimizers.Optimizer"),
        (object(), "built a object, not a tf_keras optimizer"),
        (tf_keras.optimizers.SGD(0.1, weight_decay=-1.0), "weight_decay=-1.0 must be a "
                                                          "number >= 0"),
        (tf_keras.optimizers.SGD(0.1, use_ema=True, ema_momentum=1.0),
         r"ema_momentum=1.0 must be in \[0, 1\)")):
      with self.assertRaisesRegex(ConfigError, "^Optimization.optimizer " + pattern):
        build.optimizer_settings(wrong)

  def test_no_hyperrule_keeps_the_runs_settings(self):
    rate = lambda total_steps, steps_per_epoch: 0.1
    plan = build.plan_run(experiment.Optimization(learning_rate=rate),
                          experiment.Runtime(steps=40), None, None)
    self.assertEqual((plan.pipeline, plan.steps, plan.rule_note, plan.derived),
                     ({}, 40, None, {}))
    self.assertIs(plan.learning_rate, rate)


if __name__ == "__main__":
  tf.test.main()
