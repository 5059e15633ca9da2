"""recipes/renamed.py: a renamed Gin macro bound under its old name (a user's
--gin_bindings, or an old Gin file) is a ConfigError naming the new one, not a binding
nothing reads; no recipe binds an old name, and every new name is one a recipe binds."""

import glob
import os
import re

from absl.testing import absltest
from absl.testing import parameterized
import gin

from recipes import renamed
from recipes import train
from recipes.errors import ConfigError

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FLAGSHIP = "recipes/nfnet_long_tail.gin"
CAO = "recipes/reproduce/cao2019_cifar10_lt_r100_ce.gin"
CRT = "recipes/configs/runs/decoupled_crt.gin"
TAU_NORM = "recipes/configs/runs/decoupled_tau_norm.gin"


def gin_files():
  return sorted(glob.glob(os.path.join(ROOT, "recipes", "**", "*.gin"), recursive=True) +
                glob.glob(os.path.join(ROOT, "tests", "**", "*.gin"), recursive=True))


class RenamedTest(parameterized.TestCase):

  def tearDown(self):
    gin.clear_config()
    super().tearDown()

  @parameterized.parameters(
      # (files, the old binding, the error's pattern)
      ([FLAGSHIP], "TAU = 2.0",
       r"^bad Gin config: TAU was renamed: bind LOGIT_ADJUST_TAU \(the logit-adjusted "
       r"loss's tau\); TAU itself is no longer read$"),
      ([FLAGSHIP, TAU_NORM], "TAU_NORM = 1.0", r"TAU_NORM was renamed: bind TAU_NORM_POWER "),
      ([FLAGSHIP, CRT], "STAGE2_WEIGHT_DECAY = 0.0", r"renamed: bind STAGE2_L2 \(stage 2's"),
      # WEIGHT_DECAY meant two things: the error names the one the recipe has.
      ([FLAGSHIP], "WEIGHT_DECAY = 1e-4",
       r"bind DECOUPLED_WEIGHT_DECAY \(tf_keras SGD's decoupled [^)]*\); WEIGHT_DECAY itself"),
      ([CAO], "WEIGHT_DECAY = 1e-4", r"bind L2 \(coupled weight decay, [^;]*; WEIGHT_DECAY "),
      # A data set's location: one suffix, _DIR.
      ([CAO], "CIFAR_PATH = '/data/cifar-10-python.tar.gz'",
       r"^bad Gin config: CIFAR_PATH was renamed: bind CIFAR_DIR \(the directory holding "),
      ([FLAGSHIP], "IMAGENET_ROOT = '/data/imagenet'", r"IMAGENET_ROOT was renamed: bind "
       r"IMAGENET_DIR \(the directory ImageNet-LT's list paths are under\)"),
  )
  def test_an_old_name_is_an_error_naming_the_new(self, files, binding, pattern):
    # Before recipes/renamed.py this parsed, and the run trained with the recipe's value.
    with self.assertRaisesRegex(ConfigError, pattern):
      train.parse_config(files, ["DATA_DIR = '/x'", "CIFAR_DIR = '/x'", binding])

  def test_an_old_name_in_a_gin_file_is_an_error(self):
    path = os.path.join(self.create_tempdir().full_path, "mine.gin")
    with open(path, "w") as f:
      f.write(f"include '{FLAGSHIP}'\nTAU = 2.0\n")
    with self.assertRaisesRegex(ConfigError, "TAU was renamed: bind LOGIT_ADJUST_TAU"):
      train.parse_config([path], [])

  def test_a_renamed_parameter_is_an_error_naming_the_new(self):
    # Gin refuses the unknown parameter itself; the error names the new one.
    for where in ("binding", "file"):
      gin.clear_config()
      bindings = ["run.experiment = @lr_range_test"] if where == "binding" else []
      files = [FLAGSHIP]
      if where == "file":
        files = [os.path.join(self.create_tempdir().full_path, "old.gin")]
        with open(files[0], "w") as f:
          f.write(f"include '{FLAGSHIP}'\nrun.experiment = @lr_range_test\n")
      with self.assertRaisesRegex(ConfigError, r"^bad Gin config: run.experiment was "
                                  r"renamed: bind run.procedure \(what the recipe runs: "
                                  r"[^)]*\); run.experiment itself is no longer read$"):
        train.parse_config(files, bindings)
    gin.clear_config()
    train.parse_config([FLAGSHIP], ["run.procedure = @lr_range_test"])
    self.assertEqual(gin.query_parameter("run.procedure").selector, "lr_range_test")
    # Another unknown parameter keeps Gin's own message.
    self.assertIsNone(renamed.parameter_error(
        "Configurable 'run' doesn't have a parameter named 'foo'."))
    self.assertIn("run.procedure", str(renamed.parameter_error(
        "Configurable 'recipes.train.run' doesn't have a parameter named 'experiment'.")))

  def test_the_new_names_parse(self):
    train.parse_config([FLAGSHIP], ["LOGIT_ADJUST_TAU = 2.0", "DECOUPLED_WEIGHT_DECAY = 1e-4"])
    self.assertEqual(gin.query_parameter("%LOGIT_ADJUST_TAU"), 2.0)

  def test_only_the_wrong_name_on_a_config_with_neither(self):
    with gin.unlock_config():
      gin.bind_parameter("%OLD", 1)
    table = {"OLD": (("A", "one thing"), ("B", "another"))}
    with self.assertRaisesRegex(ConfigError, r"OLD was renamed: bind A \(one thing\) or B "
                                r"\(another\);"):
      renamed.check(table)
    renamed.check({"UNBOUND": (("A", "one thing"),)})

  def test_no_gin_file_binds_an_old_name_and_each_new_name_is_bound(self):
    files = gin_files()
    self.assertNotEmpty(files)
    text = {}
    for path in files:
      with open(path) as f:
        text[path] = f.read()
    for old, candidates in renamed.RENAMED.items():
      binds = re.compile(rf"^\s*{old}\s*=", re.M)
      self.assertEqual([p for p, t in text.items() if binds.search(t)], [], old)
      for new, _ in candidates:
        binds_new = re.compile(rf"^\s*{new}\s*=", re.M)
        self.assertTrue(any(binds_new.search(t) for t in text.values()), new)
    for old, (new, _) in renamed.RENAMED_PARAMETERS.items():
      binds = re.compile(rf"^\s*{re.escape(old)}\s*=", re.M)
      self.assertEqual([p for p, t in text.items() if binds.search(t)], [], old)
      binds_new = re.compile(rf"^\s*{re.escape(new)}\s*=", re.M)
      self.assertTrue(any(binds_new.search(t) for t in text.values()), new)


if __name__ == "__main__":
  absltest.main()
