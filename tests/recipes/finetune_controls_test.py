"""The fine-tuning controls (layer-wise rate decay, grey input, zero head, weight EMA,
k-shot training sets) switch from Gin on every fine-tune recipe, alone and after
bit_hyperrule.gin, and run end to end through the `recipes.train` command line with
Gin bindings, as a transfer benchmark runs them."""

import glob
import os

from absl.testing import parameterized
import gin
import numpy as np
from PIL import Image

from recipes import configurables  # pylint: disable=unused-import
from recipes import experiment
from tests.recipes import cli

ROOT = cli.ROOT
BIT = "recipes/configs/runs/bit_hyperrule.gin"
RECIPES = sorted(os.path.relpath(p, ROOT) for p in glob.glob(
    os.path.join(ROOT, "recipes", "*finetune*.gin"))) + ["recipes/resnet50_bit.gin"]
CONTROLS = ["LAYER_DECAY = 0.65", "ZERO_INIT_HEAD = True", "INPUT_CHANNELS = 1",
            "WEIGHT_EMA = True", "EMA_MOMENTUM = 0.9", "Task.examples_per_class = 4",
            "Task.examples_per_class_seed = 7"]
CASES = [(r, ()) for r in RECIPES] + [(r, (BIT,)) for r in RECIPES if "finetune" in r]


def parse(files, bindings=()):
  gin.clear_config()
  gin.add_config_file_search_path(ROOT)
  gin.parse_config_files_and_bindings([os.path.join(ROOT, f) for f in files],
                                      list(bindings), skip_unknown=False)


def query(name):
  """A binding's value, through the macros it names (`%ZERO_INIT_HEAD`)."""
  value = gin.query_parameter(name)
  return query(str(value)) if str(value).startswith("%") else value


class FinetuneControlsTest(parameterized.TestCase):

  def tearDown(self):
    gin.clear_config()
    super().tearDown()

  def test_a_transfer_run_with_every_control(self):
    """nfnet_finetune with all of them on: a 4-shot grey run with layer decay, a zero
    head and a weight average; it trains, reports and exports a one-channel server."""
    model_dir = os.path.join(self.create_tempdir().full_path, "run")
    result = cli.run("--gin_file=recipes/nfnet_finetune.gin",
                     *[f"--gin_bindings={b}" for b in CONTROLS + [
                         "EPOCHS = 2", "IMAGE_SIZE = 16", "CROP_PADDING = 1",
                         "BATCH_SIZE = 8", "Runtime.export_saved_model = True"]],
                     f"--model_dir={model_dir}")
    self.assertEqual(result.returncode, 0, msg=result.stderr[-3000:])
    self.assertIn("layer decay 0.65: stem, 4 blocks, head", result.stdout)
    self.assertIn("40 training examples (per class [4, 4, 4, 4, 4, 4, 4, 4, 4, 4])",
                  result.stdout)
    metrics = cli.metrics(model_dir)
    self.assertEqual(metrics["num_train_examples"], 40)
    with open(os.path.join(model_dir, "operative_config.gin")) as f:
      operative = f.read()
    for setting in ("INPUT_CHANNELS = 1", "ZERO_INIT_HEAD = True", "LAYER_DECAY = 0.65",
                    "WEIGHT_EMA = True", "Task.examples_per_class = 4",
                    "Task.examples_per_class_seed = 7",
                    "InputPipeline.mean = (0.458971,)"):  # the card's, reduced to grey
      self.assertIn(setting + "\n", operative)
    import tensorflow as tf  # pylint: disable=g-import-not-at-top  (after the fork)
    pixels = np.random.default_rng(0).integers(0, 256, [2, 12, 12, 3], dtype=np.uint8)
    path = os.path.join(self.create_tempdir().full_path, "x.png")
    Image.fromarray(pixels[0]).save(path)
    with open(path, "rb") as f:
      png = f.read()
    serve = tf.saved_model.load(os.path.join(model_dir, "export")).signatures[
        "serving_default"]
    self.assertEqual(serve(images=tf.constant([png, png]))["logits"].shape, (2, 10))
    self.assertEqual(serve.structured_outputs["logits"].shape.as_list(), [None, 10])

  @parameterized.parameters(*CASES)
  def test_every_control_reaches_its_setting(self, recipe, after):
    parse([recipe, *after], CONTROLS)
    task, optimization = experiment.Task(), experiment.Optimization()
    self.assertEqual(optimization.layer_decay, 0.65)
    self.assertEqual((task.examples_per_class, task.examples_per_class_seed), (4, 7))
    self.assertIsNone(task.long_tail)  # the k-shot draw is the only draw
    self.assertIs(query("finetune_model.zero_init_head"), True)
    self.assertEqual(query("zoo.build.input_channels"), 1)
    self.assertIs(query("tf_keras.optimizers.SGD.use_ema"), True)
    self.assertEqual(query("tf_keras.optimizers.SGD.ema_momentum"), 0.9)
    self.assertEqual(optimization.optimizer.__name__, "SGD")

  @parameterized.parameters(*CASES)
  def test_they_are_off_by_default_but_bits_zero_head(self, recipe, after):
    parse([recipe, *after], ["DATA_DIR = '/data'"] if "full" in recipe else [])
    bit = BIT in after or recipe.endswith("_bit.gin")
    self.assertIsNone(experiment.Optimization().layer_decay)
    self.assertIs(query("finetune_model.zero_init_head"), bit)
    self.assertEqual(query("zoo.build.input_channels"), 3)
    self.assertIs(query("tf_keras.optimizers.SGD.use_ema"), False)
    # A k-shot draw of the recipe's SHOTS: 10 of the digits, 100 of CIFAR-10 (Lite0's).
    shots = 100 if "efficientnet_lite" in recipe else 10
    self.assertEqual(query("%SHOTS"), shots)
    self.assertEqual(experiment.Task().examples_per_class, shots)


if __name__ == "__main__":
  parameterized.absltest.main()
