"""//benchmarks:randaugment_ops at tiny settings: its JSON, and clear flag errors."""

import json
import os

from absl import flags
from absl.testing import flagsaver
import tensorflow as tf

from benchmarks import randaugment_ops_benchmark as bench
from recipes.data import randaugment

FLAGS = flags.FLAGS


class RandAugmentOpsTest(tf.test.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    FLAGS.mark_as_parsed()

  def test_one_round_writes_every_named_op_and_the_whole(self):
    output = os.path.join(self.get_temp_dir(), "ops.json")
    with flagsaver.flagsaver(images=16, rounds=1, ops=["Invert", "Rotate"], output=output):
      bench.main([])
    with open(output) as f:
      result = json.load(f)
    rows = {r["op"]: r for r in result["rows"]}
    self.assertCountEqual(rows, ["Invert", "Rotate", bench.WHOLE])
    self.assertLen(rows["Rotate"]["rounds"], 1)
    # Two layers of 16 ops (a rotation or a shear among them on most images) cost time.
    self.assertGreater(rows[bench.WHOLE]["ms_per_image"], 0.0)
    self.assertEqual([r["op"] for r in result["rows"]],
                     sorted(rows, key=lambda n: -rows[n]["ms_per_image"]))

  def test_both_implementations_run(self):
    output = os.path.join(self.get_temp_dir(), "mg.json")
    with flagsaver.flagsaver(images=8, rounds=1, ops=["ShearX"], output=output,
                             implementation="model_garden"):
      bench.main([])
    with open(output) as f:
      result = json.load(f)
    self.assertEqual(result["implementation"], "model_garden")
    self.assertIn("randaugment", result["command"])  # where the figures come from
    self.assertRegex(result["date"], r"^\d{4}-\d\d-\d\d$")
    self.assertIs(bench.IMPLEMENTATIONS["ours"], randaugment.RandAugment)

  def test_bad_flags_say_so(self):
    with flagsaver.flagsaver(ops=["Rotate", "Blur"]):
      with self.assertRaisesRegex(Exception, "--ops: 'Blur' is none of AutoContrast"):
        bench.check_flags()
    with flagsaver.flagsaver(images=1):
      with self.assertRaisesRegex(Exception, "--images=1 must be >= 2"):
        bench.check_flags()
    with flagsaver.flagsaver(magnitude=-1):
      with self.assertRaisesRegex(Exception, r"--magnitude=-1 must be in \[0, 30\]"):
        bench.check_flags()


if __name__ == "__main__":
  tf.test.main()
