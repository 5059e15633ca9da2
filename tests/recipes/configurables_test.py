"""Every recipe's Gin files parse strictly and build what they say they build."""

import glob
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
README = os.path.join(ROOT, "README.md")  # //:README.md, a data dependency
# Test-only recipes (the tiny flagship and its decoupled run) live under tests/.
TEST_RECIPES = sorted(os.path.relpath(p, ROOT) for p in glob.glob(
    os.path.join(ROOT, "tests", "recipes", "configs", "*.gin")))


def parse(name, bindings=()):
  gin.add_config_file_search_path(ROOT)
  gin.parse_config_files_and_bindings([os.path.join(ROOT, "recipes", name)], bindings,
                                      skip_unknown=False)


def flagship_table():
  """README's flagship table: the first table of its "## The flagship" section, as
  (header cells, body rows of cells)."""
  with open(README) as f:
    text = f.read()
  section = re.search(r"^## The flagship\b.*?(?=^## |\Z)", text, re.M | re.S)
  if not section:
    raise AssertionError("README.md has no '## The flagship' section")
  table = []
  for line in section.group(0).splitlines():
    if line.startswith("|"):
      table.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    elif table:
      break
  if len(table) < 3:
    raise AssertionError("README.md's flagship section has no table")
  return table[0], table[2:]  # table[1] is the |---| line


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
    # README's flagship table against what the flagship's Gin files build, so that a
    # change to either without the other fails: the default run's row gives the seed
    # and the loss, the header the classes in each shot group (which follow from the
    # data, the long-tail profile and Task.shot_thresholds).
    header, rows = flagship_table()
    self.assertEqual(header[:2], ["seed", "loss"])
    default_rows = [r for r in rows if "the default run" in r[0]]
    self.assertLen(default_rows, 1)
    seed = int(re.match(r"\d+", default_rows[0][0]).group())
    loss = default_rows[0][1].replace("-", "_")  # "logit-adjusted" is @logit_adjusted
    groups = dict((g, int(n)) for g, n in
                  re.findall(r"\b(many|medium|few)-shot \((\d+)", " ".join(header)))
    self.assertCountEqual(groups, ["many", "medium", "few"])

    parse("nfnet_long_tail.gin")
    task, runtime = experiment.Task(), experiment.Runtime()
    self.assertEqual(runtime.seed, seed)
    self.assertEqual(task.long_tail.seed, seed)
    self.assertEqual(task.loss.__name__, loss)
    source = task.data()
    counts = np.asarray(task.long_tail.counts(
        np.bincount(source.train_labels, minlength=source.num_classes)))
    many, few = task.shot_thresholds
    built = {"many": int(np.sum(counts > many)), "few": int(np.sum(counts < few)),
             "medium": int(np.sum((counts <= many) & (counts >= few)))}
    self.assertEqual(built, groups, msg=f"training counts {counts.tolist()}")
    # Every loss the table compares is one binding away (Task.loss = @<name>).
    for row in rows:
      gin.get_configurable(row[1].replace("-", "_"))

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
