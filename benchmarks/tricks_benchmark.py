"""What each trick costs: step time with it on against off, and recompute's memory.

    ./bazelw run //benchmarks:tricks
    ./bazelw run //benchmarks:tricks -- --image_size=224 --batch_size=32 --steps=20

Trains a ResNet-50 (tf_keras.applications, random weights) on random images with SGD
and momentum, in one process, once per configuration: the plain step, then with
adaptive gradient clipping, a cyclical learning rate, Extended BN in place of fused
BN, and recompute (every residual block), one step of each a round, alternated
(benchmarks/rounds.py). Prints the median step time of each and its ratio to the
plain step with their 95% intervals (benchmarks/stats.py), and for recompute the peak
memory one training step allocates beyond the weights and optimizer state (the
activations, mostly), with and without it. A benchmark, not a test: figures vary with the machine.
"""

import functools
import json
import statistics
import time

from absl import app
from absl import flags
import numpy as np
import tensorflow as tf
import tf_keras

from benchmarks import rounds as rounds_lib
from benchmarks import runs
from benchmarks import stats
from tricks import agc
from tricks import cyclical_lr
from tricks import extended_bn
from tricks import recompute

FLAGS = flags.FLAGS
flags.DEFINE_integer("image_size", 128, "square input resolution")
flags.DEFINE_integer("batch_size", 16, "examples a step")
flags.DEFINE_integer("steps", 6, "timed steps a configuration (after warm-up)")
flags.DEFINE_integer("warmup_steps", 2, "untimed steps first (tracing, allocation)")
flags.DEFINE_string("recompute_pattern", r"^(conv\d_block\d+)_",
                    "layer-name pattern of the recomputed segments (default: blocks)")
flags.DEFINE_list("configs", ["agc", "cyclical_lr", "extended_bn", "recompute"],
                  "configurations to time against the plain step")
flags.DEFINE_bool("jit_compile", False, "XLA-compile the train step (all configs)")
flags.DEFINE_string("output", None, "also write the figures here as JSON")

NUM_CLASSES = 10


def resnet50():
  return tf_keras.applications.ResNet50(
      weights=None, input_shape=(FLAGS.image_size, FLAGS.image_size, 3),
      classes=NUM_CLASSES, classifier_activation=None)


CONFIGS = {
    "plain": {},
    "agc": {"transform": lambda: agc.AdaptiveGradClip(clipping=0.01,
                                                      exclude=("predictions",))},
    "cyclical_lr": {"schedule": lambda: cyclical_lr.CyclicalLearningRate(
        0.001, 0.1, step_size=4, mode="triangular2")},
    "extended_bn": {"model": lambda m: extended_bn.swap_batch_norm(m)},
    "recompute": {"model": lambda m: recompute.recompute(m, FLAGS.recompute_pattern)},
}


def build(config):
  """A compiled training step of ResNet-50 with `config`'s trick on."""
  model = resnet50()
  if "model" in config:
    model = config["model"](model)
  schedule = config["schedule"]() if "schedule" in config else 0.01
  optimizer = tf_keras.optimizers.SGD(schedule, momentum=0.9)
  optimizer.build(model.trainable_variables)
  transform = config["transform"]() if "transform" in config else None
  if transform is not None:
    transform.build(model)

  @tf.function(jit_compile=FLAGS.jit_compile)
  def step(x, y):
    with tf.GradientTape() as tape:
      logits = model(x, training=True)
      loss = tf.reduce_mean(tf_keras.losses.sparse_categorical_crossentropy(
          y, logits, from_logits=True))
    variables = model.trainable_variables
    grads = tape.gradient(loss, variables)
    if transform is not None:
      grads = transform(grads, variables)
    optimizer.apply_gradients(zip(grads, variables))
    return loss

  return step


def step_memory(step, images, labels):
  """Peak bytes one step allocates beyond what is resident before it."""
  tf.config.experimental.reset_memory_stats("CPU:0")
  resident = tf.config.experimental.get_memory_info("CPU:0")["current"]
  step(images, labels).numpy()
  return tf.config.experimental.get_memory_info("CPU:0")["peak"] - resident


def main(argv):
  del argv
  rng = np.random.default_rng(0)
  size, batch = FLAGS.image_size, FLAGS.batch_size
  images = tf.constant(rng.normal(size=(batch, size, size, 3)), tf.float32)
  labels = tf.constant(rng.integers(0, NUM_CLASSES, batch))
  print(f"ResNet-50 at {size}px, batch {batch}, {FLAGS.steps} timed steps each, "
        f"{tf.config.threading.get_intra_op_parallelism_threads() or 'all'} threads; "
        f"{len(tf.config.list_logical_devices('CPU'))} CPU device(s)"
        f"{', XLA' if FLAGS.jit_compile else ''}", flush=True)
  unknown = set(FLAGS.configs) - set(CONFIGS)
  if unknown:
    raise app.UsageError(f"unknown --configs {sorted(unknown)}; choose from "
                         f"{sorted(set(CONFIGS) - {'plain'})}")
  names = ["plain"] + list(FLAGS.configs)
  tf_keras.utils.set_random_seed(0)
  steps = {name: build(CONFIGS[name]) for name in names}
  for name in names:
    for _ in range(FLAGS.warmup_steps):
      steps[name](images, labels).numpy()
  memory = {name: step_memory(steps[name], images, labels) for name in names}
  # One step of each configuration a round, alternated: machine drift hits all alike.
  def one_step(name):
    start = time.perf_counter()
    steps[name](images, labels).numpy()
    return time.perf_counter() - start

  times = rounds_lib.interleave({n: functools.partial(one_step, n) for n in names},
                                FLAGS.steps, warmup=False)
  results = {name: (statistics.median(times[name]), memory[name]) for name in names}
  base_time, base_peak = results["plain"]
  rows = {}
  print(f"\n{'trick':<14}{'ms/step [95% interval]':>26}  {'time / plain':<26}")
  for name, (seconds, peak) in results.items():
    ratio = stats.ratio_interval(ours=times["plain"], theirs=times[name])
    rows[name] = {"ms_per_step": round(seconds * 1e3, 1),
                  "time_ratio": round(ratio.ratio, 3), "time_ratio_interval": ratio.as_dict(),
                  "noise": stats.median_interval(times[name]).as_dict()["noise"],
                  "peak_step_memory_mib": round(peak / 2**20, 1),
                  "seconds": [round(t, 5) for t in times[name]]}
    print(f"{name:<14}{stats.median_interval(times[name]).format(scale=1e3, digits=0):>26}"
          f"  {str(ratio):<26}")
  print(f"({stats.TIMING_RULE}; time / plain above 1.0: slower than plain)")
  summary = {**runs.provenance(), "image_size": size, "batch_size": batch, "steps": FLAGS.steps,
             "jit_compile": FLAGS.jit_compile, "configs": rows}
  if "recompute" in results:
    saving = 1 - results["recompute"][1] / base_peak
    summary["recompute_memory_saving"] = round(saving, 3)
    print(f"\npeak memory of a training step beyond weights and optimizer state: "
          f"plain {base_peak / 2**20:.0f} MiB, recompute "
          f"{results['recompute'][1] / 2**20:.0f} MiB ({saving:.0%} saved)")
  if FLAGS.output:
    with open(FLAGS.output, "w") as f:
      json.dump(summary, f, indent=2)


if __name__ == "__main__":
  app.run(main)
