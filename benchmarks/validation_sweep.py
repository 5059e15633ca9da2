"""A grid of a recipe's settings scored on its validation split alone:

    ./bazelw run //benchmarks:validation_sweep -- --gin_file=recipes/nfnet_long_tail.gin \
        --grid='LEARNING_RATE = 0.05, 0.1, 0.2' --grid='EPOCHS = 12, 20' \
        --gin_bindings='Task.loss = @cross_entropy' --seeds=0

How a recipe's knobs are chosen without looking at its test split: every point of the
grid (the product of the --grid lines) is a run (`python -m recipes.train`, keyed on its
configuration as every benchmark run is: benchmarks/runs.py), and the sweep reports each
point's final validation balanced accuracy (mean over seeds), its wall time and its
training loss. Test figures are never read or printed. Writes sweep.json (every run's
validation figures, the command, date and machine) beside the runs.
"""

import datetime
import itertools
import json
import os
import re
import shlex
import sys

from absl import app
from absl import flags

from benchmarks import runs as runs_lib
from benchmarks import tables

FLAGS = flags.FLAGS
flags.DEFINE_string("gin_file", "recipes/nfnet_long_tail.gin",
                    "The recipe whose settings are swept.")
flags.DEFINE_multi_string("grid", [], "'MACRO_OR_PARAMETER = v1, v2, ...': one axis of "
                          "the grid (repeatable).")
flags.DEFINE_multi_string("gin_bindings", [], "Bindings of every run (after the grid's).")
flags.DEFINE_list("seeds", ["0"], "Seeds (SEED) of every point.")
flags.DEFINE_string("out_dir", None, "Where the runs and sweep.json go (default: "
                    "runs/validation_sweep/<recipe>).")
flags.DEFINE_boolean("rerun_stale", False, "Delete and rerun stale run directories.")

_AXIS = re.compile(r"^\s*([A-Za-z_][\w./]*)\s*=\s*(.+?)\s*$", re.S)


def parse_axis(text):
  """'NAME = a, b' -> (NAME, ['a', 'b']); a ValueError naming the fix otherwise."""
  match = _AXIS.fullmatch(text)
  values = [v.strip() for v in match.group(2).split(",")] if match else []
  if not match or not all(values) or "\n" in text:
    raise ValueError(f"--grid={text!r}: write one axis as 'NAME = value1, value2', e.g. "
                     "--grid='LEARNING_RATE = 0.05, 0.1'")
  return match.group(1), values


def points(axes):
  """Every combination of the axes, as lists of bindings."""
  names = [name for name, _ in axes]
  return [[f"{n} = {v}" for n, v in zip(names, combo)]
          for combo in itertools.product(*(values for _, values in axes))]


def point_dir(root, bindings):
  name = "_".join(re.sub(r"[^A-Za-z0-9.]+", "", b.replace("=", "-")) for b in bindings)
  return os.path.join(root, name or "default")


def main(argv):
  del argv
  try:
    axes = [parse_axis(text) for text in FLAGS.grid]
  except ValueError as e:
    runs_lib.fail(str(e))
  if not axes:
    runs_lib.fail("no --grid given; e.g. --grid='LEARNING_RATE = 0.05, 0.1'")
  root = os.path.abspath(FLAGS.out_dir or os.path.join(
      os.environ.get("BUILD_WORKING_DIRECTORY", "."), "runs", "validation_sweep",
      os.path.splitext(os.path.basename(FLAGS.gin_file))[0]))
  digest = runs_lib.code_digest()
  sweep = {"benchmark": "validation_sweep", "recipe": FLAGS.gin_file,
           "grid": FLAGS.grid, "gin_bindings": FLAGS.gin_bindings, "seeds": FLAGS.seeds,
           "command": "./bazelw run //benchmarks:validation_sweep -- " + " ".join(
               shlex.quote(a) for a in sys.argv[1:]),
           "date": datetime.date.today().isoformat(), "machine": runs_lib.machine(),
           "load_average_before": [round(x, 2) for x in os.getloadavg()],
           "code": digest, "revision": runs_lib.revision(), "points": []}
  for bindings in points(axes):
    point = {"bindings": bindings, "runs": {}}
    for seed in FLAGS.seeds:
      run = runs_lib.Run(gin_files=(FLAGS.gin_file,),
                         bindings=(f"SEED = {seed}", *bindings, *FLAGS.gin_bindings),
                         model_dir=os.path.join(point_dir(root, bindings), f"seed{seed}"))
      try:
        metrics, wall = runs_lib.train_timed(run, rerun_stale=FLAGS.rerun_stale)
      except runs_lib.StaleRun as e:
        runs_lib.fail(str(e))
      validation = metrics.get("final_validation") or {}
      if validation.get("balanced_accuracy") is None:
        runs_lib.fail(f"{run.model_dir} has no validation figures; the recipe needs a "
                       "validation split (Task.validation_per_class)")
      point["runs"][seed] = {
          "validation_balanced_accuracy": validation["balanced_accuracy"],
          "validation": validation, "wall_seconds": wall,
          "final_train_loss": metrics.get("final_train_loss"),
          "train_seconds_this_run": metrics.get("train_seconds_this_run")}
      print(f"{'; '.join(bindings)}, seed {seed}: validation balanced accuracy "
            f"{validation['balanced_accuracy']:.4f}, {wall} s", flush=True)
    sweep["points"].append(point)
  sweep["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
  text = tables.validation_sweep_caption(sweep) + "\n\n" + tables.validation_sweep(sweep)
  print(text)
  with open(os.path.join(root, "sweep.json"), "w") as f:
    json.dump(sweep, f, indent=1)
  print(f"Raw results in {os.path.join(root, 'sweep.json')}")


if __name__ == "__main__":
  app.run(main)
