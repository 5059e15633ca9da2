"""//benchmarks:trainer at a tiny size: every part runs and reports its figures."""

import json
import os

from absl import flags
from absl.testing import flagsaver
import tensorflow as tf

from benchmarks import trainer_benchmark


class TrainerBenchmarkTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    if not flags.FLAGS.is_parsed():
      flags.FLAGS.mark_as_parsed()

  def test_every_part_at_a_tiny_size(self):
    output = os.path.join(self.get_temp_dir(), "figures.json")
    with flagsaver.flagsaver(sizes=["nano16"], steps=1, rounds=1, distinct_batches=2,
                             host_steps_per_loop=["1", "2"], host_steps=2, host_rounds=1,
                             cache_images=40, cache_jpeg_size=24, cache_image_size=8,
                             cache_batch_size=4, cache_epochs=1, output=output):
      trainer_benchmark.main(["trainer"])
    with open(output) as f:
      figures = json.load(f)
    size = figures["sizes"]["nano16"]
    self.assertEqual((size["model"], size["image_size"], size["batch_size"]),
                     ("nfnet_nano", 16, 8))
    self.assertEqual(size["steps_per_loop"], figures["default_steps_per_loop"])
    for row in [size, *figures["host"].values()]:
      self.assertGreater(row["trainer_ms_per_step"], 0)
      self.assertGreater(row["fit_ms_per_step"], 0)
      self.assertAllClose(row["fit_over_trainer"],
                          row["fit_ms_per_step"] / row["trainer_ms_per_step"], rtol=0.01)
    self.assertEqual(sorted(figures["host"]), ["1", "2"])
    self.assertGreater(figures["host"]["2"]["loop_alone_ms_per_step"], 0)
    cache = figures["cache"]
    self.assertEqual(cache["images"], 30)  # 40 written, 1 a class held out as test
    self.assertGreater(cache["cached_ms_per_epoch"], 0)
    self.assertGreater(cache["uncached_over_cached"], 0)


if __name__ == "__main__":
  tf.test.main()
