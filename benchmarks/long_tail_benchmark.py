"""Every long-tail method on real long-tailed images, over seeds, side by side:

    ./bazelw run //benchmarks:long_tail                # every method, seeds 0, 1, 2
    ./bazelw run //benchmarks:long_tail -- --quick     # cross-entropy, LA, LDAM-DRW; seed 0

Each method is a recipe (default: the flagship, recipes/nfnet_long_tail.gin, NFNet-nano
on Fashion-MNIST-LT at rho = 100) with the method's Gin bindings, run as the user runs
it (`python -m recipes.train`, one process a run, one run at a time). The methods that
change a trained model (cRT, LWS, the tau-normalised classifier, post-hoc adjustment)
start from the cross-entropy run of the same seed, as Kang et al. and Menon et al. do;
weight balancing's stage 2 from its own stage 1 (cross-entropy, weight decay 5e-3).

Every run keeps its own directory under --out_dir (<method>/seed<k>), keyed on what
fixes its configuration (benchmarks/runs.py): a rerun reads a finished run of the very
same configuration and code, resumes an interrupted one, and stops with one line on a
stale one (--rerun_stale deletes and reruns it), so the table can be filled over
several sittings and never mixes configurations. Prints balanced, many-, medium- and
few-shot test accuracy per method (mean ± standard deviation over seeds) and each
method's balanced accuracy against cross-entropy by the project's one rule
(benchmarks/stats.py: a paired t test over seeds, Holm over the methods run, 95%); writes the raw results
(long_tail.json: every run's figures, the command, date and machine), the table
(long_tail.md, rendered from that JSON alone) and two plots (long_tail.png: balanced
accuracy per method; per_class.png: each class's test accuracy under the baseline and
the chosen methods).
"""

import datetime
import os
import re
import shlex
import sys
import time

from absl import app
from absl import flags
import numpy as np

from benchmarks import runs as runs_lib
from benchmarks import stats
from benchmarks import tables

RECIPE = "recipes/nfnet_long_tail.gin"
METRICS = tables.METRICS
BASELINE = tables.BASELINE
QUICK = (BASELINE, "logit-adjusted loss (tau = 1)", "LDAM-DRW")
WB_STAGE1 = "cross-entropy, weight decay 5e-3 (weight balancing's stage 1)"


def methods(epochs, batch_size=128):
  """name -> (Gin files added to the recipe, bindings); the deferred ones switch at 80%
  of the run, as Cao et al.'s 160 of 200 epochs. A method whose files include a
  runs/decoupled*.gin piece is a stage 2 on the cross-entropy run."""
  deferred = int(0.8 * epochs)
  runs = "recipes/configs/runs/"
  # Stage 2 from the cross-entropy run: Kang et al.'s lr 0.2 at batch 512, scaled
  # linearly to the recipe's batch (decoupled.gin); weight balancing's 0.01 at 64.
  stage2 = [f"STAGE2_LEARNING_RATE = {0.2 * batch_size / 512:g}"]
  ldam_drw = ["Task.loss = @class_balanced", "class_balanced.loss = 'ldam'",
              f"class_balanced.start_epoch = {deferred}",
              "class_balanced.normalize = 'weights'", "Task.model_transforms = [@normed_head]"]
  return {
      BASELINE: ([], ["Task.loss = @cross_entropy"]),
      "logit-adjusted loss (tau = 1)": ([], ["Task.loss = @logit_adjusted"]),
      "Balanced Softmax": ([], ["Task.loss = @balanced_softmax"]),
      "focal (softmax, gamma = 2)": ([], ["Task.loss = @focal", "focal.kind = 'softmax'"]),
      "CB focal (sigmoid, beta = 0.9999, gamma = 1)": ([], [
          "Task.loss = @class_balanced", "class_balanced.loss = 'focal'",
          "focal.gamma = 1.0", "Task.model_transforms = [@sigmoid_prior_bias]"]),
      # Cao et al.'s code passes DRW's weights to F.cross_entropy(weight=...): the
      # weighted mean ('weights'), as their reproduce recipes; the default 'batch' (Cui
      # et al.'s) would make DRW's steps 0.17x as large here (the mean weight).
      "LDAM-DRW": ([], ldam_drw),
      "cross-entropy, class-balanced re-sampling deferred (DRS)": ([], [
          "Task.loss = @cross_entropy", "InputPipeline.sampler = @tricks.Sampler()",
          "tricks.Sampler.kind = 'class'", f"tricks.Sampler.start_epoch = {deferred}"]),
      "cross-entropy, square-root sampling": ([], [
          "Task.loss = @cross_entropy", "InputPipeline.sampler = @tricks.Sampler()",
          "tricks.Sampler.kind = 'sqrt'"]),
      "post-hoc adjustment (tau on validation)": ([runs + "decoupled_posthoc.gin"], stage2),
      "cRT": ([runs + "decoupled_crt.gin"], stage2),
      "LWS": ([runs + "decoupled_lws.gin"], stage2),
      "tau-normalised classifier (tau on validation)": (
          [runs + "decoupled_tau_norm.gin"], stage2),
      # Weight balancing: stage 1 with their tuned weight decay 5e-3 (PyTorch's coupled
      # one: Optimization.l2, which every recipe has; an L2 macro only some recipes
      # read), stage 2 on it.
      WB_STAGE1: ([], ["Task.loss = @cross_entropy", "Optimization.l2 = 5e-3"]),
      "weight balancing (stage 2: CB loss, MaxNorm)": (
          [runs + "decoupled_wb.gin"], [f"STAGE2_LEARNING_RATE = {0.01 * batch_size / 64:g}"]),
      "LDAM-DRW + SAM (rho = 0.8)": ([runs + "rangwani2022_sam.gin"], ldam_drw),
      # ImbSAM's tail: classes under the recipe's few-shot line (their 20 is CIFAR's).
      "ImbSAM (rho = 0.05, tail: under 200 images)": (
          [runs + "zhou2023_imbsam.gin"], ["Task.loss = @cross_entropy",
                                           "IMBSAM_ETA = 200"]),
      "Remix + Balanced Softmax": ([], ["Task.loss = @balanced_softmax",
                                        "InputPipeline.remix = @tricks.Remix()"]),
  }


