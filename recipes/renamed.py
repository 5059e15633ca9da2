"""Gin names that were renamed: binding an old name is a ConfigError naming the new one.

Gin binds a macro nothing refers to without a word, so `--gin_bindings='TAU = 2.0'` (or
`TAU = 2.0` in a Gin file) after the rename would train with tau 1.0 as if never
written. `check()`, called once after parsing (recipes/train.py), refuses it instead.
A configurable's renamed parameter Gin itself refuses ("doesn't have a parameter");
`parameter_error` turns that into the same one line naming the new parameter.
"""

import re

import gin

from recipes.errors import ConfigError

# old name -> ((new name, what it is), ...): where an old name meant two things, each
# candidate; the error names the one the recipe has (or all, if it has none).
RENAMED = {
    "TAU": (("LOGIT_ADJUST_TAU", "the logit-adjusted loss's tau"),),
    "TAU_NORM": (("TAU_NORM_POWER", "the tau-normalised classifier's power tau"),),
    "WEIGHT_DECAY": (
        ("DECOUPLED_WEIGHT_DECAY",
         "tf_keras SGD's decoupled weight decay, w -= lr * wd * w: the NFNet pieces"),
        ("L2", "coupled weight decay, L2 * w added to the gradient (Optimization.l2): "
               "runs/pytorch_sgd.gin and brock2021_nfnet_f0_imagenet")),
    "STAGE2_WEIGHT_DECAY": (
        ("STAGE2_L2", "stage 2's coupled weight decay (stage2/Optimization.l2)"),),
    # A data set's location is a directory, one suffix (recipes/configs/data/).
    "CIFAR_PATH": (("CIFAR_DIR", "the directory holding CIFAR's python archive or the "
                                 "folder it unpacks to (the archive itself also does)"),),
    "IMAGENET_ROOT": (("IMAGENET_DIR", "the directory ImageNet-LT's list paths are under"),),
    "INAT_ROOT": (("INAT_DIR", "the directory iNaturalist 2018's list paths are under"),),
    "PLACES_ROOT": (("PLACES_DIR", "the directory Places-LT's list paths are under"),),
}


# configurable.old parameter -> (configurable.new parameter, what it is).
RENAMED_PARAMETERS = {
    "run.experiment": ("run.procedure", "what the recipe runs: @lr_range_test, @decoupled, "
                                        "or training and evaluation by default"),
}


def bound(parameter):
  """Whether the parsed config binds `parameter`: 'MACRO' or 'configurable.name'."""
  try:
    gin.query_parameter(parameter if "." in parameter else f"%{parameter}")
  except ValueError:
    return False
  return True


def parameter_error(message, renamed=None):
  """The ConfigError (one line) for Gin's error `message` if it refuses a renamed
  parameter, else None."""
  refused = re.search(r"Configurable '([\w.]+)' doesn't have a parameter named '(\w+)'",
                      message)
  if not refused:
    return None
  old = f"{refused.group(1).split('.')[-1]}.{refused.group(2)}"
  table = RENAMED_PARAMETERS if renamed is None else renamed
  if old not in table:
    return None
  new, what = table[old]
  return ConfigError(f"bad Gin config: {old} was renamed: bind {new} ({what}); {old} "
                     "itself is no longer read")


def check(renamed=None):
  """Raises ConfigError (one line) if the parsed config binds a renamed macro."""
  for old, candidates in (RENAMED if renamed is None else renamed).items():
    if not bound(old):
      continue
    used = [c for c in candidates if bound(c[0])] or list(candidates)
    names = " or ".join(f"{new} ({what})" for new, what in used)
    raise ConfigError(f"bad Gin config: {old} was renamed: bind {names}; {old} "
                      "itself is no longer read")
