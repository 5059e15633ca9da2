"""--strategy names map to tf.distribute strategies; bad ones fail clearly."""

import tensorflow as tf

from recipes import strategies
from recipes.errors import ConfigError


class StrategiesTest(tf.test.TestCase):

  def test_cpu_choices(self):
    self.assertIsInstance(strategies.make_strategy("auto"), tf.distribute.OneDeviceStrategy)
    self.assertIsInstance(strategies.make_strategy("one_device"),
                          tf.distribute.OneDeviceStrategy)
    self.assertIsInstance(strategies.make_strategy("mirrored"),
                          tf.distribute.MirroredStrategy)

  def test_errors(self):
    with self.assertRaisesRegex(ConfigError, "needs --tpu"):
      strategies.make_strategy("tpu")
    with self.assertRaisesRegex(ConfigError, "unknown --strategy='gpu'"):
      strategies.make_strategy("gpu")


if __name__ == "__main__":
  tf.test.main()
