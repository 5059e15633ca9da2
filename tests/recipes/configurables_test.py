"""Every recipe's Gin files parse strictly and build what they say they build."""

import glob
import os

from absl.testing import parameterized
import gin
import tensorflow as tf

from recipes import configurables  # pylint: disable=unused-import
from recipes import train  # pylint: disable=unused-import  (run, lr_range_test)
import zoo

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RECIPES = sorted(os.path.basename(p) for p in glob.glob(os.path.join(ROOT, "recipes", "*.gin")))
# Test-only recipes (the tiny flagship and its decoupled run) live under tests/.
TEST_RECIPES = sorted(os.path.relpath(p, ROOT) for p in glob.glob(
    os.path.join(ROOT, "tests", "recipes", "configs", "*.gin")))


def parse(name, bindings=()):
  gin.add_config_file_search_path(ROOT)
  gin.parse_config_files_and_bindings([os.path.join(ROOT, "recipes", name)], bindings,
                                      skip_unknown=False)


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
    parse("nfnet_long_tail.gin")
    query = gin.query_parameter
    self.assertEqual(query("zoo.build.name"), "nfnet_nano")
    self.assertEqual(query("Task.loss").selector, "logit_adjusted")
    self.assertEqual(query("Task.long_tail").selector, "LongTail")
    self.assertEqual(query("%RHO"), 100)

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