def stage1_of(method):
  """The method whose run a stage-2 method starts from."""
  return WB_STAGE1 if method.startswith("weight balancing") else BASELINE


FLAGS = flags.FLAGS
flags.DEFINE_list("seeds", ["0", "1", "2"], "Seeds (SEED) of every method.")
flags.DEFINE_list("methods", [], "Methods to run, by their short names (default: all): "
                  "ce, la, ldam_drw, crt, ... (an unknown one lists them).")
flags.DEFINE_boolean("quick", False, f"Only {', '.join(QUICK)}, seed 0.")
flags.DEFINE_integer("epochs", None, "EPOCHS of every run (default: the recipe's).",
                     lower_bound=1)
flags.DEFINE_string("gin_file", RECIPE, "The recipe the methods change.")
runs_lib.define_flags("runs/long_tail_benchmark/<recipe>", "method")
flags.adopt_module_key_flags(runs_lib)
flags.DEFINE_list("plot_methods", [], "Short names of the methods per_class.png shows "
                  "beside the baseline (default: up to three that are ahead).")


def recipe_value(gin_file, macro):
  """The recipe's last `MACRO = N` line (an integer), or None."""
  with open(os.path.join(runs_lib.ROOT, gin_file)) as f:
    found = re.findall(rf"^{macro}\s*=\s*(\d+)", f.read(), flags=re.M)
  return int(found[-1]) if found else None


def recipe_epochs(gin_file):
  """The recipe's EPOCHS (its last `EPOCHS = N` line)."""
  epochs = recipe_value(gin_file, "EPOCHS")
  if epochs is None:
    raise ValueError(f"{gin_file} sets no EPOCHS; pass --epochs")
  return epochs


# The short name of each method: its --methods name and its runs' folder.
SHORT = {
    BASELINE: "ce", "logit-adjusted loss (tau = 1)": "la",
    "Balanced Softmax": "balanced_softmax", "focal (softmax, gamma = 2)": "focal",
    "CB focal (sigmoid, beta = 0.9999, gamma = 1)": "cb_focal", "LDAM-DRW": "ldam_drw",
    "cross-entropy, class-balanced re-sampling deferred (DRS)": "drs",
    "cross-entropy, square-root sampling": "sqrt_sampling",
    "post-hoc adjustment (tau on validation)": "posthoc", "cRT": "crt", "LWS": "lws",
    "tau-normalised classifier (tau on validation)": "tau_norm",
    WB_STAGE1: "wb_stage1",
    "weight balancing (stage 2: CB loss, MaxNorm)": "wb", "LDAM-DRW + SAM (rho = 0.8)":
    "ldam_drw_sam", "ImbSAM (rho = 0.05, tail: under 200 images)": "imbsam",
    "Remix + Balanced Softmax": "remix_balanced_softmax",
}


def slug(method):
  return SHORT.get(method) or re.sub(r"[^a-z0-9]+", "_", method.lower()).strip("_")


def is_stage2(files):
  return any("/decoupled" in f for f in files)


