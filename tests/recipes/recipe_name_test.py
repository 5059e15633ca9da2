"""A recipe is named for its Gin file (train.parse_config binds Task.name to the first
recipe file's name, a file of one's own that includes a recipe taking the recipe's,
unless a file or binding names it): metrics.json's "recipe", which the reproduction
report groups runs by."""

import glob
import os

from absl.testing import absltest
import gin

from recipes import train

# Recipes named for what they run, not their file.
NAMED = {"nfnet_long_tail_cifar100": "nfnet_f0_cifar100_lt",
         "nfnet_long_tail_full": "nfnet_f0_imagenet_lt",
         "nfnet_lr_range": "nfnet_long_tail"}


class RecipeNameTest(absltest.TestCase):

  def tearDown(self):
    gin.clear_config()
    super().tearDown()

  def parse(self, text, bindings=()):
    path = os.path.join(self.create_tempdir().full_path, "my_recipe.gin")
    with open(path, "w") as f:
      f.write(text)
    gin.clear_config()
    train.parse_config([path], list(bindings))
    return gin.query_parameter("Task.name")

  def test_the_file_names_the_recipe_unless_told(self):
    self.assertEqual(self.parse("Runtime.seed = 1\n"), "my_recipe")
    self.assertEqual(self.parse("Task.name = 'other'\n"), "other")
    self.assertEqual(self.parse("Runtime.seed = 1\n", ["Task.name = 'rho50'"]), "rho50")

  def test_a_file_of_ones_own_that_includes_a_recipe_keeps_its_name(self):
    self.assertEqual(self.parse("include 'recipes/nfnet_long_tail_digits.gin'\n"
                                "EPOCHS = 2\n"), "nfnet_long_tail_digits")
    self.assertEqual(self.parse("include 'recipes/configs/data/digits_lt.gin'\n"
                                "SEED = 1\nIMAGE_SIZE = 8\nCROP_PADDING = 0\n"),
                     "my_recipe")  # a piece is no recipe
    gin.clear_config()
    train.parse_config(["tests/recipes/configs/nfnet_long_tail_tiny.gin"], [])
    self.assertEqual(gin.query_parameter("Task.name"), "nfnet_long_tail_digits")

  def test_every_recipe_is_named(self):
    files = sorted(glob.glob("recipes/*.gin") + glob.glob("recipes/reproduce/*.gin"))
    self.assertLen(files, 36)
    for path in files:
      stem = os.path.splitext(os.path.basename(path))[0]
      gin.clear_config()
      required = ["DATA_DIR = '/x'", "CIFAR_DIR = '/x'", "LISTS_DIR = '/x'",
                  "MENON_DATA_DIR = '/x'", "IMAGENET_DIR = '/x'", "INAT_DIR = '/x'",
                  "PLACES_DIR = '/x'"]
      train.parse_config([path], required)  # the data locations a recipe leaves to you
      self.assertEqual(gin.query_parameter("Task.name"), NAMED.get(stem, stem), path)


if __name__ == "__main__":
  absltest.main()
