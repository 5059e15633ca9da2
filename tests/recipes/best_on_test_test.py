"""recipes/best_on_test.py: the paper's protocol keeps the epoch of the best test
top-1 (the first of equals, as their `acc1 > best_acc1`), labelled as a selection on
the test split; nothing is kept or reported when the recipe does not ask for it."""

import tensorflow as tf

from recipes import best_on_test
from recipes import checkpoints


PROGRESS = checkpoints.Progress(tf.distribute.get_strategy())

class BestOnTestTest(tf.test.TestCase):

  def test_keeps_the_first_best_top1(self):
    selection = best_on_test.BestOnTest(strategy=tf.distribute.get_strategy(),
                                             paper="Cao et al. 2019's")
    for epoch, top1, balanced in ((1, 0.5, 0.4), (2, 0.7, 0.6), (3, 0.7, 0.65),
                                  (4, 0.6, 0.7)):
      selection.offer(epoch, {"top1": top1, "balanced_accuracy": balanced})
    summary = selection.summary()
    self.assertEqual((summary["epoch"], summary["top1"], summary["balanced_accuracy"]),
                     (2, 0.7, 0.6))
    self.assertIn("selected on the test split as Cao et al. 2019's code does",
                  summary["note"])
    self.assertIn("not a clean estimate", summary["note"])
    keys = checkpoints.layout(None, None, PROGRESS, checkpoints.Kept(best_on_test=selection))
    self.assertEqual(sorted(k for k in keys if k.startswith("test_selected")),
                     ["test_selected_balanced_accuracy", "test_selected_epoch",
                      "test_selected_top1"])

  def test_off_keeps_and_reports_nothing(self):
    selection = best_on_test.BestOnTest(strategy=tf.distribute.get_strategy(), paper=None)
    selection.offer(1, {"top1": 0.9, "balanced_accuracy": 0.9})
    self.assertIsNone(selection.summary())
    keys = checkpoints.layout(None, None, PROGRESS, checkpoints.Kept(best_on_test=selection))
    self.assertFalse([k for k in keys if k.startswith("test_selected")])  # old runs' format


if __name__ == "__main__":
  tf.test.main()
