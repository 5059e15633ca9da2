"""recipes/finish.py: the operative config ends with what build derived (parsed
again, later lines win, so the file reproduces the run), and the export is moved into
place whole."""

import os
import types

import gin
import tensorflow as tf

from recipes import finish
from tests.recipes import summaries


@gin.configurable
def _knob(value=1):
  return value


class FinishTest(tf.test.TestCase):

  def test_operative_config_reproduces_the_derived_values(self):
    gin.clear_config()
    gin.parse_config("_knob.value = 2")
    _knob()
    built = types.SimpleNamespace(derived={"_knob.value": 3})
    text = finish.operative_config(built)
    self.assertIn("_knob.value = 2", text)
    self.assertTrue(text.rstrip().endswith("_knob.value = 3"))
    gin.clear_config()
    gin.parse_config(text)
    self.assertEqual(_knob(), 3)  # the derived value wins
    gin.clear_config()

  def test_eval_summaries_write_the_headline_metrics(self):
    logdir = self.get_temp_dir()
    writer = tf.summary.create_file_writer(logdir)
    finish.write_eval_summaries(writer, {"top1": 0.5, "balanced_accuracy": 0.25,
                                         "few_shot_accuracy": None}, step=3)
    writer.flush()
    self.assertEqual(summaries.scalars(logdir, "top1"), {3: 0.5})
    self.assertEqual(summaries.scalars(logdir, "balanced_accuracy"), {3: 0.25})
    # No few-shot classes: nothing written.
    self.assertEqual(summaries.scalars(logdir, "few_shot_accuracy"), {})


if __name__ == "__main__":
  tf.test.main()
