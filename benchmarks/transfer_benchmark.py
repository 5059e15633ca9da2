"""Transfer learning on real images: a pretrained zoo model against training from
scratch and the linear probe, at k examples a class, with the noise:

    ./bazelw run //benchmarks:transfer                 # the full grid (see --help)
    ./bazelw run //benchmarks:transfer -- --quick      # NFNet-nano, k = 5, 3 arms

Source: each family (NFNet-nano, ResNet-50) is trained from scratch on five classes of
Fashion-MNIST (SOURCE_CLASSES: T-shirt/top, Pullover, Coat, Shirt, Bag; all their
training images less 100 a class of validation) and saved in the file a user downloads
for that family: DeepMind's flattened NFNet .npz (zoo/nfnet_checkpoint.py) or a Keras
Applications no-top .h5. Every pretrained arm reads it through `zoo.build.weights`
(with its SHA-256 pinned), the loading path of a downloaded file.

Targets: "near", the five Fashion-MNIST classes the source never saw (Trouser, Dress,
Sandal, Sneaker, Ankle boot: shoes are new to it), tested on their 5,000 test images;
"far", scikit-learn's 8x8 digits upsampled to the model's 32 px, tested on 70 a class.
Each run trains on a seeded k-shot draw of the target's training split (k a class,
`Task.examples_per_class`, drawn by SPLIT_SEED = the draw) after a validation hold-out,
with its own SEED (initialisation, augmentation, order): draws x seeds runs a cell, the
same (draw, seed) in every arm, so arms compare paired. The source is one run (SEED 0)
unless --source_per_run gives every (draw, seed) of the pretrained arms a source of its
own: then no two runs of a cell share a source, as none share a (draw, seed), and its
interval covers the source's seed as well.

Arms (the fine-tune recipe's switches, recipes/configs/{models,runs}/finetune.gin): scratch (no
weights), linear probe (FREEZE_BACKBONE), full fine-tune, two phases (HEAD_EPOCHS = a
third of the run, then all at 0.1x), layer-wise rate decay 0.75 (LAYER_DECAY), weight
EMA (WEIGHT_EMA, 0.99), BiT-HyperRule (its own length, rate and 128 px resolution).
Every arm but BiT trains the recipe's rate for about --steps (100) steps at batch 20
(a small draw echoed before augmentation to fill an epoch of 10 batches). Nothing is
chosen on the test split: by default nothing is chosen at all (the recipe's rate and
this fixed length); with --learning_rates every arm of a cell runs each rate on the
same (draw, seed) pairs and reports the rate of the highest mean validation accuracy
(`choose_rates`), its choice table beside the test table.

Runs are keyed (benchmarks/runs.py): a rerun reads finished runs of the same
configuration and code, resumes interrupted ones, refuses stale ones (--rerun_stale).
Beside the runs, a reference that trains nothing: the nearest class mean in raw pixels
over 50 random k-shot draws of each target (how far a target is solvable from its
pixels alone). Writes transfer.json (every run's figures, the command, date, machine),
transfer.md (the tables, rendered from that JSON alone: benchmarks/tables.py) and
transfer.png (test accuracy against k, one line an arm).
"""

import dataclasses
import datetime
import os
import re
import shlex
import shutil
import sys
import time

from absl import app
from absl import flags

from benchmarks import runs as runs_lib
from benchmarks import tables

SOURCE_CLASSES = (0, 2, 4, 6, 8)
NEAR_CLASSES = (1, 3, 5, 7, 9)
CLASSES_GIN = "recipes/configs/data/fashion_mnist_classes.gin"
STEPS = 100
BATCH = 20
DEFAULT_SHOTS = (1, 5, 10, 50)


@dataclasses.dataclass(frozen=True)
class Family:
  """A zoo family: its fine-tune recipe, the file format its users download, and the
  source run's rate and length (batch 128)."""
  recipe: str
  weights_file: str
  source_learning_rate: float
  source_epochs: int


