"""benchmarks/timing.py: chunks of the project's trainer timed a step at a time, and
the closing line every timing table ends with (the one rule, benchmarks/stats.py)."""

import contextlib
import io
import json
import os

import tensorflow as tf
import tf_keras

from benchmarks import stats
from benchmarks import timing
from recipes import strategies


def tiny_model():
  inputs = tf_keras.Input([8, 8, 3])
  pooled = tf_keras.layers.GlobalAveragePooling2D()(inputs)
  outputs = tf_keras.layers.Dense(timing.NUM_CLASSES, name="logits")(pooled)
  return tf_keras.Model(inputs, outputs)


class TimingTest(tf.test.TestCase):

  def test_loops_cover_the_steps(self):
    self.assertEqual(timing.loops_for(10, 4), 3)
    self.assertEqual(timing.loops_for(8, 4), 2)
    self.assertEqual(timing.loops_for(1, 4), 1)

  def test_a_chunk_of_the_trainer_is_seconds_a_step(self):
    model_dir = os.path.join(self.get_temp_dir(), "run")
    trainer = timing.build_trainer(tiny_model, 8, 4, 2, model_dir,
                                   strategies.make_strategy("one_device"))
    iterator = iter(trainer.strategy.experimental_distribute_dataset(
        timing.materialised_batches(trainer, 2)))
    seconds = timing.trainer_chunk(trainer, iterator, loops=2, steps_per_loop=2)
    self.assertBetween(seconds, 1e-6, 10.0)

  def test_the_report_states_the_rule_and_writes_json(self):
    output = os.path.join(self.get_temp_dir(), "figures.json")
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
      timing.end_report({"a": 1}, output)
    self.assertIn(stats.TIMING_RULE, printed.getvalue())
    with open(output) as f:
      written = json.load(f)
    self.assertEqual(written["a"], 1)
    self.assertCountEqual(written, ["a", "command", "date", "machine", "revision"])
    self.assertIn("logical cores", written["machine"])


if __name__ == "__main__":
  tf.test.main()
