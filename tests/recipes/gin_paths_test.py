"""A recipe's Gin files resolve to the workspace's, never to same-named files under the
directory a command starts in (issue 57: a Gin file is a program): the recipe file a
target passes and every file it includes; a user's own file is found where they are."""

import os
from unittest import mock

from absl.testing import absltest
import gin

from recipes import train

RECIPE = "recipes/nfnet_long_tail_digits.gin"
PIECE = "recipes/configs/runs/nfnet.gin"  # included by RECIPE
PLANTED = "this is not the workspace's file (\n"


class GinPathsTest(absltest.TestCase):

  def setUp(self):
    super().setUp()
    self.user_dir = self.create_tempdir().full_path
    for path in (RECIPE, PIECE):
      os.makedirs(os.path.join(self.user_dir, os.path.dirname(path)), exist_ok=True)
      with open(os.path.join(self.user_dir, path), "w") as f:
        f.write(PLANTED)
    with open(os.path.join(self.user_dir, "mine.gin"), "w") as f:
      f.write(f"include '{RECIPE}'\nSEED = 7\n")
    cwd = os.getcwd()
    os.chdir(self.user_dir)
    self.addCleanup(os.chdir, cwd)
    patch = mock.patch.object(train, "_USER_DIR", self.user_dir)
    patch.start()
    self.addCleanup(patch.stop)
    self.addCleanup(gin.clear_config)

  def test_a_recipe_file_is_the_workspaces(self):
    self.assertEqual(train.resolve_gin_file(RECIPE),
                     os.path.join(train._RUNFILES_ROOT, RECIPE))  # pylint: disable=protected-access

  def test_its_includes_are_the_workspaces(self):
    gin.clear_config()
    train.parse_config([RECIPE], [])  # the planted copies are not Gin: reading one fails
    self.assertEqual(gin.query_parameter("Task.name"), "nfnet_long_tail_digits")

  def test_a_users_own_file_is_found_where_they_are(self):
    self.assertEqual(train.resolve_gin_file("mine.gin"),
                     os.path.join(self.user_dir, "mine.gin"))
    gin.clear_config()
    train.parse_config(["mine.gin"], [])
    self.assertEqual(gin.query_parameter("%SEED"), 7)


if __name__ == "__main__":
  absltest.main()
