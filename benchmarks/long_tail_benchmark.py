"""Every long-tail method on real long-tailed images, over seeds, side by side:

    ./bazelw run //benchmarks:long_tail                # every method, seeds 0, 1, 2
    ./bazelw run //benchmarks:long_tail -- --quick     # cross-entropy, LA, LDAM-DRW; seed 0

Each method is a recipe (default recipes/fashion_mnist_long_tail.gin: Fashion-MNIST-LT,
rho = 100, CIFAR ResNet-20) with the method's Gin bindings, run as the user runs it
(`python -m recipes.train`, one process a run, one run at a time). The methods that
change a trained model (cRT, LWS, the tau-normalised classifier, post-hoc adjustment)
start from the cross-entropy run of the same seed, as Kang et al. and Menon et al. do;
weight balancing's stage 2 from its own stage 1 (cross-entropy, weight decay 5e-3).

Every run keeps its own directory under --out_dir (<method>/seed<k>); a finished run
(its metrics.json) is read, not run again, and an interrupted one resumes from its
checkpoint, so the table can be filled over several sittings. Prints balanced, many-,
medium- and few-shot test accuracy per method: mean and standard deviation over the
seeds, and each method's difference from cross-entropy against the two runs' seed
noise (the standard error of the difference; "within noise" below twice that); writes
the table (long_tail.md), the values (long_tail.json) and a plot (long_tail.png).
"""

import json
import os
import re
import subprocess
import sys
import time

from absl import app
from absl import flags
import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RECIPE = "recipes/fashion_mnist_long_tail.gin"
METRICS = ("balanced_accuracy", "many_shot_accuracy", "medium_shot_accuracy",
           "few_shot_accuracy")
BASELINE = "cross-entropy"
QUICK = (BASELINE, "logit-adjusted loss (tau = 1)", "LDAM-DRW")
# Stage 2 from the cross-entropy run: Kang et al.'s lr 0.2 at batch 512, scaled to the
# recipe's 128 (decoupled.gin).
STAGE2 = ["STAGE2_LEARNING_RATE = 0.05"]


def methods(epochs):
  """name -> (Gin files added to the recipe, bindings); the deferred ones switch at 80%
  of the run, as Cao et al.'s 160 of 200 epochs. A method whose files include a
  runs/decoupled*.gin piece is a stage 2 on the cross-entropy run."""
  deferred = int(0.8 * epochs)
  runs = "recipes/configs/runs/"
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
      "LDAM-DRW": ([], [
          "Task.loss = @class_balanced", "class_balanced.loss = 'ldam'",
          f"class_balanced.start_epoch = {deferred}", "class_balanced.normalize = 'weights'",
          "Task.model_transforms = [@normed_head]"]),
      "cross-entropy, class-balanced re-sampling deferred (DRS)": ([], [
          "Task.loss = @cross_entropy", "InputPipeline.sampler = @tricks.Sampler()",
          "tricks.Sampler.kind = 'class'", f"tricks.Sampler.start_epoch = {deferred}"]),
      "cross-entropy, square-root sampling": ([], [
          "Task.loss = @cross_entropy", "InputPipeline.sampler = @tricks.Sampler()",
          "tricks.Sampler.kind = 'sqrt'"]),
      "post-hoc adjustment (tau on validation)": ([runs + "decoupled_posthoc.gin"], STAGE2),
      "cRT": ([runs + "decoupled_crt.gin"], STAGE2),
      "LWS": ([runs + "decoupled_lws.gin"], STAGE2),
      "tau-normalised classifier (tau on validation)": (
          [runs + "decoupled_tau_norm.gin"], STAGE2),
      # Weight balancing: stage 1 with the tuned weight decay, stage 2 on it.
      WB_STAGE1: ([], ["Task.loss = @cross_entropy", "L2 = 5e-3"]),
      "weight balancing (stage 2: CB loss, MaxNorm)": (
          [runs + "decoupled_wb.gin"], ["STAGE2_LEARNING_RATE = 0.02"]),  # 0.01 at 64
      "LDAM-DRW + SAM (rho = 0.8)": ([runs + "rangwani2022_sam.gin"], [
          "Task.loss = @class_balanced", "class_balanced.loss = 'ldam'",
          f"class_balanced.start_epoch = {deferred}", "class_balanced.normalize = 'weights'",
          "Task.model_transforms = [@normed_head]"]),
      # ImbSAM's tail: classes under the recipe's few-shot line (their 20 is CIFAR's).
      "ImbSAM (rho = 0.05, tail: under 200 images)": (
          [runs + "zhou2023_imbsam.gin"], ["Task.loss = @cross_entropy",
                                           "IMBSAM_ETA = 200"]),
      "Remix + Balanced Softmax": ([], ["Task.loss = @balanced_softmax",
                                        "InputPipeline.remix = @tricks.Remix()"]),
  }


WB_STAGE1 = "cross-entropy, weight decay 5e-3 (weight balancing's stage 1)"


def stage1_of(method):
  """The method whose run a stage-2 method starts from."""
  return WB_STAGE1 if method.startswith("weight balancing") else BASELINE