def plan(gin_file, known, chosen, seeds, epochs, root, extra_bindings=()):
  """{(method, seed): runs.Run} in the order they run (a stage 2 after its stage 1)."""
  planned = {}
  for method in chosen:
    for seed in seeds:
      files, bindings = known[method]
      stage1 = planned.get((stage1_of(method), seed)) if is_stage2(files) else None
      planned[(method, seed)] = runs_lib.Run(
          gin_files=(gin_file, *files),
          bindings=(f"SEED = {seed}", f"EPOCHS = {epochs}", *extra_bindings, *bindings),
          model_dir=os.path.join(root, slug(method), f"seed{seed}"), stage1=stage1)
  return planned


def run_record(metrics, wall_seconds):
  """What the JSON keeps of a run's metrics.json."""
  keep = METRICS + ("top1", "per_class_accuracy", "train_class_counts", "class_names",
                    "num_test_examples", "epochs", "steps", "train_seconds_this_run")
  record = {k: metrics.get(k) for k in keep}
  record["validation_balanced_accuracy"] = (metrics.get("final_validation") or {}).get(
      "balanced_accuracy")
  record["wall_seconds"] = wall_seconds
  return record


def plot(results, path):
  """Balanced accuracy per method: the mean with the seeds' standard deviation as an
  error bar, each seed's value as a dot, and cross-entropy's mean as a line."""
  import matplotlib  # pylint: disable=import-outside-toplevel
  matplotlib.use("Agg")
  from matplotlib import pyplot  # pylint: disable=import-outside-toplevel
  names = list(results["runs"])[::-1]
  values = [list(tables.seed_values(results, n).values()) for n in names]
  means = np.array([np.mean(v) if v else np.nan for v in values])
  stds = np.array([np.std(v, ddof=1) if len(v) > 1 else 0.0 for v in values])
  figure, axes = pyplot.subplots(figsize=(8, 0.45 * len(names) + 1.6))
  for i, v in enumerate(values):
    axes.plot(v, [i] * len(v), ".", color="0.6", markersize=5)
  axes.errorbar(means, range(len(names)), xerr=stds, fmt="o", color="#1f77b4", capsize=3)
  if BASELINE in results["runs"]:
    axes.axvline(np.mean(list(tables.seed_values(results, BASELINE).values())), color="#d62728",
                 lw=1)
  finite = np.isfinite(means)
  if finite.any():
    low, high = (means - stds)[finite].min(), (means + stds)[finite].max()
    axes.set_xlim(max(0.0, low - 0.02), min(1.0, high + 0.02))
  axes.set_yticks(range(len(names)), names, fontsize=8)
  axes.set_ylim(-0.6, len(names) - 0.4)
  axes.grid(axis="x", alpha=0.3)
  axes.set_xlabel("balanced test accuracy: mean ± standard deviation over seeds (grey "
                  "dots: each seed); red line: cross-entropy's mean", fontsize=9)
  axes.set_title(f"{results['recipe']}, {results['epochs']} epochs", fontsize=10,
                 loc="left")
  figure.tight_layout()
  figure.savefig(path, dpi=110, bbox_inches="tight")
  pyplot.close(figure)


def plot_per_class(results, methods_shown, path):
  """Each class's test accuracy (mean over seeds, the standard deviation as an error
  bar) under each method shown, classes from the most to the fewest training images."""
  import matplotlib  # pylint: disable=import-outside-toplevel
  matplotlib.use("Agg")
  from matplotlib import pyplot  # pylint: disable=import-outside-toplevel
  first = next(iter(results["runs"][methods_shown[0]].values()))
  counts, names = first["train_class_counts"], first.get("class_names") or []
  order = np.argsort(counts)[::-1]
  width = 0.8 / len(methods_shown)
  figure, axes = pyplot.subplots(figsize=(max(7, 0.9 * len(counts)), 4.2))
  for i, method in enumerate(methods_shown):
    per_class = np.array([r["per_class_accuracy"] for r in results["runs"][method].values()],
                         dtype=float)
    mean = np.nanmean(per_class, axis=0)[order]
    std = (np.nanstd(per_class, axis=0, ddof=1)[order] if len(per_class) > 1
           else np.zeros(len(order)))
    balanced = np.mean(list(tables.seed_values(results, method).values()))
    axes.bar(np.arange(len(order)) + (i - (len(methods_shown) - 1) / 2) * width, mean,
             width, yerr=std, capsize=2, label=f"{method} (balanced {balanced:.3f})")
  labels = [f"{names[c] if c < len(names) else c}\n{counts[c]}" for c in order]
  axes.set_xticks(range(len(order)), labels, fontsize=7)
  axes.set_ylim(0, 1.05)
  axes.set_ylabel("test accuracy of the class")
  axes.set_xlabel("class (training images), from the most to the fewest; bars: mean over "
                  f"seeds {', '.join(results['seeds'])}, error bars: standard deviation",
                  fontsize=8)
  axes.grid(axis="y", alpha=0.3)
  axes.legend(fontsize=7, loc="lower left")
  axes.set_title(f"{results['recipe']}, {results['epochs']} epochs: per-class test "
                 "accuracy", fontsize=10, loc="left")
  figure.tight_layout()
  figure.savefig(path, dpi=110, bbox_inches="tight")
  pyplot.close(figure)


