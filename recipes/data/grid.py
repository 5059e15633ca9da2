"""A picture of a data set: a few training images of every class, a class a row.

    ./bazelw run //recipes/data:grid -- --out=/tmp/cifar10_grid.png [--directory=DIR]

draws `--per_class` training images of each class at random (`--seed`) from CIFAR-10
(`@cifar_png`: the installed copy, or --directory) and writes them as one PNG, each
row labelled with its class name, so a person can see at a glance that the images are
upright, in colour order and labelled as they should be (docs/images/cifar10_grid.png
is this command's output).
"""

import os

from absl import app
from absl import flags
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top,wrong-import-position
import numpy as np  # pylint: disable=g-import-not-at-top,wrong-import-position

from recipes import errors  # pylint: disable=g-import-not-at-top,wrong-import-position
from recipes.data import cifar_png  # pylint: disable=g-import-not-at-top,wrong-import-position

flags.DEFINE_string("out", None, "The PNG to write.")
flags.DEFINE_string("directory", None, "The CIFAR-10 copy (default: the installed one).")
flags.DEFINE_integer("per_class", 8, "Images a class.", lower_bound=1, upper_bound=64)
flags.DEFINE_integer("seed", 0, "Which images (numpy's default_rng).", lower_bound=0)


def choose(labels, per_class, seed, num_classes):
  """[num_classes, per_class] training indices: `per_class` of each class, drawn
  without replacement by `seed`, each row in ascending order."""
  rng = np.random.default_rng(seed)
  return np.stack([np.sort(rng.choice(np.flatnonzero(labels == c), per_class,
                                      replace=False)) for c in range(num_classes)])


def mosaic(images, chosen, gap=2):
  """The images at `chosen` ([rows, columns] indices) tiled, `gap` white pixels apart."""
  rows, columns = chosen.shape
  height, width = images.shape[1:3]
  out = np.full([rows * (height + gap) - gap, columns * (width + gap) - gap, 3], 255,
                np.uint8)
  for r in range(rows):
    for c in range(columns):
      out[r * (height + gap):r * (height + gap) + height,
          c * (width + gap):c * (width + gap) + width] = images[chosen[r, c]]
  return out


def main(argv):
  del argv
  out = flags.FLAGS.out
  if not out:
    errors.fail("--out: give the PNG to write, e.g. --out=/tmp/cifar10_grid.png")
  try:
    images, labels = cifar_png.load(flags.FLAGS.directory)["train"]
  except errors.ConfigError as e:
    errors.fail(str(e))
  chosen = choose(labels, flags.FLAGS.per_class, flags.FLAGS.seed,
                  len(cifar_png.CLASS_NAMES))
  picture = mosaic(images, chosen)
  scale = 0.04
  fig, ax = plt.subplots(figsize=(picture.shape[1] * scale + 1.3, picture.shape[0] * scale))
  ax.imshow(picture, interpolation="nearest")
  ax.set_yticks([r * 34 + 16 for r in range(len(cifar_png.CLASS_NAMES))],
                cifar_png.CLASS_NAMES, fontsize=8)
  ax.set_xticks([])
  for side in ax.spines.values():
    side.set_visible(False)
  fig.tight_layout()
  out = os.path.join(os.environ.get("BUILD_WORKING_DIRECTORY", "."), out)
  fig.savefig(out, dpi=100)
  print(f"wrote {out}: {flags.FLAGS.per_class} training images of each class, seed "
        f"{flags.FLAGS.seed}; row r is class r ({', '.join(cifar_png.CLASS_NAMES)})")


if __name__ == "__main__":
  app.run(main, flags_parser=errors.parse_flags)
