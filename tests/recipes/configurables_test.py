"""Every recipe's Gin files parse strictly and build what they say they build."""

import glob
import json
import os
import re

from absl.testing import parameterized
import gin
import numpy as np
import tensorflow as tf

from recipes import configurables  # pylint: disable=unused-import
from recipes import experiment
from recipes import train  # pylint: disable=unused-import  (run, lr_range_test)
import zoo

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RECIPES = sorted(os.path.basename(p) for p in glob.glob(os.path.join(ROOT, "recipes", "*.gin")))
FLAGSHIP_JSON = os.path.join(ROOT, "docs", "data", "nfnet_long_tail.json")  # //:readme_data
# Test-only recipes (the tiny flagship and its decoupled run) live under tests/.
TEST_RECIPES = sorted(os.path.relpath(p, ROOT) for p in glob.glob(
    os.path.join(ROOT, "tests", "recipes", "configs", "*.gin")))


def parse(name, bindings=()):
  gin.add_config_file_search_path(ROOT)
  gin.parse_config_files_and_bindings([os.path.join(ROOT, "recipes", name)], bindings,
                                      skip_unknown=False)


def flagship_results():
  """README's flagship table's JSON (docs/data/nfnet_long_tail.json; //tests:docs_data_test
  holds README's table to it)."""
  with open(FLAGSHIP_JSON) as f:
    return json.load(f)


class ConfigurablesTest(tf.test.TestCase, parameterized.TestCase):

  def tearDown(self):
    gin.clear_config()
    super().tearDown()

  def test_recipes_found(self):
    self.assertContainsSubset(
        ["nfnet_long_tail.gin", "nfnet_long_tail_full.gin", "nfnet_long_tail_cifar100.gin"],
        RECIPES)
    self.assertEqual([n for n in RECIPES if "tiny" in n], [])  # users' recipes only
    self.assertEqual(TEST_RECIPES, ["tests/recipes/configs/nfnet_long_tail_decoupled_tiny.gin",
                                    "tests/recipes/configs/nfnet_long_tail_tiny.gin"])

  @parameterized.parameters(TEST_RECIPES)
  def test_test_recipe_parses_strictly(self, path):
    gin.add_config_file_search_path(ROOT)
    gin.parse_config_files_and_bindings([os.path.join(ROOT, path)], [], skip_unknown=False)
    self.assertEqual(gin.query_parameter("%EPOCHS"), 2)
    self.assertIn("Task.model = @zoo.build", gin.config_str())

  @parameterized.parameters(RECIPES)
  def test_recipe_parses_strictly(self, name):
    parse(name, ["DATA_DIR = '/data/tfds'"])
    model = ("@finetune_model" if name.endswith(("_finetune.gin", "_bit.gin"))
             else "@zoo.build")
    self.assertIn(f"Task.model = {model}", gin.config_str())

  @parameterized.parameters(n for n in RECIPES if n.endswith("_finetune.gin"))
  def test_bit_hyperrule_goes_on_any_finetune_recipe(self, name):
    gin.add_config_file_search_path(ROOT)
    gin.parse_config_files_and_bindings(
        [os.path.join(ROOT, "recipes", name),
         os.path.join(ROOT, "recipes/configs/runs/bit_hyperrule.gin")], [], skip_unknown=False)
    self.assertEqual(gin.query_parameter("Optimization.hyperrule").selector,
                     "BitHyperRule")
    self.assertEqual(gin.query_parameter("%BATCH_SIZE"), 512)
    self.assertEqual(gin.query_parameter("zoo.build.input_shape"), (None, None, 3))

  def test_flagship_defaults(self):
    # README's flagship table (its JSON) against what the flagship's Gin files build, so
    # that a change to either without the other fails: the recipe, its epochs, its
    # default seed's run and loss among the rows, and the training counts of every
    # seed's long-tailed draw.
    results = flagship_results()
    self.assertEqual(results["recipe"], "recipes/nfnet_long_tail.gin")
    self.assertEqual(results["extra_bindings"], [])
    parse("nfnet_long_tail.gin")
    self.assertEqual(results["epochs"], gin.query_parameter("%EPOCHS"))
    task, runtime = experiment.Task(), experiment.Runtime()
    self.assertEqual(task.loss.__name__, "logit_adjusted")
    self.assertIn("la", results["short_names"].values())
    self.assertIn(str(runtime.seed), results["seeds"])
    source = task.data()
    # The long-tailed draw is made after the validation hold-out.
    train_counts = (np.bincount(source.train_labels, minlength=source.num_classes)
                    - task.validation_per_class)
    gin.clear_config()
    for seed in results["seeds"]:
      parse("nfnet_long_tail.gin", [f"SEED = {seed}"])
      built = experiment.Task().long_tail.counts(train_counts)
      for method, runs in results["runs"].items():
        self.assertEqual(runs[seed]["train_class_counts"], np.asarray(built).tolist(),
                         msg=f"{method}, seed {seed}")
      gin.clear_config()
    # Every loss the table compares is one binding away.
    for method in ("cross_entropy", "logit_adjusted"):
      gin.get_configurable(method)

  def test_full_scale_is_published_f0(self):
    parse("nfnet_long_tail_full.gin", ["DATA_DIR = '/data/tfds'"])
    model = gin.get_configurable("zoo.build")()
    self.assertEqual(model.count_params(), 71_489_284)  # F0 at 1000 classes: 71.5M
    self.assertEqual(gin.query_parameter("%IMAGE_SIZE"), 192)
    # Tested as its card says (256px, DeepMind's crop, bicubic): nothing overrides it.
    for unset in ("eval_image_size", "eval_crop_fraction", "eval_resize_method", "mean"):
      with self.assertRaises(ValueError):
        gin.query_parameter(f"InputPipeline.{unset}")
    self.assertEqual(zoo.model_card("nfnet_f0").test_size, 256)

  def test_unknown_names_are_errors(self):
    with self.assertRaisesRegex(ValueError, "No configurable matching 'Nope'"):
      parse("nfnet_long_tail.gin", ["Nope.x = 1"])
    gin.clear_config()
    with self.assertRaisesRegex(ValueError, "doesn't have a parameter named 'rhoo'"):
      parse("nfnet_long_tail.gin", ["LongTail.rhoo = 1"])


if __name__ == "__main__":
  tf.test.main()
