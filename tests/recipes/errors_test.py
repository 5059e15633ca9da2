"""ConfigError keeps its type and first line through Gin's re-raise (train.py relies on it)."""

import gin
import tensorflow as tf

from recipes.errors import ConfigError


@gin.configurable
def refuses(value=1):
  raise ConfigError(f"value {value} is bad; pass another")


class ErrorsTest(tf.test.TestCase):

  def test_survives_gin_wrapping(self):
    with self.assertRaises(ConfigError) as caught:
      refuses()
    self.assertIsInstance(caught.exception, ValueError)
    lines = str(caught.exception).splitlines()
    self.assertEqual(lines[0], "value 1 is bad; pass another")
    self.assertIn("In call to configurable 'refuses'", str(caught.exception))


if __name__ == "__main__":
  tf.test.main()
