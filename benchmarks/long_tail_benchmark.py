"""Every long-tail method on the flagship's long-tailed digits, over seeds, side by side:
`bazel run //benchmarks:long_tail [-- --seeds=0,1,2 --methods=... --epochs=N]`.

Each method is the flagship recipe (recipes/nfnet_long_tail.gin: NFNet-nano, digits at
rho = 100, 60 epochs) with the method's Gin bindings, run as the user runs it
(`python -m recipes.train`, one process a run, one run at a time). Prints balanced,
many-, medium- and few-shot test accuracy per method: mean and standard deviation over
the seeds, and each method's difference from cross-entropy against the two runs'
seed noise (the standard error of the difference; "within noise" when it is below
twice that).
"""

import json
import os
import subprocess
import sys
import tempfile

from absl import app
from absl import flags
import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FLAGSHIP = "recipes/nfnet_long_tail.gin"
EPOCHS = 60
METRICS = ("balanced_accuracy", "many_shot_accuracy", "medium_shot_accuracy",
           "few_shot_accuracy")


def methods(epochs):
  """name -> the method's Gin bindings on the flagship (deferred ones start at 80% of
  the run, as Cao et al.'s 160 of 200 epochs)."""
  deferred = int(0.8 * epochs)
  return {
      "cross-entropy": ["Task.loss = @cross_entropy"],
      "logit-adjusted loss (tau = 1)": ["Task.loss = @logit_adjusted"],
      "Balanced Softmax": ["Task.loss = @balanced_softmax"],
      "focal (softmax, gamma = 2)": ["Task.loss = @focal", "focal.kind = 'softmax'"],
      "CB focal (sigmoid, beta = 0.9999, gamma = 1)": [
          "Task.loss = @class_balanced", "class_balanced.loss = 'focal'",
          "focal.gamma = 1.0", "Task.model_transforms = [@sigmoid_prior_bias]"],
      "LDAM-DRW": [
          "Task.loss = @class_balanced", "class_balanced.loss = 'ldam'",
          f"class_balanced.start_epoch = {deferred}",
          "Task.model_transforms = [@normed_head]"],
      "cross-entropy, class-balanced re-sampling deferred (DRS)": [
          "Task.loss = @cross_entropy", "InputPipeline.sampler = @tricks.Sampler()",
          "tricks.Sampler.kind = 'class'", f"tricks.Sampler.start_epoch = {deferred}"],
      "cross-entropy, square-root sampling": [
          "Task.loss = @cross_entropy", "InputPipeline.sampler = @tricks.Sampler()",
          "tricks.Sampler.kind = 'sqrt'"],
  }


FLAGS = flags.FLAGS
flags.DEFINE_list("seeds", ["0", "1", "2"], "Seeds (SEED) of every method.")
flags.DEFINE_list("methods", [], "Methods to run (default: all; names as printed).")
flags.DEFINE_integer("epochs", EPOCHS, "EPOCHS of every run.", lower_bound=1)
flags.DEFINE_string("gin_file", FLAGSHIP, "The recipe the methods change.")
flags.DEFINE_string("out", None, "Also write the results as JSON here.")


def train(gin_file, bindings, seed, epochs, model_dir, python=sys.executable):
  """One run through the command line; its metrics.json."""
  args = [python, "-m", "recipes.train", f"--gin_file={gin_file}", f"--model_dir={model_dir}",
          f"--gin_bindings=SEED = {seed}", f"--gin_bindings=EPOCHS = {epochs}"]
  args += [f"--gin_bindings={b}" for b in bindings]
  env = dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="2")
  env.pop("BUILD_WORKING_DIRECTORY", None)
  done = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True)
  if done.returncode != 0:
    raise RuntimeError(f"run failed ({done.returncode}): {' '.join(args)}\n"
                       f"{done.stderr[-2000:]}")
  with open(os.path.join(model_dir, "metrics.json")) as f:
    return json.load(f)


def summarise(results):
  """{method: {metric: (mean, std, values)}} from {method: [metrics, ...]}."""
  table = {}
  for method, runs in results.items():
    table[method] = {}
    for key in METRICS:
      values = [r[key] for r in runs if r.get(key) is not None]
      std = float(np.std(values, ddof=1)) if len(values) > 1 else 0.0
      table[method][key] = (float(np.mean(values)), std, values)
  return table


def versus(table, method, baseline="cross-entropy", key="balanced_accuracy"):
  """(difference of means, its standard error, 'ahead' / 'behind' / 'within noise')."""
  (m, s, v), (mb, sb, vb) = table[method][key], table[baseline][key]
  error = float(np.sqrt(s ** 2 / max(len(v), 1) + sb ** 2 / max(len(vb), 1)))
  diff = m - mb
  if error == 0 or abs(diff) < 2 * error:
    return diff, error, "within noise"
  return diff, error, "ahead" if diff > 0 else "behind"


def render(table, seeds):
  lines = [f"Long-tailed digits (rho = 100), NFNet-nano, seeds {', '.join(seeds)}: test "
           "accuracy, mean ± std over seeds",
           "| method | balanced | many-shot | medium-shot | few-shot | balanced vs "
           "cross-entropy |", "|---|---|---|---|---|---|"]
  for method, row in table.items():
    cells = [f"{row[k][0]:.3f} ± {row[k][1]:.3f}" for k in METRICS]
    if method == "cross-entropy" or "cross-entropy" not in table:
      compared = "(baseline)"
    else:
      diff, error, verdict = versus(table, method)
      compared = f"{diff:+.3f} (± {error:.3f}): {verdict}"
    lines.append(f"| {method} | {' | '.join(cells)} | {compared} |")
  return "\n".join(lines)


def main(argv):
  del argv
  known = methods(FLAGS.epochs)
  chosen = FLAGS.methods or list(known)
  unknown = [m for m in chosen if m not in known]
  if unknown:
    print(f"error: unknown --methods {unknown}; choose from {list(known)}", file=sys.stderr)
    sys.exit(2)
  results = {}
  with tempfile.TemporaryDirectory() as tmp:
    for method in chosen:
      for seed in FLAGS.seeds:
        model_dir = os.path.join(tmp, f"{len(results)}-{seed}")
        metrics = train(FLAGS.gin_file, known[method], seed, FLAGS.epochs, model_dir)
        results.setdefault(method, []).append(metrics)
        print(f"{method}, seed {seed}: balanced accuracy "
              f"{metrics['balanced_accuracy']:.3f}", flush=True)
  table = summarise(results)
  print(render(table, FLAGS.seeds))
  if FLAGS.out:
    with open(FLAGS.out, "w") as f:
      json.dump({m: {k: v[2] for k, v in row.items()} for m, row in table.items()}, f,
                indent=1)


if __name__ == "__main__":
  app.run(main)
