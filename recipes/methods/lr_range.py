"""The learning-rate range test (Smith 2017, arXiv:1506.01186, section 3.3).

The recipe trains as usual while its rate grows exponentially over the whole run,

    lr_i = min_lr * (max_lr / min_lr)^(i / (N - 1)),   i = 0 .. N - 1,

and every step's loss and accuracy are recorded. Smith reads the cyclical bounds off
the accuracy curve: base_lr where accuracy starts to increase, max_lr where it stops
increasing (slows, turns ragged or falls). Here, on curves smoothed by a bias-corrected
exponential moving average and cut where the loss diverges (beyond `diverge` times its
running minimum): max_lr is the rate of the smoothed accuracy's peak; the rise starts
at its lowest point before the peak (after the average's burn-in), and base_lr is the first rate after that low at
which 10% of the rise is made. Results: lr_range.json and lr_range.png.
"""

import json
import os

import gin
import numpy as np
import tf_keras

from recipes import experiment
from recipes import run_report
from recipes import trainer
from recipes.errors import ConfigError
from recipes.errors import Diverged

import matplotlib.pyplot as plt  # pylint: disable=g-bad-import-order  (Agg set by report)


@gin.configurable
def exponential_sweep(total_steps, steps_per_epoch, min_lr=1e-4, max_lr=10.0):
  """min_lr at step 0 to max_lr at the last step, geometrically."""
  del steps_per_epoch
  return tf_keras.optimizers.schedules.ExponentialDecay(
      min_lr, decay_steps=max(1, total_steps - 1), decay_rate=max_lr / min_lr)


def smooth(values, beta):
  """Bias-corrected exponential moving average; NaN and inf propagate."""
  out, average = [], 0.0
  for i, value in enumerate(values):
    average = beta * average + (1 - beta) * value
    out.append(average / (1 - beta ** (i + 1)))
  return np.asarray(out)


def suggest(lrs, losses, accuracies, smoothing=0.9, diverge=4.0, rise_fraction=0.1):
  """{'base_lr', 'max_lr', 'last_stable_step'} from a sweep (see the module doc)."""
  loss = smooth(losses, smoothing)
  accuracy = smooth(accuracies, smoothing)
  stable = len(loss)
  best = np.inf
  for i, value in enumerate(loss):
    if not np.isfinite(value) or value > diverge * best:
      stable = i
      break
    best = min(best, value)
  if stable < 2:
    return {"base_lr": None, "max_lr": None, "last_stable_step": stable - 1}
  accuracy = accuracy[:stable]
  peak = int(np.argmax(accuracy))
  # Skip the average's burn-in (its window is 1 / (1 - smoothing) steps): its first
  # values rest on a few noisy steps.
  burn_in = min(int(round(1 / (1 - smoothing))) if smoothing else 0, peak)
  trough = burn_in + int(np.argmin(accuracy[burn_in:peak + 1]))
  rise = accuracy[peak] - accuracy[trough]
  if rise <= 0:
    return {"base_lr": None, "max_lr": None, "last_stable_step": stable - 1}
  base = trough + int(np.argmax(accuracy[trough:] >= accuracy[trough] + rise_fraction * rise))
  return {"base_lr": float(lrs[base]), "max_lr": float(lrs[peak]),
          "last_stable_step": stable - 1}


def plot(path, lrs, losses, accuracies, suggestion, smoothing=0.9):
  fig, (ax_loss, ax_acc) = plt.subplots(2, 1, figsize=(7, 6), dpi=120, sharex=True)
  for ax, values, label in ((ax_loss, losses, "training loss"),
                            (ax_acc, accuracies, "training accuracy")):
    ax.plot(lrs, values, color="lightgray", linewidth=1, label="per step")
    ax.plot(lrs, smooth(values, smoothing), color="tab:blue", label="smoothed")
    ax.set_ylabel(label)
    ax.grid(True, which="both", alpha=0.3)
    for key, color in (("base_lr", "tab:green"), ("max_lr", "tab:red")):
      if suggestion[key]:
        ax.axvline(suggestion[key], color=color, linestyle="--",
                   label=f"{key} {suggestion[key]:.3g}")
  finite = [v for v in losses if np.isfinite(v)]
  if finite:
    ax_loss.set_ylim(0, min(max(finite), 4 * np.median(finite)) * 1.05)
  ax_acc.set_xscale("log")
  ax_acc.set_xlabel("learning rate")
  ax_acc.legend(fontsize=8, loc="upper left")
  ax_loss.set_title("LR range test (Smith 2017)")
  fig.tight_layout()
  run_report.atomic_write(path, lambda f: fig.savefig(f, format="png"))
  plt.close(fig)


@gin.configurable(denylist=["model_dir", "strategy"])
def lr_range_test(model_dir, strategy, smoothing=0.9, diverge=4.0):
  """Runs the recipe once, its rate swept by `Optimization.learning_rate =
  @exponential_sweep` over the whole run; suggests base_lr and max_lr."""
  optimization = experiment.Optimization()
  if optimization.learning_rate is not exponential_sweep:
    raise ConfigError("lr_range_test needs Optimization.learning_rate = @exponential_sweep "
                      f"(got {getattr(optimization.learning_rate, '__name__', '?')})")
  path = os.path.join(model_dir, "lr_range.json")
  if os.path.exists(path):  # a finished sweep: left as it was
    print(f"{model_dir} holds a finished LR range test: {path} is left as it was; choose "
          "a new --model_dir to sweep again", flush=True)
    with open(path) as f:
      return json.load(f)
  recorded = {}

  def on_step(step, loss, accuracy, learning_rate):
    recorded[step] = (learning_rate, loss, accuracy)

  # The sweep drives the rate up until the loss diverges: that is its end, not an error.
  try:
    metrics = trainer.train_and_evaluate(model_dir, strategy, optimization=optimization,
                                         on_step=on_step)
    final_top1 = metrics["top1"]
  except Diverged as e:
    print(f"The sweep diverged, as it is meant to: {str(e).splitlines()[0].split(';')[0]}",
          flush=True)
    final_top1 = None
  order = sorted(recorded)
  steps = {"lr": [recorded[step][0] for step in order],
           "loss": [recorded[step][1] for step in order],
           "accuracy": [recorded[step][2] for step in order]}
  suggestion = suggest(steps["lr"], steps["loss"], steps["accuracy"], smoothing, diverge)
  result = dict(suggestion, min_lr=steps["lr"][0] if steps["lr"] else None,
                max_lr_swept=steps["lr"][-1] if steps["lr"] else None, steps=steps,
                final_test_top1=final_top1)
  if steps["lr"]:
    plot(os.path.join(model_dir, "lr_range.png"), steps["lr"], steps["loss"],
         steps["accuracy"], suggestion, smoothing)
  run_report.write_json(path, result)
  return run_report.finite(result)  # as written: NaN and Inf as None
