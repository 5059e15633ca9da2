"""Long-tail metrics on hand-worked examples; their TensorBoard summaries."""

import numpy as np
import tensorflow as tf

from recipes import evaluation
from tests.recipes import summaries


class EvaluationTest(tf.test.TestCase):

  def test_hand_worked_report(self):
    # Class 0: 4 test images, 3 right. Class 1: 2 images, 1 right. Class 2: 1, 0 right.
    labels = [0, 0, 0, 0, 1, 1, 2]
    predictions = [0, 0, 0, 1, 1, 0, 0]
    metrics = evaluation.long_tail_metrics(labels, predictions, train_counts=[150, 50, 3],
                                           many_shot_above=100, few_shot_below=20)
    self.assertAllClose(metrics["top1"], 4 / 7)
    self.assertAllClose(metrics["per_class_accuracy"], [0.75, 0.5, 0.0])
    self.assertAllClose(metrics["balanced_accuracy"], (0.75 + 0.5 + 0.0) / 3)
    self.assertAllClose(metrics["many_shot_accuracy"], 0.75)
    self.assertAllClose(metrics["medium_shot_accuracy"], 0.5)
    self.assertAllClose(metrics["few_shot_accuracy"], 0.0)
    self.assertEqual(metrics["num_test_examples"], 7)

  def test_group_boundaries_are_strict(self):
    self.assertEqual(evaluation.shot_groups([101, 100, 20, 19], 100, 20),
                     ["many", "medium", "medium", "few"])

  def test_empty_group_and_class_without_test_images(self):
    metrics = evaluation.long_tail_metrics([0, 0], [0, 1], train_counts=[500, 400, 300])
    self.assertIsNone(metrics["few_shot_accuracy"])
    self.assertIsNone(metrics["per_class_accuracy"][2])
    self.assertAllClose(metrics["balanced_accuracy"], 0.5)  # over classes with images
    self.assertTrue(np.isnan(evaluation.per_class_accuracy([0], [0], 2)[1]))

  def test_eval_summaries_write_the_headline_metrics(self):
    logdir = self.get_temp_dir()
    writer = tf.summary.create_file_writer(logdir)
    evaluation.write_summaries(writer, {"top1": 0.5, "balanced_accuracy": 0.25,
                                        "few_shot_accuracy": None}, step=3)
    writer.flush()
    self.assertEqual(summaries.scalars(logdir, "top1"), {3: 0.5})
    self.assertEqual(summaries.scalars(logdir, "balanced_accuracy"), {3: 0.25})
    # No few-shot classes: nothing written.
    self.assertEqual(summaries.scalars(logdir, "few_shot_accuracy"), {})


if __name__ == "__main__":
  tf.test.main()