FLAGS = flags.FLAGS
flags.DEFINE_list("seeds", ["0", "1", "2"], "Seeds (SEED) of every method.")
flags.DEFINE_list("methods", [], "Methods to run, by their short names (default: all): "
                  "ce, la, ldam_drw, crt, ... (an unknown one lists them).")
flags.DEFINE_boolean("quick", False, f"Only {', '.join(QUICK)}, seed 0 (about 15 "
                     "minutes on 2 CPU cores).")
flags.DEFINE_integer("epochs", None, "EPOCHS of every run (default: the recipe's).",
                     lower_bound=1)
flags.DEFINE_string("gin_file", RECIPE, "The recipe the methods change.")
flags.DEFINE_string("out_dir", None, "Where the runs, table and plot go (default: "
                    "runs/long_tail_benchmark/<recipe> under the working directory); "
                    "rerun with the same one to skip what is done.")


def recipe_epochs(gin_file):
  """The recipe's EPOCHS (its last `EPOCHS = N` line)."""
  with open(os.path.join(ROOT, gin_file)) as f:
    found = re.findall(r"^EPOCHS\s*=\s*(\d+)", f.read(), flags=re.M)
  if not found:
    raise ValueError(f"{gin_file} sets no EPOCHS; pass --epochs")
  return int(found[-1])


# The short name of each method: its --methods name and its runs' folder.
SHORT = {
    BASELINE: "ce", "logit-adjusted loss (tau = 1)": "la",
    "Balanced Softmax": "balanced_softmax", "focal (softmax, gamma = 2)": "focal",
    "CB focal (sigmoid, beta = 0.9999, gamma = 1)": "cb_focal", "LDAM-DRW": "ldam_drw",
    "cross-entropy, class-balanced re-sampling deferred (DRS)": "drs",
    "cross-entropy, square-root sampling": "sqrt_sampling",
    "post-hoc adjustment (tau on validation)": "posthoc", "cRT": "crt", "LWS": "lws",
    "tau-normalised classifier (tau on validation)": "tau_norm",
    "cross-entropy, weight decay 5e-3 (weight balancing's stage 1)": "wb_stage1",
    "weight balancing (stage 2: CB loss, MaxNorm)": "wb", "LDAM-DRW + SAM (rho = 0.8)":
    "ldam_drw_sam", "ImbSAM (rho = 0.05, tail: under 200 images)": "imbsam",
    "Remix + Balanced Softmax": "remix_balanced_softmax",
}


def slug(method):
  return SHORT.get(method) or re.sub(r"[^a-z0-9]+", "_", method.lower()).strip("_")


def is_stage2(files):
  return any("/decoupled" in f for f in files)


def final_checkpoint(model_dir):
  """The newest checkpoint prefix of a finished run."""
  folder = os.path.join(model_dir, "checkpoints")
  steps = [int(m.group(1)) for m in map(re.compile(r"^ckpt-(\d+)\.index$").match,
                                        os.listdir(folder)) if m]
  return os.path.join(folder, f"ckpt-{max(steps)}")


def train(gin_file, method, seed, epochs, model_dir, stage1=None, python=sys.executable):
  """One run through the command line (skipped when finished); its metrics.json.
  `method`: (extra Gin files, bindings); `stage1`: the finished run a stage 2 starts
  from."""
  files, bindings = method
  report = os.path.join(model_dir, "stage2" if stage1 else "", "metrics.json")
  if os.path.exists(report):
    with open(report) as f:
      return json.load(f)
  args = [python, "-m", "recipes.train", f"--model_dir={model_dir}"]
  args += [f"--gin_file={f}" for f in [gin_file, *files]]
  args += [f"--gin_bindings=SEED = {seed}", f"--gin_bindings=EPOCHS = {epochs}"]
  if stage1:
    args.append(f"--gin_bindings=decoupled.stage1_checkpoint = "
                f"'{final_checkpoint(stage1)}'")
  args += [f"--gin_bindings={b}" for b in bindings]
  env = dict(os.environ, PYTHONPATH=ROOT)
  env.pop("BUILD_WORKING_DIRECTORY", None)
  done = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True)
  if done.returncode != 0:
    raise RuntimeError(f"run failed ({done.returncode}): {' '.join(args)}\n"
                       f"{done.stderr[-2000:]}")
  with open(report) as f:
    return json.load(f)


def summarise(results):
  """{method: {metric: (mean, std, values)}} from {method: [metrics, ...]}."""
  table = {}
  for method, runs in results.items():
    table[method] = {}
    for key in METRICS:
      values = [r[key] for r in runs if r.get(key) is not None]
      std = float(np.std(values, ddof=1)) if len(values) > 1 else 0.0
      table[method][key] = (float(np.mean(values)) if values else float("nan"), std,
                            values)
  return table


