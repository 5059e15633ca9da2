"""//benchmarks:input at tiny settings: its data, its JSON, clear flag errors, and the
torchvision peer run for real where ZOO_TORCH_PYTHON names a torch interpreter
(tests/torch_python.py; skipped where it is unset)."""

import json
import os

from absl import flags
from absl.testing import flagsaver
from absl.testing import parameterized
import tensorflow as tf

from benchmarks import input_benchmark
from tests import torch_python

FLAGS = flags.FLAGS


class InputBenchmarkTest(tf.test.TestCase, parameterized.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    FLAGS.mark_as_parsed()

  def test_data_is_imagenet_like_and_reused(self):
    root = os.path.join(self.get_temp_dir(), "jpegs")
    data = input_benchmark.make_data(root, 6, 2)
    self.assertLen(tf.io.gfile.glob(os.path.join(root, "class_*", "*.jpg")), 6)
    self.assertBetween(data["mean_kb"], 60, 200)
    self.assertBetween(data["mean_megapixels"], 0.1, 0.3)
    stamp = os.path.getmtime(os.path.join(root, "class_000", "000000.jpg"))
    self.assertEqual(input_benchmark.make_data(root, 6, 2), data)
    self.assertEqual(os.path.getmtime(os.path.join(root, "class_000", "000000.jpg")), stamp)

  def test_one_round_of_ours_writes_the_figures(self):
    root = os.path.join(self.get_temp_dir(), "run")
    output = os.path.join(self.get_temp_dir(), "input.json")
    with flagsaver.flagsaver(data_dir=root, images=12, classes=2, batch_size=4, batches=2,
                             rounds=1, threads=["1"], output=output, image_size=96,
                             pipelines=["train", "eval", "decode_and_crop",
                                        "train_decode_whole", "eval_decode_whole",
                                        "train_model_garden", "train_dct_scaling"]):
      input_benchmark.main([])
    with open(output) as f:
      result = json.load(f)
    self.assertIsNone(result["peer"])
    self.assertEqual(result["image_size"], 96)
    self.assertIn("2470 img/s", result["accelerator_source"])
    rows = {(r["pipeline"], r["kind"]): r for r in result["rows"]}
    self.assertCountEqual(rows, [("train", "ours"), ("eval", "ours"),
                                 ("decode_and_crop", "limit"), ("train_decode_whole", "ours"),
                                 ("eval_decode_whole", "ours"),
                                 ("train_model_garden", "ours"), ("train_dct_scaling", "ours")])
    train = rows[("train", "ours")]
    self.assertGreater(train["images_per_second"], 0)
    self.assertLen(train["rounds"], 1)
    self.assertIsNone(train["noise"])  # one round: no interval, no noise figure
    ratio = train["over_decode_and_crop"]
    self.assertAllClose(ratio["ratio"], train["images_per_second"]
                        / rows[("decode_and_crop", "limit")]["images_per_second"], atol=1e-4)
    self.assertAllClose(train["cores_to_feed_accelerator"],
                        2470 / train["images_per_second"])
    self.assertAllClose(train["over_base"]["ratio"], train["images_per_second"]
                        / rows[("train_decode_whole", "ours")]["images_per_second"],
                        atol=1e-4)  # JSON's ratios: 4 decimals
    self.assertNotIn("over_torchvision", train)
    self.assertNotIn("over_decode_and_crop", rows[("eval", "ours")])
    self.assertNotIn("over_decode_and_crop", rows[("train_model_garden", "ours")])
    self.assertGreater(rows[("train_model_garden", "ours")]["images_per_second"], 0)
    evaluation = rows[("eval", "ours")]
    self.assertAllClose(evaluation["over_base"]["ratio"],
                        evaluation["images_per_second"]
                        / rows[("eval_decode_whole", "ours")]["images_per_second"], atol=1e-4)
    scaled = rows[("train_dct_scaling", "ours")]
    self.assertAllClose(scaled["over_base"]["ratio"],
                        scaled["images_per_second"] / train["images_per_second"], atol=1e-4)

  def test_every_pipeline_makes_batches_of_the_image_size(self):
    root = os.path.join(self.get_temp_dir(), "sizes")
    input_benchmark.make_data(root, 8, 2)
    folder = input_benchmark.Folder.read(root)
    for name in ("train", "eval", "train_dct_scaling", "train_decode_whole", "train_uint8"):
      images, _ = next(iter(input_benchmark.ours_dataset(name, folder, 0, 4, 80)))
      self.assertEqual(images.shape, (4, 80, 80, 3))
      self.assertEqual(images.dtype, tf.uint8 if name == "train_uint8" else tf.float32)
    self.assertTrue(input_benchmark.settings(
        "train_dct_scaling", 4).random_resized_crop_dct_scaling)
    self.assertFalse(input_benchmark.settings("train", 4).random_resized_crop_dct_scaling)

  def test_the_model_garden_row_stands_beside_train(self):
    self.assertEqual(input_benchmark.settings("train", 4).random_resized_crop_sampler,
                     "torchvision")  # the peer's sampler
    garden = input_benchmark.settings("train_model_garden", 4)
    self.assertEqual(garden, input_benchmark.settings("train", 4).replace(
        random_resized_crop_sampler="model_garden"))
    rates = {("train", 1, "ours"): [100.0], ("train_model_garden", 1, "ours"): [120.0],
             ("train", 1, "torchvision"): [80.0], ("decode_and_crop", 1, "limit"): [200.0]}
    rows = {(r["pipeline"], r["kind"]): r for r in input_benchmark.summary(rates, 2470.0)}
    self.assertAllClose(rows[("train", "ours")]["over_torchvision"]["ratio"], 1.25)
    self.assertAllClose(rows[("train", "ours")]["over_decode_and_crop"]["ratio"], 0.5)
    for key in ("over_torchvision", "over_decode_and_crop"):  # other boxes: no ratio
      self.assertNotIn(key, rows[("train_model_garden", "ours")])

  def test_ratios_follow_the_one_timing_rule(self):
    # Six rounds (the fewest with a 95% interval): paired ratios 1.10 .. 1.35, the
    # interval the smallest and largest (j = 1), ahead; noise the median's.
    ours = [110.0, 115.0, 120.0, 125.0, 130.0, 135.0]
    rates = {("train", 1, "ours"): ours, ("train", 1, "torchvision"): [100.0] * 6}
    row = {(r["pipeline"], r["kind"]): r
           for r in input_benchmark.summary(rates, 2470.0)}[("train", "ours")]
    ratio = row["over_torchvision"]
    self.assertAllClose([ratio["ratio"], ratio["low"], ratio["high"]], [1.225, 1.1, 1.35])
    self.assertEqual((ratio["verdict"], ratio["rounds"]), ("ahead", 6))
    self.assertAllClose(row["noise"], (135.0 - 110.0) / 2 / 122.5, atol=1e-4)
    rates[("train", 1, "torchvision")] = [100.0, 140.0, 100.0, 140.0, 100.0, 140.0]
    ratio = {(r["pipeline"], r["kind"]): r for r in input_benchmark.summary(
        rates, 2470.0)}[("train", "ours")]["over_torchvision"]
    self.assertEqual(ratio["verdict"], "parity")  # the interval holds 1.0

  def test_the_torchvision_peer_runs(self):
    # The peer itself (benchmarks/peer_torchvision.py) in a torch interpreter, on 12
    # tiny JPEGs: every pipeline it has, against ours, one round.
    torch_python.skip_unless_available(self)
    root = os.path.join(self.get_temp_dir(), "peer")
    output = os.path.join(self.get_temp_dir(), "peer.json")
    with flagsaver.flagsaver(data_dir=root, images=12, classes=2, batch_size=4, batches=2,
                             rounds=1, threads=["1"], output=output, image_size=96,
                             torch_python=torch_python.interpreter(),
                             pipelines=list(input_benchmark.PEERED)):
      input_benchmark.main([])
    with open(output) as f:
      result = json.load(f)
    self.assertRegex(result["peer"], r"^ready torch \S+ torchvision \S+")
    rows = {(r["pipeline"], r["kind"]): r for r in result["rows"]}
    for name in input_benchmark.PEERED:
      theirs = rows[(name, "torchvision")]
      self.assertGreater(theirs["images_per_second"], 0)
      self.assertAllClose(rows[(name, "ours")]["over_torchvision"]["ratio"],
                          rows[(name, "ours")]["images_per_second"]
                          / theirs["images_per_second"], atol=1e-4)

  @parameterized.parameters(("torchvision_simd", "ZOO_SIMD_PYTHON"), ("dali", "ZOO_DALI_PYTHON"))
  def test_the_faster_peers_run(self, kind, variable):
    # Pillow-SIMD's DataLoader and DALI's CPU pipeline, where `variable` names a Python
    # that has them (not CI's: docs/input.md), against ours, one round.
    python = os.environ.get(variable)
    if not python:
      self.skipTest(f"{variable} unset: no Python with the {kind} peer (set it to run it)")
    root = os.path.join(self.get_temp_dir(), kind)
    output = os.path.join(self.get_temp_dir(), kind + ".json")
    _, flag, _, pipelines = input_benchmark.PEERS[kind]
    with flagsaver.flagsaver(data_dir=root, images=12, classes=2, batch_size=4, batches=2,
                             rounds=1, threads=["1"], output=output, image_size=96,
                             pipelines=list(pipelines), **{flag: python}):
      input_benchmark.main([])
    with open(output) as f:
      result = json.load(f)
    self.assertRegex(result["peers"][kind], r"^ready ")
    rows = {(r["pipeline"], r["kind"]): r for r in result["rows"]}
    for name in pipelines:
      theirs = rows[(name, kind)]
      self.assertGreater(theirs["images_per_second"], 0)
      self.assertAllClose(rows[(name, "ours")][f"over_{kind}"]["ratio"],
                          rows[(name, "ours")]["images_per_second"]
                          / theirs["images_per_second"], atol=1e-4)

  def test_bad_flags_and_missing_peer_say_so(self):
    with flagsaver.flagsaver(pipelines=["train", "jpeg"]):
      with self.assertRaisesRegex(Exception, "--pipelines: 'jpeg' is none of"):
        input_benchmark.check_flags()
    with flagsaver.flagsaver(images=100, batch_size=128, batches=8):
      with self.assertRaisesRegex(Exception, r"--images=100 must be at least"):
        input_benchmark.check_flags()
    with flagsaver.flagsaver(torch_python="/nonexistent/python"):
      with self.assertRaisesRegex(Exception, "is not an executable; name a Python with "
                                  "torch and torchvision, or leave the flag out"):
        input_benchmark.check_flags()
    with self.assertRaisesRegex(Exception, "cannot run the torchvision peer"):
      input_benchmark.Peer("/bin/false", self.get_temp_dir(), 4)
    with self.assertRaisesRegex(Exception, "--dali_python=/bin/false cannot run the dali "
                                "peer: does it import NVIDIA DALI"):
      input_benchmark.Peer("/bin/false", self.get_temp_dir(), 4, kind="dali")
    with flagsaver.flagsaver(simd_python="/nonexistent/python"):
      with self.assertRaisesRegex(Exception, "--simd_python=/nonexistent/python is not an "
                                  "executable; name a Python with torch, torchvision and "
                                  "Pillow-SIMD"):
        input_benchmark.check_flags()


if __name__ == "__main__":
  tf.test.main()
