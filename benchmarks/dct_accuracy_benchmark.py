"""What DCT-scaled decoding costs in accuracy: the same training run with and without
`InputPipeline.random_resized_crop_dct_scaling`, paired by seed.

    ./bazelw run //benchmarks:dct_accuracy       # 3 seeds x 2 arms, about 8 minutes here

The data is the image-folder Fashion-MNIST: Zalando's 28 px images written as JPEG
folders (quality --quality; --train_per_class of every class of the training split,
of which Task.validation_per_class = --validation_per_class are held out, and
--test_per_class of the test split as `image_folder.test_root`). NFNet-nano
(recipes/nfnet_finetune.gin, from scratch) trains at --image_size on torchvision's
random resized crop (scale 0.08-1, its sampler): a crop box whose short side is at
least twice --image_size is decoded at 1/2 (1/4, 1/8) in libjpeg's IDCT when the switch
is on. At 10 px from 28 px images 41% of the boxes qualify (12 px: 13%, 14 px: none;
the JSON's `scaled_fraction`, counted over the sampler's own draws); at ImageNet's 224
from 500 x 375 none does (docs/input.md): a small image at a small size is where the
switch changes pixels at all here.

Runs are keyed (benchmarks/runs.py): a rerun reads finished runs. The verdict is the
paired t test over seeds (benchmarks/stats.py) on the validation split, which is what
a default would be chosen on; the test split's difference is reported beside it.
Writes dct_accuracy.json and dct_accuracy.md.
"""

import hashlib
import os
import shutil

from absl import app
from absl import flags
import numpy as np

from benchmarks import runs as runs_lib
from benchmarks import stats
from benchmarks import tables

RECIPE = "recipes/nfnet_finetune.gin"
ARMS = {"unscaled": False, "DCT-scaled": True}  # name: random_resized_crop_dct_scaling

FLAGS = flags.FLAGS
flags.DEFINE_string("fashion_mnist_dir", "/usr/share/datasets/fashion-mnist",
                    "Zalando's four Fashion-MNIST files (Debian's dataset-fashion-mnist).")
flags.DEFINE_integer("train_per_class", 400, "Training-split images a class written.",
                     lower_bound=2)
flags.DEFINE_integer("validation_per_class", 100, "Of those, held out for validation.",
                     lower_bound=1)
flags.DEFINE_integer("test_per_class", 500, "Test-split images a class written.",
                     lower_bound=1)
flags.DEFINE_integer("quality", 90, "JPEG quality of the written images.", lower_bound=1,
                     upper_bound=100)
flags.DEFINE_integer("image_size", 10, "Training and test resolution.", lower_bound=1)
flags.DEFINE_integer("epochs", 10, "Epochs of every run.", lower_bound=1)
flags.DEFINE_list("seeds", ["0", "1", "2"], "Seeds (SEED), each run in both arms.")
runs_lib.define_flags("runs/dct_accuracy_benchmark", "arm")
flags.adopt_module_key_flags(runs_lib)


def tree_key(images, labels, per_class, quality):
  """A short SHA-256 of what write_tree writes from: the first `per_class` images of
  every class, their labels and the quality. The folders are named by it, so a folder
  written from other data (another --fashion_mnist_dir) is never read back as this."""
  digest = hashlib.sha256(f"{per_class} {quality}".encode())
  for label in np.unique(labels):
    indices = np.flatnonzero(labels == label)[:per_class]
    digest.update(np.int64(label).tobytes() + indices.astype(np.int64).tobytes()
                  + np.ascontiguousarray(images[indices]).tobytes())
  return digest.hexdigest()[:16]