def versus(table, method, baseline=BASELINE, key="balanced_accuracy"):
  """(difference of means, its standard error, 'ahead' / 'behind' / 'within noise';
  with fewer than two seeds on either side, no standard error and no verdict)."""
  (m, s, v), (mb, sb, vb) = table[method][key], table[baseline][key]
  diff = m - mb
  if min(len(v), len(vb)) < 2:
    return diff, float("nan"), "one seed: no noise estimate"
  error = float(np.sqrt(s ** 2 / len(v) + sb ** 2 / len(vb)))
  if error == 0 or abs(diff) < 2 * error:
    return diff, error, "within noise"
  return diff, error, "ahead" if diff > 0 else "behind"


def render(table, seeds, title="Long-tailed recognition"):
  lines = [f"{title}, seeds {', '.join(seeds)}: test accuracy, mean ± std over seeds",
           "| method | seeds | balanced | many-shot | medium-shot | few-shot | balanced vs "
           "cross-entropy |", "|---|---|---|---|---|---|---|"]
  for method, row in table.items():
    runs = len(row["balanced_accuracy"][2])  # a row may have fewer runs than --seeds
    cells = [str(runs)] + [f"{row[k][0]:.3f}" + (f" ± {row[k][1]:.3f}" if runs > 1 else "")
                           for k in METRICS]
    if method == BASELINE or BASELINE not in table:
      compared = "(baseline)"
    else:
      diff, error, verdict = versus(table, method)
      compared = (f"{diff:+.3f}: {verdict}" if np.isnan(error) else
                  f"{diff:+.3f} (± {error:.3f}): {verdict}")
    lines.append(f"| {method} | {' | '.join(cells)} | {compared} |")
  return "\n".join(lines)


def plot(table, path, title):
  """Balanced accuracy per method: the mean with the seeds' standard deviation as an
  error bar, each seed's value as a dot, and cross-entropy's mean as a line."""
  import matplotlib  # pylint: disable=import-outside-toplevel
  matplotlib.use("Agg")
  from matplotlib import pyplot  # pylint: disable=import-outside-toplevel
  names = list(table)[::-1]
  means = np.array([table[n]["balanced_accuracy"][0] for n in names])
  stds = np.array([table[n]["balanced_accuracy"][1] for n in names])
  figure, axes = pyplot.subplots(figsize=(8, 0.45 * len(names) + 1.6))
  for i, name in enumerate(names):
    values = table[name]["balanced_accuracy"][2]
    axes.plot(values, [i] * len(values), ".", color="0.6", markersize=5)
  axes.errorbar(means, range(len(names)), xerr=stds, fmt="o", color="#1f77b4",
                capsize=3)
  if BASELINE in table:
    axes.axvline(table[BASELINE]["balanced_accuracy"][0], color="#d62728", lw=1)
  finite = np.isfinite(means)
  if finite.any():
    low, high = (means - stds)[finite].min(), (means + stds)[finite].max()
    axes.set_xlim(max(0.0, low - 0.02), min(1.0, high + 0.02))
  axes.set_yticks(range(len(names)), names, fontsize=8)
  axes.set_ylim(-0.6, len(names) - 0.4)
  axes.grid(axis="x", alpha=0.3)
  axes.set_xlabel("balanced test accuracy: mean ± std over seeds (grey dots: each seed);"
                  " red line: cross-entropy's mean", fontsize=9)
  axes.set_title(title, fontsize=10, loc="left")
  figure.tight_layout()
  figure.savefig(path, dpi=110, bbox_inches="tight")
  pyplot.close(figure)


def chosen_methods(known):
  if FLAGS.quick:
    return list(QUICK), ["0"]
  by_slug = {slug(m): m for m in known}
  unknown = [m for m in FLAGS.methods if m not in by_slug]
  if unknown:
    print(f"error: unknown --methods {unknown}; choose from {', '.join(by_slug)}",
          file=sys.stderr)
    sys.exit(2)
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
  epochs = FLAGS.epochs or recipe_epochs(FLAGS.gin_file)
  known = methods(epochs)
  chosen, seeds = chosen_methods(known)
  root = os.path.abspath(out_dir())
  results, began = {}, time.time()
  for method in chosen:
    for seed in seeds:
      model_dir = os.path.join(root, slug(method), f"seed{seed}")
      stage1 = (os.path.join(root, slug(stage1_of(method)), f"seed{seed}")
                if is_stage2(known[method][0]) else None)
      metrics = train(FLAGS.gin_file, known[method], seed, epochs, model_dir, stage1)
      results.setdefault(method, []).append(metrics)
      print(f"{method}, seed {seed}: balanced accuracy "
            f"{metrics['balanced_accuracy']:.3f} ({time.time() - began:.0f} s so far)",
            flush=True)
  table = summarise(results)
  title = f"{os.path.basename(FLAGS.gin_file)}, {epochs} epochs"
  text = render(table, seeds, title)
  print(text)
  with open(os.path.join(root, "long_tail.md"), "w") as f:
    f.write(text + "\n")
  with open(os.path.join(root, "long_tail.json"), "w") as f:
    json.dump({m: {k: v[2] for k, v in row.items()} for m, row in table.items()}, f,
              indent=1)
  plot(table, os.path.join(root, "long_tail.png"), title)
  print(f"Table, values and plot in {root} (long_tail.md, .json, .png)")


if __name__ == "__main__":
  app.run(main)