def shown_methods(results, requested=()):
  """The baseline and the requested methods, or up to three that are ahead (by Holm
  over every method run)."""
  if requested:
    return [BASELINE] + [m for m in results["runs"] if slug(m) in requested]
  compared = tables.comparisons(results)
  ahead = sorted((compared[m].difference, m) for m in tables.ahead_by_family(results))
  return [BASELINE] + [m for _, m in ahead[::-1][:3]]


# --- The command --------------------------------------------------------------------

def chosen_methods(known):
  if FLAGS.quick:
    return list(QUICK), ["0"]
  by_slug = {slug(m): m for m in known}
  unknown = [m for m in FLAGS.methods if m not in by_slug]
  if unknown:
    runs_lib.fail(f"unknown --methods {unknown}; choose from {', '.join(by_slug)}")
  chosen = [by_slug[m] for m in FLAGS.methods] or list(known)
  for method in list(chosen):  # the stage-2 methods start from their stage 1's runs
    if is_stage2(known[method][0]) and stage1_of(method) not in chosen:
      chosen.insert(0, stage1_of(method))
  return sorted(chosen, key=lambda m: (m != BASELINE, is_stage2(known[m][0]))), FLAGS.seeds


def out_dir():
  if FLAGS.out_dir:
    return FLAGS.out_dir
  name = os.path.splitext(os.path.basename(FLAGS.gin_file))[0]
  return os.path.join(os.environ.get("BUILD_WORKING_DIRECTORY", "."), "runs",
                      "long_tail_benchmark", name)


def main(argv):
  del argv
  if not os.path.isfile(os.path.join(runs_lib.ROOT, FLAGS.gin_file)):
    runs_lib.fail(f"--gin_file={FLAGS.gin_file} is not a file of the workspace; give a "
                  f"recipe such as {RECIPE}")
  if not FLAGS.seeds or any(not re.fullmatch(r"\d+", s) for s in FLAGS.seeds):
    runs_lib.fail(f"--seeds={','.join(FLAGS.seeds)}: give non-negative integers, e.g. "
                  "--seeds=0,1,2")
  epochs = FLAGS.epochs or recipe_epochs(FLAGS.gin_file)
  known = methods(epochs, recipe_value(FLAGS.gin_file, "BATCH_SIZE") or 128)
  chosen, seeds = chosen_methods(known)
  root = os.path.abspath(out_dir())
  planned = plan(FLAGS.gin_file, known, chosen, seeds, epochs, root, FLAGS.gin_bindings)
  digest = runs_lib.code_digest()
  results = {"benchmark": "long_tail", "recipe": FLAGS.gin_file, "epochs": epochs,
             "seeds": list(seeds), "extra_bindings": FLAGS.gin_bindings,
             "command": "./bazelw run //benchmarks:long_tail -- " + " ".join(
                 shlex.quote(a) for a in sys.argv[1:]),
             "date": datetime.date.today().isoformat(), "machine": runs_lib.machine(),
             "load_average_before": [round(x, 2) for x in os.getloadavg()],
             "code": digest, "revision": runs_lib.revision(),
             "short_names": {m: slug(m) for m in chosen}, "runs": {}}
  began = time.time()
  for (method, seed), run in planned.items():
    try:
      metrics, wall = runs_lib.train_timed(run, rerun_stale=FLAGS.rerun_stale)
    except runs_lib.StaleRun as e:
      runs_lib.fail(str(e))
    results["runs"].setdefault(method, {})[seed] = run_record(metrics, wall)
    print(f"{method}, seed {seed}: balanced accuracy {metrics['balanced_accuracy']:.3f} "
          f"({time.time() - began:.0f} s so far)", flush=True)
  results["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
  text = tables.long_tail_caption(results) + "\n\n" + tables.long_tail(results)
  print(text)
  runs_lib.write_results(root, "long_tail", results, text)
  plot(results, os.path.join(root, "long_tail.png"))
  plot_per_class(results, shown_methods(results, FLAGS.plot_methods),
                 os.path.join(root, "per_class.png"))
  print(f"Raw results, table and plots in {root} (long_tail.json, long_tail.md, "
        "long_tail.png, per_class.png)")


if __name__ == "__main__":
  app.run(main)
