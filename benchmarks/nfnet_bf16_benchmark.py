"""NFNet training steps in bfloat16 on CPU: TensorFlow's own grouped kernels (the
default, `tricks.grouped_conv`) against tf_keras's XLA grouped convolutions (the
default before the oneDNN fault was found) and against float32.

One process, the variants alternated round by round (`rounds.interleave`: chunks of
`--steps` steps after a warm-up, the order flipped every other round); prints the
median ms a step with its 95% interval, and each variant's speed-up over float32 as
the median of the per-round ratios with its 95% interval (`benchmarks/stats.py`:
order statistics, 6 rounds or more).

    ./bazelw run //benchmarks:nfnet_bf16
    ./bazelw run //benchmarks:nfnet_bf16 -- --models=nfnet_nano --rounds=6 --steps=5
"""

import contextlib
import functools
import json
import time
from unittest import mock

from absl import app
from absl import flags
import tensorflow as tf
import tf_keras

from benchmarks import rounds as rounds_lib
from benchmarks import runs
from benchmarks import stats
from tricks import grouped_conv
from zoo import registry

# name: (image size, batch, timed steps a chunk)
CASES = {"nfnet_nano": (32, 16, 20), "nfnet_f0": (128, 8, 3)}
VARIANTS = {
    "float32": "float32, TensorFlow's kernels",
    "bfloat16": "mixed_bfloat16, TensorFlow's grouped kernels (the default)",
    "bfloat16_xla": "mixed_bfloat16, tf_keras's XLA grouped convolutions (as before)",
    "bfloat16_f32_convs": "mixed_bfloat16, every WS convolution in float32",
}

flags.DEFINE_list("models", list(CASES), f"of {', '.join(CASES)}")
flags.DEFINE_list("variants", list(VARIANTS), f"of {', '.join(VARIANTS)}")
flags.DEFINE_integer("rounds", 6, "timed chunks of each variant (interleaved; 6 or more "
                     "for a 95% interval)")
flags.DEFINE_integer("steps", None, "timed steps a chunk; default: each model's own")
flags.DEFINE_string("output", None, "write the figures, every round's seconds, the "
                    "command, date, machine and revision to this JSON file")
FLAGS = flags.FLAGS


def kernel_patch(variant):
  """What makes `variant` trace the kernels it names (grouped_conv chooses at trace)."""
  if variant == "bfloat16_xla":
    return mock.patch.object(
        grouped_conv, "kernel_for",
        lambda groups, dtype="float32": "native" if groups == 1 else "xla")
  if variant == "bfloat16_f32_convs":
    return mock.patch.object(grouped_conv, "bfloat16_filter_gradient_unsafe",
                             lambda *args, **kwargs: True)
  return contextlib.nullcontext()


def train_step_for(name, variant):
  """A traced, warmed-up SGD step of `name` in `variant`: a function of no arguments."""
  size, batch, _ = CASES[name]
  policy = "float32" if variant == "float32" else "mixed_bfloat16"
  tf_keras.mixed_precision.set_global_policy(policy)
  try:
    model = registry.build(name, num_classes=10, input_shape=(size, size, 3))
  finally:
    tf_keras.mixed_precision.set_global_policy("float32")
  optimizer = tf_keras.optimizers.SGD(0.01, momentum=0.9)
  loss_fn = tf_keras.losses.SparseCategoricalCrossentropy(from_logits=True)
  x = tf.random.stateless_normal([batch, size, size, 3], seed=[1, 2])
  y = tf.random.stateless_uniform([batch], seed=[3, 4], maxval=10, dtype=tf.int32)

  @tf.function
  def step():
    with tf.GradientTape() as tape:
      loss = loss_fn(y, tf.cast(model(x, training=True), tf.float32))
    optimizer.apply_gradients(
        zip(tape.gradient(loss, model.trainable_weights), model.trainable_weights))
    return loss

  with kernel_patch(variant):
    step().numpy()  # trace, compile, warm up
  step().numpy()
  return step


def time_chunk(step, steps):
  start = time.perf_counter()
  for _ in range(steps):
    loss = step()
  loss.numpy()
  return (time.perf_counter() - start) / steps


def bench(name, variants, rounds, steps):
  """{variant: [seconds a step, one per round]}, the variants alternated."""
  steps_fns = {v: train_step_for(name, v) for v in variants}
  return rounds_lib.interleave(
      {v: functools.partial(time_chunk, step, steps) for v, step in steps_fns.items()},
      rounds)


def figures(name, times, steps):
  """The JSON of one model: each variant's rounds, median and interval (seconds a
  step), and its speed-up over float32 with its interval."""
  size, batch, _ = CASES[name]
  base = times.get("float32")
  return {"image_size": size, "batch_size": batch, "timed_steps_a_chunk": steps,
          "variants": {v: {"seconds_a_step": stats.median_interval(ts).as_dict(),
                           "seconds_each_round": [round(t, 6) for t in ts],
                           "over_float32": (stats.ratio_interval(ours=ts, theirs=base)
                                            .as_dict() if base and v != "float32"
                                            else None)}
                       for v, ts in times.items()}}


def report(name, model):
  """Prints one model's figures (`figures`' JSON)."""
  print(f"\n{name}, {model['image_size']}px, batch {model['batch_size']} (ms a step and "
        f"speed-up over float32: {stats.TIMING_RULE})")
  for variant, figure in model["variants"].items():
    line = f"  {variant:20s} {stats.figure_text(figure['seconds_a_step'], 1e3):>26} ms"
    if figure["over_float32"]:
      line += f"  {stats.ratio_text(figure['over_float32']):<26}"
    print(f"{line}   {VARIANTS[variant]}")


def main(argv):
  del argv
  unknown = [m for m in FLAGS.models if m not in CASES]
  unknown += [v for v in FLAGS.variants if v not in VARIANTS]
  if unknown:
    raise app.UsageError(f"unknown --models/--variants {unknown}: models are "
                         f"{list(CASES)}, variants {list(VARIANTS)}")
  if FLAGS.rounds < 1 or (FLAGS.steps is not None and FLAGS.steps < 1):
    raise app.UsageError("--rounds and --steps must be at least 1")
  print(f"TensorFlow {tf.__version__}; grouped kernel for bfloat16 now: "
        f"{grouped_conv.kernel_for(4, tf.bfloat16)}")
  result = {**runs.provenance(), "tensorflow": tf.__version__, "rounds": FLAGS.rounds,
            "models": {}}
  for name in FLAGS.models:
    steps = FLAGS.steps or CASES[name][2]
    result["models"][name] = figures(
        name, bench(name, FLAGS.variants, FLAGS.rounds, steps), steps)
    report(name, result["models"][name])
  if FLAGS.output:
    with open(FLAGS.output, "w") as f:
      json.dump(result, f, indent=1)
    print(f"wrote {FLAGS.output}")


if __name__ == "__main__":
  app.run(main)
