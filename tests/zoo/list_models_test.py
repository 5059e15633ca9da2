"""//zoo:list prints a row per model with its parameter count and resolution."""

import contextlib
import io

from absl import flags
from absl.testing import flagsaver
import tensorflow as tf

from zoo import list_models


class ListModelsTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    if not flags.FLAGS.is_parsed():
      flags.FLAGS.mark_as_parsed()

  def test_rows_with_published_counts(self):
    out = io.StringIO()
    with flagsaver.flagsaver(names=["resnet20_cifar", "inception_v3"]):
      with contextlib.redirect_stdout(out):
        list_models.main(["list"])
    lines = out.getvalue().splitlines()
    self.assertLen(lines, 3)  # header and two rows
    self.assertRegex(lines[1], r"^resnet20_cifar\s+335,448\s+32px")  # at 1000 classes
    self.assertRegex(lines[2], r"^inception_v3\s+23,851,784\s+299px")  # Keras: 23.9M

  def test_long_names_keep_their_columns(self):
    out = io.StringIO()
    with flagsaver.flagsaver(names=["efficientnet_lite0"]):
      with contextlib.redirect_stdout(out):
        list_models.main(["list"])
    header, row = out.getvalue().splitlines()
    # All weights (BatchNorm statistics too); timm's trainable count is 4,652,008.
    self.assertRegex(row, r"^efficientnet_lite0\s+4,694,024\s+224px  Tan & Le 2019")
    self.assertEqual(header.index("parameters") + len("parameters"),
                     row.index("4,694,024") + len("4,694,024"))

  def test_unknown_name(self):
    with flagsaver.flagsaver(names=["resnet51"]):
      with self.assertRaisesRegex(Exception, "unknown zoo models \\['resnet51'\\]"):
        list_models.main(["list"])


if __name__ == "__main__":
  tf.test.main()
