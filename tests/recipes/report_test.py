"""metrics.json and the per-class plot are written whole, or not at all."""

import json
import os

import tensorflow as tf

from recipes import evaluation
from recipes import report


class ReportTest(tf.test.TestCase):

  def test_json_and_png(self):
    metrics = evaluation.long_tail_metrics([0, 1, 2, 2], [0, 1, 2, 0], [90, 9, 1], 20, 5)
    tmp = self.get_temp_dir()
    report.write_json(os.path.join(tmp, "metrics.json"), metrics)
    with open(os.path.join(tmp, "metrics.json")) as f:
      self.assertEqual(json.load(f)["per_class_accuracy"], [1.0, 1.0, 0.5])
    png = os.path.join(tmp, "plot.png")
    report.plot_per_class_accuracy(png, metrics, title="t")
    with open(png, "rb") as f:
      self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")

  def test_failed_write_leaves_nothing(self):
    tmp = self.get_temp_dir()
    path = os.path.join(tmp, "out.txt")

    def explode(f):
      f.write(b"partial")
      raise RuntimeError("disk full")

    with self.assertRaisesRegex(RuntimeError, "disk full"):
      report.atomic_write(path, explode)
    self.assertEqual(os.listdir(tmp), [])


if __name__ == "__main__":
  tf.test.main()
