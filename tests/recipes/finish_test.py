"""recipes/finish.py: the operative config ends with what build derived (parsed
again, later lines win, so the file reproduces the run)."""

import types

import gin
import tensorflow as tf

from recipes import finish


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


if __name__ == "__main__":
  tf.test.main()