FAMILIES = {
    "nfnet_nano": Family("recipes/nfnet_finetune.gin", "nfnet_nano_source.npz", 0.2, 8),
    # 4 epochs (452 s on the 2-core machine): every ResNet-50 figure in docs/zoo.md
    # reads this source, and a longer one would mean rerunning each of them.
    "resnet50": Family("recipes/resnet50_finetune.gin", "resnet50_source_notop.h5", 0.1,
                       4),
}
TARGETS = ("near", "far")
SCRATCH, LINEAR = "scratch", "linear probe"
ARMS = (SCRATCH, LINEAR, "full fine-tune", "two phases", "layer decay 0.75", "weight EMA",
        "BiT-HyperRule")
SHORT = {SCRATCH: "scratch", LINEAR: "linear", "full fine-tune": "full",
         "two phases": "two_phase", "layer decay 0.75": "layer_decay",
         "weight EMA": "ema", "BiT-HyperRule": "bit"}
QUICK = dict(families=("nfnet_nano",), targets=TARGETS, shots=(5,),
             arms=(SCRATCH, LINEAR, "full fine-tune"), draws=(0,), seeds=(0,),
             independent=False)
COMMON = ("Runtime.export_saved_model = False",)
RECIPE_RATE = "recipe"  # --learning_rates' name of the recipe's own rate (no binding)