def write_tree(images, labels, per_class, folder, quality):
  """The first `per_class` images of every class as folder/<class>/<i>.jpg (grey JPEGs
  at `quality`), written beside and renamed into place: `folder` exists only whole."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  if os.path.isdir(folder):
    return folder
  chosen = {label: np.flatnonzero(labels == label)[:per_class] for label in np.unique(labels)}
  for label, indices in chosen.items():
    if len(indices) < per_class:
      runs_lib.fail(f"class {label} has {len(indices)} images, fewer than {per_class}: "
                    "ask for fewer a class")
  tmp = folder + ".tmp"
  shutil.rmtree(tmp, ignore_errors=True)
  for label, indices in chosen.items():
    os.makedirs(os.path.join(tmp, str(label)))
    for i in indices:
      grey = images[i][..., :1]
      with open(os.path.join(tmp, str(label), f"{i}.jpg"), "wb") as f:
        f.write(tf.io.encode_jpeg(grey, quality=quality).numpy())
  os.replace(tmp, folder)
  return folder


def scaled_fraction(image_size, side=28, draws=4000):
  """The fraction of the training sampler's boxes on a side x side image that the
  switch decodes scaled (augment.dct_ratio_index > 0), over `draws` seeds."""
  # pylint: disable=import-outside-toplevel
  import tensorflow as tf
  from recipes.data import augment
  from recipes.data import pipeline
  settings = pipeline.InputPipeline(image_size=image_size,
                                    random_resized_crop=(0.08, 1.0),
                                    random_resized_crop_sampler="torchvision")
  shape = tf.constant([side, side, 1])
  ratio_index = tf.function(lambda seed: augment.dct_ratio_index(
      augment.crop_box(settings, shape, seed)[1], image_size))
  scaled = [int(ratio_index(tf.constant([0, s], tf.int64))) > 0 for s in range(draws)]
  return float(np.mean(scaled))


def arm_run(arm, seed, trees, root):
  """The recipe run of `arm` at `seed` on the folders `trees` (train, test)."""
  size = FLAGS.image_size
  return runs_lib.Run(
      gin_files=(RECIPE,),
      bindings=("Runtime.export_saved_model = False", f"SEED = {seed}", "WEIGHTS = None",
                "Task.data = @image_folder", f"image_folder.root = {trees[0]!r}",
                f"image_folder.test_root = {trees[1]!r}", "NUM_CLASSES = 10",
                "SHOTS = None", f"Task.validation_per_class = {FLAGS.validation_per_class}",
                f"IMAGE_SIZE = {size}", "CROP_PADDING = 0",
                f"InputPipeline.eval_image_size = {size}",
                "InputPipeline.eval_crop_fraction = 1.0",
                "InputPipeline.random_resized_crop = (0.08, 1.0)",
                "InputPipeline.random_resized_crop_sampler = 'torchvision'",
                f"EPOCHS = {FLAGS.epochs}", *FLAGS.gin_bindings,
                f"InputPipeline.random_resized_crop_dct_scaling = {ARMS[arm]}"),
      model_dir=os.path.join(root, "runs", arm.lower(), f"seed{seed}"))


def summary(accuracies):
  """{split: paired comparison (DCT-scaled - unscaled) over seeds} from accuracies
  {arm: {split: {seed: accuracy}}}."""
  return {split: stats.compare_seeds(accuracies["DCT-scaled"][split],
                                     accuracies["unscaled"][split]).as_dict()
          for split in ("validation", "test")}


def seeds():
  if not FLAGS.seeds or any(not s.isdigit() for s in FLAGS.seeds) or len(
      set(FLAGS.seeds)) < 2:
    runs_lib.fail(f"--seeds={','.join(FLAGS.seeds)}: give two or more different whole "
                  "numbers, e.g. --seeds=0,1,2")
  return sorted({int(s) for s in FLAGS.seeds})


def main(argv):
  del argv
  chosen = seeds()
  if FLAGS.validation_per_class >= FLAGS.train_per_class:
    runs_lib.fail(f"--validation_per_class={FLAGS.validation_per_class} leaves no "
                  f"training image of --train_per_class={FLAGS.train_per_class}")
  from recipes.data import fashion_mnist  # pylint: disable=import-outside-toplevel
  from recipes.errors import ConfigError  # pylint: disable=import-outside-toplevel
  try:
    data = fashion_mnist.load(FLAGS.fashion_mnist_dir)
  except ConfigError as e:
    runs_lib.fail(str(e))
  root = os.path.abspath(FLAGS.out_dir or os.path.join(
      os.environ.get("BUILD_WORKING_DIRECTORY", "."), "runs", "dct_accuracy_benchmark"))
  trees = tuple(write_tree(*data[split], per_class, os.path.join(
      root, f"fashion_mnist_{split}_{per_class}_q{FLAGS.quality}_"
      f"{tree_key(*data[split], per_class, FLAGS.quality)}"), FLAGS.quality)
                for split, per_class in (("train", FLAGS.train_per_class),
                                         ("test", FLAGS.test_per_class)))
  digest = runs_lib.code_digest()
  accuracies = {arm: {"validation": {}, "test": {}} for arm in ARMS}
  for seed in chosen:
    for arm in ARMS:
      try:
        metrics, wall = runs_lib.train_timed(arm_run(arm, seed, trees, root), digest,
                                             rerun_stale=FLAGS.rerun_stale)
      except runs_lib.StaleRun as e:
        runs_lib.fail(str(e))
      accuracies[arm]["test"][seed] = metrics["balanced_accuracy"]
      accuracies[arm]["validation"][seed] = metrics["final_validation"]["balanced_accuracy"]
      print(f"{arm} seed {seed}: validation {accuracies[arm]['validation'][seed]:.4f}, "
            f"test {metrics['balanced_accuracy']:.4f} ({wall:.0f} s)", flush=True)
  results = {**runs_lib.provenance(), "code": digest, "image_size": FLAGS.image_size,
             "epochs": FLAGS.epochs,
             "train_per_class": FLAGS.train_per_class,
             "validation_per_class": FLAGS.validation_per_class,
             "test_per_class": FLAGS.test_per_class, "quality": FLAGS.quality,
             "scaled_fraction": scaled_fraction(FLAGS.image_size),
             "accuracies": accuracies, "difference": summary(accuracies)}
  text = tables.dct_accuracy(results)
  print(f"{text}\n(boxes decoded scaled: {results['scaled_fraction']:.1%} of the "
        "training crops)")
  runs_lib.write_results(root, "dct_accuracy", results, text)


if __name__ == "__main__":
  app.run(main)
