"""The best epoch on the test split, for the recipes whose paper's code reports one
(`Runtime.test_selection`: the code it follows, e.g. "Cao et al. 2019's").

Cao et al.'s LDAM-DRW code tests every epoch and prints the best top-1 ("Best Prec@1");
Ren et al.'s keeps the best epoch on a "val" loader that for CIFAR is the test set. A
run asking for it scores the test split at every evaluation (every
`Runtime.eval_every_epochs` and at the end, the final weights) and keeps the epoch with
the best top-1, recorded in metrics.json as `best_on_test_protocol`, labelled: the
selection has seen the test labels, so it is the paper's protocol, not a clean
estimate. The top-level metrics stay the final weights'.

Its best top-1, epoch and balanced accuracy are variables kept in the run's
checkpoints, so a resumed run continues the selection and a rollback forgets the
abandoned epochs' scores.
"""

import tensorflow as tf

NOTE = ("selected on the test split as {paper} code does (the best top-1 over the "
        "evaluated epochs); not a clean estimate: the top-level metrics are the final "
        "weights'")


class BestOnTest:
  """The best test top-1 so far, its epoch and balanced accuracy."""

  def __init__(self, *, strategy, paper):
    """`paper`: Runtime.test_selection (None: nothing is kept or reported)."""
    self.paper = paper
    with strategy.scope():
      self.top1 = tf.Variable(-1.0, dtype=tf.float64, trainable=False,
                              name="test_selected_top1")
      self.balanced = tf.Variable(-1.0, dtype=tf.float64, trainable=False,
                                  name="test_selected_balanced_accuracy")
      self.epoch = tf.Variable(0, dtype=tf.int64, trainable=False,
                               name="test_selected_epoch")

  def offer(self, epoch, metrics):
    """Epoch `epoch` (1-based) scored `metrics` on the test split; kept if its top-1 is
    above the best so far (the first of equals, as `acc1 > best_acc1`)."""
    if self.paper and metrics["top1"] > float(self.top1.numpy()):
      self.top1.assign(metrics["top1"])
      self.balanced.assign(metrics["balanced_accuracy"])
      self.epoch.assign(epoch)

  def summary(self):
    """{epoch, top1, balanced_accuracy, note}, or None when not asked for."""
    if not self.paper or not int(self.epoch.numpy()):
      return None
    return {"epoch": int(self.epoch.numpy()), "top1": float(self.top1.numpy()),
            "balanced_accuracy": float(self.balanced.numpy()),
            "note": NOTE.format(paper=self.paper)}