def length(k, num_classes, steps=STEPS, batch=BATCH, epoch_steps=10):
  """(echo factor, epochs) of a k-shot run of about `steps` steps at `batch`: a small
  training set is echoed before augmentation (InputPipeline.echo_factor, each copy
  augmented anew) to about `epoch_steps` batches an epoch, so that neither the batch
  nor the evaluation's batches shrink with k, and a run is not 100 one-step epochs."""
  n = k * num_classes
  epoch_steps = min(epoch_steps, max(1, steps // 3))  # two phases need 3 epochs or more
  echo = max(1, -(-epoch_steps * batch // n))
  return echo, max(1, round(steps / (n * echo // batch)))


def arm_run(arm, epochs, steps=STEPS):
  """(Gin files added, bindings) of an arm."""
  if arm == "BiT-HyperRule":  # its rule: 500 steps below 20k images, scaled to `steps`
    return (["recipes/configs/runs/bit_hyperrule.gin"],
            [f"BIT_SCHEDULE_SCALE = {steps / 500:g}"])
  return [], {
      SCRATCH: ["WEIGHTS = None"],
      LINEAR: ["FREEZE_BACKBONE = True"],
      "full fine-tune": [],
      "two phases": [f"HEAD_EPOCHS = {max(1, epochs // 3)}"],
      "layer decay 0.75": ["LAYER_DECAY = 0.75"],
      "weight EMA": ["WEIGHT_EMA = True"],
  }[arm]


def target_bindings(target, k, draw, fashion_dir):
  """(Gin files added, bindings) of a target's k-shot draw."""
  if target == "near":
    return [CLASSES_GIN], [f"FASHION_MNIST_DIR = {fashion_dir!r}",
                           f"CLASSES = {NEAR_CLASSES}", f"NUM_CLASSES = {len(NEAR_CLASSES)}",
                           f"SHOTS = {k}", f"SPLIT_SEED = {draw}"]
  # The fine-tune recipes' own few-shot digits, with a validation hold-out of 10 a class.
  return [], ["Task.validation_per_class = 10", f"SHOTS = {k}", f"SPLIT_SEED = {draw}"]


def source_seed(draw, seed):
  """The source's SEED of the run (draw, seed) under --source_per_run: Cantor's pairing
  of the two, a different source for every pair and 0, the shared source's, for (0, 0)."""
  return (draw + seed) * (draw + seed + 1) // 2 + seed


def source_run(name, root, fashion_dir, epochs=None, extra=(), seed=0):
  """The source's pretraining run: `name` from scratch on SOURCE_CLASSES, batch 128,
  with SEED = `seed` (initialisation, order and the validation hold-out's draw)."""
  family = FAMILIES[name]
  return runs_lib.Run(
      gin_files=(family.recipe, CLASSES_GIN),
      bindings=(*COMMON, f"SEED = {seed}", f"FASHION_MNIST_DIR = {fashion_dir!r}",
                f"CLASSES = {SOURCE_CLASSES}", f"NUM_CLASSES = {len(SOURCE_CLASSES)}",
                "WEIGHTS = None", "BATCH_SIZE = 128",
                f"LEARNING_RATE = {family.source_learning_rate}",
                f"EPOCHS = {epochs or family.source_epochs}", *extra),
      model_dir=os.path.join(root, "source", name if seed == 0 else f"{name}_seed{seed}"))


@dataclasses.dataclass(frozen=True)
class Sitting:
  """What target runs share: where runs go, the Fashion-MNIST folder, the source's
  file, its SHA-256 and its seed, the steps of a run and the bindings added to every
  run."""
  root: str
  fashion_dir: str
  weights: str = None
  sha256: str = None
  steps: int = STEPS
  extra: tuple = ()
  source_seed: int = 0


def target_run(name, target, k, arm, draw, seed, sitting, rate=RECIPE_RATE):
  """The run of one cell's (draw, seed) in `sitting`, at the recipe's rate or at
  `rate` (LEARNING_RATE, in a folder of its own); a pretrained arm's run from a source
  of another seed than 0 in a folder of its own too."""
  family = FAMILIES[name]
  files, data = target_bindings(target, k, draw, sitting.fashion_dir)
  num_classes = len(NEAR_CLASSES) if target == "near" else 10
  echo, epochs = length(k, num_classes, sitting.steps)
  arm_files, arm_bindings = arm_run(arm, epochs, sitting.steps)
  pretrained = [f"WEIGHTS = {sitting.weights!r}",
                f"zoo.build.weights_sha256 = {sitting.sha256!r}"]
  return runs_lib.Run(
      gin_files=(family.recipe, *files, *arm_files),
      bindings=(*COMMON, f"SEED = {seed}", *data, f"BATCH_SIZE = {BATCH}",
                f"InputPipeline.echo_factor = {echo}", f"EPOCHS = {epochs}",
                f"Runtime.checkpoint_every_epochs = {epochs}",
                *([] if arm == SCRATCH else pretrained), *sitting.extra,
                *([] if rate == RECIPE_RATE else [f"LEARNING_RATE = {rate!r}"]),
                *arm_bindings),
      model_dir=os.path.join(sitting.root, name, target, f"k{k}", SHORT[arm],
                             *([] if rate == RECIPE_RATE else [f"lr{rate!r}"]),
                             f"draw{draw}_seed{seed}" + (
                                 f"_source{sitting.source_seed}"
                                 if sitting.source_seed and arm != SCRATCH else "")))


def choose_rates(runs, rates):
  """(chosen runs, choices): for every (family, target, k, arm) of `runs` (records with
  a "learning_rate"), the rate in `rates` whose runs have the highest mean validation
  accuracy (the first in `rates` on a tie), and that rate's runs. Test accuracy plays
  no part. A choice is only made among rates with the same (draw, seed) pairs."""
  cells = {}
  for r in runs:
    cells.setdefault((r["family"], r["target"], r["k"], r["arm"]), []).append(r)
  chosen, choices = [], []
  for (family, target, k, arm), cell in cells.items():
    by_rate = {rate: [r for r in cell if r["learning_rate"] == rate] for rate in rates}
    if not all(by_rate.values()):
      raise ValueError(f"{family} {target} k={k} {arm}: no runs at rate(s) "
                       f"{[rate for rate, rs in by_rate.items() if not rs]}")
    pairs_of = {rate: sorted((r["draw"], r["seed"]) for r in rs)
                for rate, rs in by_rate.items()}
    if len({tuple(p) for p in pairs_of.values()}) != 1:
      raise ValueError(f"{family} {target} k={k} {arm}: the rates ran different "
                       f"(draw, seed) pairs: {pairs_of}")
    if any(r.get("validation_balanced_accuracy") is None for r in cell):
      raise ValueError(f"{family} {target} k={k} {arm}: a run has no validation "
                       "accuracy to choose a rate on")
    validation = {rate: sum(r["validation_balanced_accuracy"] for r in rs) / len(rs)
                  for rate, rs in by_rate.items()}
    best = max(validation, key=lambda rate: (validation[rate], -rates.index(rate)))
    chosen += by_rate[best]
    choices.append({"family": family, "target": target, "k": k, "arm": arm,
                    "runs": len(by_rate[best]), "validation": validation,
                    "chosen": best})
  return chosen, choices


def export_source(name, model_dir, path):
  """Writes the source run's final weights, without its head, in the family's user
  format at `path` (atomically); returns its SHA-256."""
  # pylint: disable=import-outside-toplevel
  import tf_keras
  from zoo import finetune
  from zoo import nfnet_checkpoint
  from zoo import pretrained
  from zoo import registry
  model = registry.build(name, num_classes=len(SOURCE_CLASSES), input_shape=(None, None, 3))
  finetune.init_from_checkpoint(model, runs_lib.final_checkpoint(model_dir), scope="all")
  if path.endswith(".npz"):
    nfnet_checkpoint.save_npz(model, path, head=False)
  else:  # Keras Applications' no-top file: the application up to its average pool
    tmp = path + ".tmp.h5"
    tf_keras.Model(model.inputs, model.get_layer("avg_pool").output).save_weights(tmp)
    os.replace(tmp, path)
  return pretrained.sha256_of(path)


def target_arrays(target, fashion_dir):
  """(train images, train labels, test images, test labels) of a target as the runs
  see them before any draw: grey pixels in 0..1, flattened."""
  # pylint: disable=import-outside-toplevel
  import numpy as np
  if target == "near":
    from recipes.data import fashion_mnist
    # Unchecked here: the runs of this command read the same files checked (or not, as
    # their bindings say), so the reference does not parse the bindings again.
    kept = fashion_mnist.keep_classes(fashion_mnist.load(fashion_dir, md5=None),
                                      NEAR_CLASSES)
    (train_x, train_y), (test_x, test_y) = kept["train"], kept["test"]
  else:
    from recipes.data import digits
    from recipes.data import source
    images, labels = digits.load_arrays()
    train, test = source.balanced_holdout(labels, 70, 0)  # the recipes' digits test
    train_x, train_y, test_x, test_y = images[train], labels[train], images[test], labels[test]
  flat = lambda x: x[..., 0].reshape(len(x), -1).astype(np.float32) / 255.0
  return flat(train_x), train_y, flat(test_x), test_y


def pixel_centroid(arrays, k, draws=50, seed=0):
  """Test accuracies of the nearest class mean in raw pixels (no training, no model)
  over `draws` random k-shot draws: how far a target is solvable from its pixels."""
  # pylint: disable=import-outside-toplevel
  import numpy as np
  train_x, train_y, test_x, test_y = arrays
  classes = np.unique(train_y)
  rng = np.random.default_rng(seed)
  accuracies = []
  for _ in range(draws):
    means = np.stack([train_x[rng.choice(np.flatnonzero(train_y == c), k, replace=False)]
                      .mean(axis=0) for c in classes])
    distances = ((test_x ** 2).sum(1)[:, None] - 2 * test_x @ means.T
                 + (means ** 2).sum(1)[None, :])
    accuracies.append(float(np.mean(classes[distances.argmin(1)] == test_y)))
  return accuracies


def record(metrics, wall):
  """What the JSON keeps of a run."""
  return {"balanced_accuracy": metrics.get("balanced_accuracy"),
          "top1": metrics.get("top1"),
          "validation_balanced_accuracy": (metrics.get("final_validation") or {}).get(
              "balanced_accuracy"),
          "num_test_examples": metrics.get("num_test_examples"),
          "train_class_counts": metrics.get("train_class_counts"),
          "steps": metrics.get("steps"), "final_train_loss": metrics.get("final_train_loss"),
          "wall_seconds": wall}


def plot(results, path):
  """Test accuracy against k (log scale), one line an arm (mean and its 95% interval),
  a panel a family and target."""
  # pylint: disable=import-outside-toplevel
  import matplotlib
  matplotlib.use("Agg")
  from matplotlib import pyplot
  panels = sorted({(r["family"], r["target"]) for r in results["runs"]},
                  key=lambda p: (results["families"].index(p[0]),
                                 results["targets"].index(p[1])))
  figure, axes = pyplot.subplots(1, len(panels), figsize=(5.2 * len(panels), 4.2),
                                 squeeze=False)
  for axis, (family, target) in zip(axes[0], panels):
    for arm in results["arms"]:
      points = [(k, tables.interval(tables.cell_values(results, family, target, k, arm)))
                for k in results["shots"]]
      points = [(k, i) for k, i in points if i is not None]
      if not points:
        continue
      ks = [k for k, _ in points]
      means = [i[0] for _, i in points]
      errors = [[i[0] - i[1] for _, i in points], [i[2] - i[0] for _, i in points]]
      axis.errorbar(ks, means, yerr=errors, marker="o", capsize=3, label=arm)
    reference = results.get("pixel_centroid", {}).get(target, {})
    points = [(k, tables.interval(dict(enumerate(reference[str(k)]))))
              for k in results["shots"] if str(k) in reference]
    if points:
      axis.plot([k for k, _ in points], [i[0] for _, i in points], "--", color="0.5",
                label="raw-pixel nearest class mean (no training)")
    axis.set_xscale("log")
    axis.set_xticks(results["shots"], [str(k) for k in results["shots"]])
    axis.set_xlabel("training images a class (k)")
    axis.set_ylabel("test accuracy (balanced test split)")
    axis.set_title(f"{family}, {target} target", fontsize=10, loc="left")
    axis.grid(alpha=0.3)
    axis.legend(fontsize=7)
  figure.suptitle("Mean over draws x seeds, bars: 95% t interval of the mean", fontsize=9)
  figure.tight_layout()
  figure.savefig(path, dpi=110, bbox_inches="tight")
  pyplot.close(figure)


# --- The command --------------------------------------------------------------------

FLAGS = flags.FLAGS
flags.DEFINE_boolean("quick", False, "NFNet-nano, both targets, k = 5, scratch / linear "
                     "probe / full fine-tune, draw 0 seed 0 (about 10 minutes).")
# The default grid is docs/zoo.md's table (NFNet-nano, 180 runs, about 80 minutes on 2
# cores); its arm comparison (--shots=10 with every arm) and ResNet-50 are flags away.
flags.DEFINE_list("families", ["nfnet_nano"], f"Zoo families: {', '.join(FAMILIES)}.")
flags.DEFINE_list("targets", list(TARGETS), "near (unseen Fashion-MNIST classes), far "
                  "(digits).")
flags.DEFINE_list("shots", [str(k) for k in DEFAULT_SHOTS], "Training images a class (k).")
flags.DEFINE_list("arms", ["scratch", "linear", "full"],
                  f"Arms: {', '.join(SHORT.values())}.")
flags.DEFINE_list("draws", ["0", "1", "2"], "k-shot draws (SPLIT_SEED) of every cell.")
flags.DEFINE_list("seeds", ["0", "1", "2"], "Seeds (SEED) of every draw.")
flags.DEFINE_boolean("independent_runs", False, "Run each draw under the seed of its "
                     "own number (draw = seed; at k > 10 the first --large_k_runs): no "
                     "two runs of a cell share a draw or a seed, so the paired t's n - 1 "
                     "degrees of freedom hold whatever the draw's effect (e.g. "
                     "--draws=0,1,2,3,4,5,6,7,8: nine runs a cell); --seeds is then not "
                     "given.")
flags.DEFINE_integer("large_k_runs", 3, "Runs a cell at the largest k when more than "
                     "10 a class: the first (draw, seed) pairs, draw = seed.", lower_bound=1)
flags.DEFINE_string("fashion_mnist_dir", "/usr/share/datasets/fashion-mnist",
                    "Zalando's four Fashion-MNIST files (Debian's dataset-fashion-mnist).")
flags.DEFINE_integer("steps", STEPS, "Steps of a target run (about: whole epochs).",
                     lower_bound=3)
flags.DEFINE_list("learning_rates", [RECIPE_RATE], "Target runs' rates, each positive "
                  f"or '{RECIPE_RATE}' (the recipe's own, no binding): with more than one, "
                  "every arm of a cell runs each and reports the one of the best mean "
                  "validation accuracy.")
flags.DEFINE_boolean("keep_checkpoints", False, "Keep every target run's checkpoints "
                     "(ResNet-50: about 360 MB a run); by default a finished target run "
                     "keeps its metrics and configuration alone (the source keeps its own).")
flags.DEFINE_boolean("source_per_run", False, "Give every (draw, seed) run of a "
                     "pretrained arm a source of its own (SEED = source_seed(draw, seed); "
                     "(0, 0) keeps the shared source), so that a cell's interval covers "
                     "the source's seed too; a source costs a source run (NFNet-nano: about "
                     "3 minutes, ResNet-50: 8 to 13, by CPU).")
flags.DEFINE_integer("source_epochs", None, "Epochs of every source run (default: the "
                     "family's).", lower_bound=1)
runs_lib.define_flags("runs/transfer_benchmark", "arm")
flags.adopt_module_key_flags(runs_lib)


def whole_numbers(flag, values, low):
  if not values or any(not re.fullmatch(r"\d+", v) or int(v) < low for v in values) or (
      len({int(v) for v in values}) < len(values)):
    runs_lib.fail(f"--{flag}={','.join(values)}: give distinct whole numbers >= {low}, "
                  f"e.g. --{flag}=0,1,2")
  return tuple(int(v) for v in values)


def known(flag, values, choices):
  unknown = [v for v in values if v not in choices]
  if unknown or not values:
    runs_lib.fail(f"--{flag}={','.join(values)}: choose from {', '.join(choices)}")
  return tuple(values)


def learning_rates(values, arms):
  """--learning_rates as (RECIPE_RATE or positive floats, ...), each once."""
  rates = []
  for v in values:
    try:
      rate = v if v == RECIPE_RATE else float(v)
    except ValueError:
      rate = None
    if rate is None or (rate != RECIPE_RATE and not 0 < rate < float("inf")) or (
        rate in rates):
      runs_lib.fail(f"--learning_rates={','.join(values)}: give distinct positive rates or "
                    f"'{RECIPE_RATE}', e.g. --learning_rates={RECIPE_RATE},0.001")
    rates.append(rate)
  if not rates:
    runs_lib.fail(f"--learning_rates is empty: give e.g. --learning_rates={RECIPE_RATE}")
  if rates != [RECIPE_RATE] and "BiT-HyperRule" in arms:
    runs_lib.fail("--arms=bit sets its own rate (BiT-HyperRule): leave it out of a "
                  f"--learning_rates other than {RECIPE_RATE}")
  return tuple(rates)


def chosen():
  """The grid: families, targets, shots, arms, draws, seeds, learning rates."""
  if FLAGS.quick:
    if FLAGS.learning_rates != [RECIPE_RATE]:
      runs_lib.fail("--quick runs the recipe's rate: leave out --learning_rates, or give "
                    "the grid's flags in place of --quick")
    if FLAGS.independent_runs:
      runs_lib.fail("--quick runs one run a cell: leave out --independent_runs")
    return dict(QUICK, rates=(RECIPE_RATE,))
  if FLAGS.independent_runs and FLAGS["seeds"].present:
    runs_lib.fail("--independent_runs runs each draw under the seed of its own number "
                  "(draw = seed): leave out --seeds")
  by_short = {s: a for a, s in SHORT.items()}
  arms = tuple(by_short[a] for a in known("arms", FLAGS.arms, list(by_short)))
  draws = whole_numbers("draws", FLAGS.draws, 0)
  return dict(families=known("families", FLAGS.families, list(FAMILIES)),
              targets=known("targets", FLAGS.targets, list(TARGETS)),
              shots=tuple(sorted(set(whole_numbers("shots", FLAGS.shots, 1)))),
              arms=arms, draws=draws,
              seeds=draws if FLAGS.independent_runs else whole_numbers(
                  "seeds", FLAGS.seeds, 0),
              rates=learning_rates(FLAGS.learning_rates, arms),
              independent=FLAGS.independent_runs)


def pairs(grid, k):
  """The (draw, seed) runs of a cell: every pair (with --independent_runs those with
  draw = seed), or at a large k (> 10) the first --large_k_runs with draw = seed."""
  every = [(d, s) for d in grid["draws"] for s in grid["seeds"]]
  diagonal = [(d, d) for d in grid["draws"] if d in grid["seeds"]]
  if k <= 10:
    return diagonal if grid["independent"] else every
  return (diagonal or every)[:FLAGS.large_k_runs]


def main(argv):
  del argv
  grid = chosen()
  if not os.path.isdir(FLAGS.fashion_mnist_dir):
    runs_lib.fail(f"--fashion_mnist_dir={FLAGS.fashion_mnist_dir!r} is not a directory: "
                  "install Debian's dataset-fashion-mnist or give the folder of "
                  "Zalando's four files")
  root = os.path.abspath(FLAGS.out_dir or os.path.join(
      os.environ.get("BUILD_WORKING_DIRECTORY", "."), "runs", "transfer_benchmark"))
  digest = runs_lib.code_digest()
  results = {"benchmark": "transfer", "steps": FLAGS.steps, "batch": BATCH,
             "source_classes": list(SOURCE_CLASSES), "near_classes": list(NEAR_CLASSES),
             "families": list(grid["families"]), "targets": list(grid["targets"]),
             "shots": list(grid["shots"]), "extra_bindings": FLAGS.gin_bindings,
             "arms": list(grid["arms"]), "learning_rates": list(grid["rates"]),
             "draws": list(grid["draws"]), "seeds": list(grid["seeds"]),
             "independent_runs": grid["independent"],
             "command": "./bazelw run //benchmarks:transfer -- " + " ".join(
                 shlex.quote(a) for a in sys.argv[1:]),
             "date": datetime.date.today().isoformat(), "machine": runs_lib.machine(),
             "load_average_before": [round(x, 2) for x in os.getloadavg()],
             "code": digest, "revision": runs_lib.revision(), "sources": {}, "runs": [],
             "pixel_centroid": {}}
  sitting = Sitting(root, FLAGS.fashion_mnist_dir, steps=FLAGS.steps,
                    extra=tuple(FLAGS.gin_bindings))
  began = time.time()

  def train(run):
    try:
      return runs_lib.train_timed(run, digest, rerun_stale=FLAGS.rerun_stale)
    except runs_lib.StaleRun as e:
      runs_lib.fail(str(e))

  for name in grid["families"]:
    sources = pretrain_all(name, grid, sitting, train, began)
    results["sources"][name] = sources[min(sources)]
    if FLAGS.source_per_run:
      results.setdefault("source_runs", {})[name] = {str(s): r for s, r in sources.items()}

    def sitting_of(draw, seed, sources=sources):
      source = sources[source_seed(draw, seed) if FLAGS.source_per_run else 0]
      return dataclasses.replace(sitting, weights=source["weights"], sha256=source["sha256"],
                                 source_seed=source["source_seed"])
    results["runs"] += fine_tune(name, grid, sitting_of, train, began)
  for target in grid["targets"]:
    arrays = target_arrays(target, FLAGS.fashion_mnist_dir)
    results["pixel_centroid"][target] = {str(k): pixel_centroid(arrays, k)
                                         for k in grid["shots"]}
  if grid["rates"] != (RECIPE_RATE,):  # the table's runs: each arm at its chosen rate
    results["rate_runs"] = results["runs"]
    try:
      results["runs"], results["rate_choices"] = choose_rates(results["rate_runs"],
                                                              list(grid["rates"]))
    except ValueError as e:
      runs_lib.write_results(root, "transfer", results, "")  # every run kept, unchosen
      runs_lib.fail(str(e))
  results["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
  write(results, root)


def fine_tune(name, grid, sitting_of, train, began):
  """The records of family `name`'s target runs of `grid` (trained by `train`, or read
  back), in the order of the table: target, k, arm, rate, (draw, seed); `sitting_of`
  gives the Sitting, the source above all, of a (draw, seed)."""
  records = []
  for target in grid["targets"]:
    for k in grid["shots"]:
      for arm in grid["arms"]:
        for rate in grid["rates"]:
          for draw, seed in pairs(grid, k):
            sitting = sitting_of(draw, seed)
            run = target_run(name, target, k, arm, draw, seed, sitting, rate)
            metrics, wall = train(run)
            if not FLAGS.keep_checkpoints:  # finished: its metrics are all a rerun reads
              shutil.rmtree(os.path.join(run.model_dir, "checkpoints"), ignore_errors=True)
            records.append({"family": name, "target": target, "k": k, "arm": arm,
                            "learning_rate": rate, "draw": draw, "seed": seed,
                            "source_seed": None if arm == SCRATCH else sitting.source_seed,
                            **record(metrics, wall)})
            print(f"{name} {target} k={k} {arm} rate {rate} draw {draw} seed {seed}: "
                  f"{metrics['balanced_accuracy']:.3f} ({time.time() - began:.0f} s so far)",
                  flush=True)
  return records


def pretrain_all(name, grid, sitting, train, began):
  """{source seed: pretrain's record} of the sources family `name`'s runs of `grid`
  read: seed 0's alone, or under --source_per_run one a (draw, seed)."""
  sources = {}
  for seed in sorted({source_seed(d, s) if FLAGS.source_per_run else 0
                      for k in grid["shots"] for d, s in pairs(grid, k)}):
    sources[seed] = source = pretrain(name, sitting, train, seed)
    print(f"source {name} seed {seed}: test accuracy {source['balanced_accuracy']:.3f} on "
          f"the source classes; weights {source['weights']} "
          f"({time.time() - began:.0f} s so far)", flush=True)
  return sources


def pretrain(name, sitting, train, seed=0):
  """The source run of family `name` at SEED `seed` (trained by `train`, or read back)
  and its file in the family's download format: record, weights path, SHA-256, seed."""
  run = source_run(name, sitting.root, sitting.fashion_dir, FLAGS.source_epochs,
                   sitting.extra, seed)
  metrics, wall = train(run)
  path = os.path.join(run.model_dir, FAMILIES[name].weights_file)
  if os.path.exists(path):  # written from this keyed run's final checkpoint
    from zoo import pretrained  # pylint: disable=import-outside-toplevel
    sha256 = pretrained.sha256_of(path)
  else:  # (a file's zip or HDF5 headers hold the time: written once)
    sha256 = export_source(name, run.model_dir, path)
  return {**record(metrics, wall), "weights": path, "sha256": sha256, "source_seed": seed}


BY_DRAW = ("The same paired differences with a draw's seeds as one unit: over the runs "
           "(n - 1 df, the table above) and over the draws' means (draws - 1 df), which "
           "holds however much the k-shot draw moves a difference.")


def write(results, root):
  """Prints the tables and writes transfer.json, transfer.md and transfer.png."""
  by_draw = tables.transfer_by_draw(results)
  text = (tables.transfer_caption(results) + "\n\n" + tables.transfer(results) + "\n\n"
          + (BY_DRAW + "\n\n" + by_draw + "\n\n" if by_draw.count("\n") > 1 else "")
          + (tables.transfer_rates(results) + "\n\n" if "rate_choices" in results else "")
          + tables.pixel_centroid(results))
  print(text)
  runs_lib.write_results(root, "transfer", results, text)
  plot(results, os.path.join(root, "transfer.png"))
  print(f"Raw results, table and plot in {root} (transfer.json, transfer.md, transfer.png)")


if __name__ == "__main__":
  app.run(main)
