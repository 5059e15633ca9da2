"""README's baseline beside a run's result: only for a run on the same split and
schedule as the benchmark's, and printed as the run's last figures."""

import json
import os
from unittest import mock

import tensorflow as tf

from recipes import baselines
from recipes import run_report

RUN = {"recipe": "nfnet_long_tail", "seed": 1, "train_class_counts": [50, 10, 2],
       "num_test_examples": 300, "epochs": 12, "steps": 120, "balanced_accuracy": 0.8125,
       "top1": 0.8125, "many_shot_accuracy": 0.9, "many_shot_classes": 1,
       "medium_shot_accuracy": 0.8, "medium_shot_classes": 1, "few_shot_accuracy": 0.7375,
       "few_shot_classes": 1}


class BaselinesTest(tf.test.TestCase):

  def root_with(self, runs):
    root = self.create_tempdir().full_path
    os.makedirs(os.path.join(root, "docs", "data"))
    with open(os.path.join(root, baselines.README_TABLES["nfnet_long_tail"][0]), "w") as f:
      json.dump({"runs": {"cross-entropy": runs}}, f)
    return root

  def test_every_readme_table_reaches_the_runs(self):
    # Under Bazel a JSON missing from //:readme_data is absent here, and a run would
    # print no baseline without a word.
    for recipe, (path, _) in baselines.README_TABLES.items():
      self.assertTrue(os.path.isfile(os.path.join(baselines.ROOT, path)), msg=recipe)

  def test_same_split_and_schedule(self):
    same = {k: RUN[k] for k in baselines.SAME}
    root = self.root_with({"0": dict(same, balanced_accuracy=0.70),
                           "1": dict(same, balanced_accuracy=0.72),
                           "2": dict(same, balanced_accuracy=0.77)})
    found = baselines.readme_baselines(RUN, root)
    self.assertLen(found, 1)
    self.assertEqual(found[0][0], "cross-entropy")
    self.assertAllClose(found[0][1], 0.73)
    self.assertEqual(found[0][2:], (["0", "1", "2"], 0.72))
    self.assertEqual(run_report.result_lines(RUN, found), [
        "Balanced accuracy 0.812 on the test split (300 images; top-1 0.812); many-shot "
        "0.900 (1 classes), medium-shot 0.800 (1 classes), few-shot 0.738 (1 classes)",
        "cross-entropy on this split: 0.730 (README: mean of seeds 0, 1, 2; seed 1: 0.720)"])

  def test_another_schedule_or_recipe_has_none(self):
    same = {k: RUN[k] for k in baselines.SAME}
    root = self.root_with({"0": dict(same, balanced_accuracy=0.70)})
    for change in ({"epochs": 3}, {"steps": 4}, {"train_class_counts": [50, 10, 3]},
                   {"recipe": "nfnet_long_tail_digits"}):
      self.assertEqual(baselines.readme_baselines(dict(RUN, **change), root), [], change)
    self.assertEqual(baselines.readme_baselines(RUN, self.create_tempdir().full_path), [])
    self.assertLen(run_report.result_lines(RUN), 1)

  def test_every_arm_of_a_table_or_none(self):
    # The fine-tuning recipe's table: scratch and the linear probe, each printed; a
    # table whose arms do not all match the run prints none of them.
    same = {k: RUN[k] for k in baselines.SAME}
    root = self.create_tempdir().full_path
    with open(os.path.join(root, "table.json"), "w") as f:
      json.dump({"runs": {"scratch": {"0": dict(same, balanced_accuracy=0.3),
                                      "1": dict(same, balanced_accuracy=0.4)},
                          "linear probe": {"0": dict(same, balanced_accuracy=0.5),
                                           "1": dict(same, balanced_accuracy=0.6)}}}, f)
    tables = {"lite": ("table.json", ("scratch", "linear probe"))}
    run = dict(RUN, recipe="lite")
    with mock.patch.dict(baselines.README_TABLES, tables):
      found = baselines.readme_baselines(run, root)
      self.assertEqual([f[0] for f in found], ["scratch", "linear probe"])
      self.assertEqual(run_report.result_lines(run, found)[1:], [
          "scratch on this split: 0.350 (README: mean of seeds 0, 1; seed 1: 0.400)",
          "linear probe on this split: 0.550 (README: mean of seeds 0, 1; seed 1: 0.600)"])
      self.assertEqual(baselines.readme_baselines(dict(run, epochs=99), root), [])
      with open(os.path.join(root, "table.json"), "w") as f:
        json.dump({"runs": {"scratch": {"0": dict(same, balanced_accuracy=0.3)}}}, f)
      self.assertEqual(baselines.readme_baselines(run, root), [])  # an arm missing


if __name__ == "__main__":
  tf.test.main()
