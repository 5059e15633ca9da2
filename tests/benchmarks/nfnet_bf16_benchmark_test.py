"""//benchmarks:nfnet_bf16 at a tiny setting: the variants alternated over rounds, each
figure the median with its interval and each speed-up the median of the per-round
ratios (benchmarks/stats.py), written to JSON with its command, machine and revision."""

import json
import os

from absl import flags
from absl.testing import flagsaver
import numpy as np
import tensorflow as tf

from benchmarks import nfnet_bf16_benchmark
from benchmarks import stats


class NfnetBf16BenchmarkTest(tf.test.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    if not flags.FLAGS.is_parsed():
      flags.FLAGS.mark_as_parsed()

  def test_six_rounds_of_nano_write_the_figures(self):
    output = os.path.join(self.get_temp_dir(), "bf16.json")
    with flagsaver.flagsaver(models=["nfnet_nano"], variants=["float32", "bfloat16"],
                             rounds=6, steps=1, output=output):
      nfnet_bf16_benchmark.main([])
    with open(output) as f:
      result = json.load(f)
    self.assertEqual(result["rounds"], 6)
    self.assertIn("logical cores", result["machine"])
    nano = result["models"]["nfnet_nano"]
    self.assertEqual((nano["image_size"], nano["batch_size"], nano["timed_steps_a_chunk"]),
                     (32, 16, 1))
    f32, bf16 = (nano["variants"][v] for v in ("float32", "bfloat16"))
    self.assertLen(bf16["seconds_each_round"], 6)
    self.assertAllClose(bf16["seconds_a_step"]["median"],
                        np.median(bf16["seconds_each_round"]), rtol=1e-4)
    # Six rounds: the interval is the smallest and largest round (j = 1).
    self.assertAllClose([bf16["seconds_a_step"]["low"], bf16["seconds_a_step"]["high"]],
                        [min(bf16["seconds_each_round"]), max(bf16["seconds_each_round"])],
                        rtol=1e-4)
    ratios = np.array(f32["seconds_each_round"]) / np.array(bf16["seconds_each_round"])
    self.assertAllClose(bf16["over_float32"]["ratio"], np.median(ratios), atol=2e-3)
    self.assertIn(bf16["over_float32"]["verdict"], (stats.AHEAD, stats.BEHIND, stats.PARITY))
    self.assertIsNone(f32["over_float32"])

  def test_unknown_names_are_refused(self):
    with flagsaver.flagsaver(models=["nfnet_f9"]):
      with self.assertRaisesRegex(Exception, r"unknown --models/--variants \['nfnet_f9'\]"):
        nfnet_bf16_benchmark.main([])


if __name__ == "__main__":
  tf.test.main()
