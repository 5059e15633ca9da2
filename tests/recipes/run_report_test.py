"""metrics.json and the per-class plot are written whole, or not at all."""

import json
import os
from unittest import mock

import tensorflow as tf

from recipes import evaluation
from recipes import run_report


class ReportTest(tf.test.TestCase):

  def test_json_and_png(self):
    metrics = evaluation.long_tail_metrics([0, 1, 2, 2], [0, 1, 2, 0], [90, 9, 1], 20, 5)
    tmp = self.get_temp_dir()
    run_report.write_json(os.path.join(tmp, "metrics.json"), metrics)
    with open(os.path.join(tmp, "metrics.json")) as f:
      self.assertEqual(json.load(f)["per_class_accuracy"], [1.0, 1.0, 0.5])
    png = os.path.join(tmp, "plot.png")
    run_report.plot_per_class_accuracy(png, metrics, title="t")
    with open(png, "rb") as f:
      self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")

  def test_legend_hides_nothing(self):
    # Below the axes, not over the points and the "medium | many" label (it was).
    metrics = evaluation.long_tail_metrics([0, 1, 2, 2], [0, 1, 2, 0], [90, 9, 1], 20, 5)
    with mock.patch.object(run_report.plt, "close") as close:
      run_report.plot_per_class_accuracy(os.path.join(self.get_temp_dir(), "p.png"), metrics)
    fig = close.call_args[0][0]
    ax, = fig.axes
    renderer = fig.canvas.get_renderer()
    legend = ax.get_legend().get_window_extent(renderer)
    inside = ax.get_window_extent(renderer)
    self.assertFalse(legend.overlaps(inside), msg=(legend, inside))
    labels = [t.get_window_extent(renderer) for t in ax.texts if "|" in t.get_text()]
    self.assertLen(labels, 2)
    for label in labels:
      self.assertFalse(legend.overlaps(label))
    self.assertTrue(fig.bbox.contains(legend.x0, legend.y0))  # not cut off the image
    self.assertTrue(fig.bbox.contains(legend.x1, legend.y1))
    run_report.plt.close(fig)

  def test_failed_write_leaves_nothing(self):
    tmp = self.get_temp_dir()
    path = os.path.join(tmp, "out.txt")

    def explode(f):
      f.write(b"partial")
      raise RuntimeError("disk full")

    with self.assertRaisesRegex(RuntimeError, "disk full"):
      run_report.atomic_write(path, explode)
    self.assertEqual(os.listdir(tmp), [])


if __name__ == "__main__":
  tf.test.main()
