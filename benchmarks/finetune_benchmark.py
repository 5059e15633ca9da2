"""A fine-tuning recipe against the same recipe from scratch and its linear probe, on
the recipe's own split, over seeds: the figures a run of the recipe prints beside its
own (recipes/baselines.py).

    ./bazelw run //benchmarks:finetune          # efficientnet_lite0_finetune, seeds 0-2

Arms, each the recipe as it stands plus one binding: "fine-tune" (none), "scratch"
(WEIGHTS = None: the same network, schedule and data, randomly initialised), "linear
probe" (FREEZE_BACKBONE = True: the new head alone on the frozen pretrained features,
BatchNorm in inference mode, at the recipe's schedule). Every arm trains on the
recipe's one k-shot draw (its SPLIT_SEED) with SEED = the seed (initialisation,
augmentation, order), so the arms are paired by seed. Verdicts: benchmarks/stats.py's
paired t over the seeds, fine-tune against each of the other two, Bonferroni-corrected
over those two comparisons (each interval at 97.5%).

Runs are keyed (benchmarks/runs.py): a rerun reads finished runs of the same
configuration and code and resumes interrupted ones. Each sitting writes a new
<recipe>_<revision>_<date>[_n].json under --record_dir (never one written before),
naming the command, revision, date, machine and the load during every run.
"""

import datetime
import os
import re
import shutil
import sys

from absl import app
from absl import flags

from benchmarks import records
from benchmarks import runs as runs_lib
from benchmarks import tables

FINE_TUNE, SCRATCH, PROBE = tables.FINETUNE_ARM, "scratch", "linear probe"
ARMS = {FINE_TUNE: (), SCRATCH: ("WEIGHTS = None",), PROBE: ("FREEZE_BACKBONE = True",)}
RECIPES = ("efficientnet_lite0_finetune",)
COMMON = ("Runtime.export_saved_model = False",)
RECORD_DIR = os.path.join(runs_lib.ROOT, "docs", "data", "finetune")

FLAGS = flags.FLAGS
flags.DEFINE_enum("recipe", RECIPES[0], RECIPES, "The fine-tuning recipe.")
flags.DEFINE_list("seeds", ["0", "1", "2"], "SEEDs, the same in every arm.")
flags.DEFINE_string("record_dir", RECORD_DIR, "Where the sitting's JSON goes.")
runs_lib.define_flags("runs/finetune_benchmark", "arm")


def arm_run(recipe, arm, seed, root, extra=()):
  """The run of `arm` at SEED `seed`."""
  folder = {FINE_TUNE: "finetune", SCRATCH: "scratch", PROBE: "probe"}[arm]
  return runs_lib.Run(gin_files=(f"recipes/{recipe}.gin",),
                      bindings=(*COMMON, f"SEED = {seed}", *extra, *ARMS[arm]),
                      model_dir=os.path.join(root, recipe, folder, f"seed{seed}"))


def record(metrics, wall, load):
  """What the JSON keeps of a run."""
  keep = ("balanced_accuracy", "top1", "num_train_examples", "num_test_examples",
          "train_class_counts", "epochs", "steps", "global_batch_size", "final_train_loss")
  return {**{k: metrics.get(k) for k in keep},
          "validation_balanced_accuracy": (metrics.get("final_validation") or {}).get(
              "balanced_accuracy"),
          "wall_seconds": wall, "load_average": load}


def main(argv):
  del argv
  seeds = [s.strip() for s in FLAGS.seeds]
  if len(seeds) < 2 or any(not re.fullmatch(r"\d+", s) for s in seeds) or (
      len(set(seeds)) < len(seeds)):
    runs_lib.fail(f"--seeds={','.join(FLAGS.seeds)}: give two or more distinct whole "
                  "numbers, e.g. --seeds=0,1,2")
  root = os.path.abspath(FLAGS.out_dir or os.path.join(
      os.environ.get("BUILD_WORKING_DIRECTORY", "."), "runs", "finetune_benchmark"))
  digest = runs_lib.code_digest()
  results = {"benchmark": "finetune", "recipe": FLAGS.recipe, "seeds": seeds,
             "arms": list(ARMS), "extra_bindings": FLAGS.gin_bindings,
             **runs_lib.provenance(), "code": digest,
             "date": datetime.date.today().isoformat(),
             "runs": {arm: {} for arm in ARMS}}
  for seed in seeds:
    for arm in ARMS:
      run = arm_run(FLAGS.recipe, arm, seed, root, tuple(FLAGS.gin_bindings))
      try:
        with runs_lib.LoadSampler() as load:
          metrics, wall = runs_lib.train_timed(run, digest, rerun_stale=FLAGS.rerun_stale)
      except runs_lib.StaleRun as e:
        runs_lib.fail(str(e))
      shutil.rmtree(os.path.join(run.model_dir, "checkpoints"), ignore_errors=True)
      results["runs"][arm][seed] = record(metrics, wall, load.summary())
      print(f"{arm}, seed {seed}: balanced accuracy {metrics['balanced_accuracy']:.3f}",
            flush=True)
  print(tables.finetune(results))
  path = records.write_new(FLAGS.record_dir, records.stem(
      results["recipe"], results["revision"], results["date"]), results)
  print(f"Record: {path}")


if __name__ == "__main__":
  sys.exit(app.run(main))
