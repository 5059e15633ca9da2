"""NFNet training steps in bfloat16 on CPU: TensorFlow's own grouped kernels (the
default, `tricks.grouped_conv`) against tf_keras's XLA grouped convolutions (the
default before the oneDNN fault was found) and against float32.

One process, the variants alternated round by round (interleaved chunks of `--steps`
steps after a warm-up); prints the median ms a step, the half-spread of the rounds
(noise), and each variant's speed-up over float32 as the median and range of the
per-round ratios.

    ./bazelw run //benchmarks:nfnet_bf16
    ./bazelw run //benchmarks:nfnet_bf16 -- --models=nfnet_nano --rounds=3 --steps=5
"""

import contextlib
import statistics
import time
from unittest import mock

from absl import app
from absl import flags
import tensorflow as tf
import tf_keras

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
flags.DEFINE_integer("rounds", 5, "timed chunks of each variant (interleaved)")
flags.DEFINE_integer("steps", None, "timed steps a chunk; default: each model's own")
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
  times = {v: [] for v in variants}
  for _ in range(rounds):
    for variant, step in steps_fns.items():
      times[variant].append(time_chunk(step, steps))
  return times


def report(name, times):
  size, batch, _ = CASES[name]
  print(f"\n{name}, {size}px, batch {batch} (ms a step: median, noise = half-spread "
        "of the rounds / median; speed-up over float32: median [min, max] of rounds)")
  base = times.get("float32")
  for variant, ts in times.items():
    median = statistics.median(ts)
    noise = (max(ts) - min(ts)) / 2 / median
    line = f"  {variant:20s} {median * 1e3:9.1f} ms  noise {noise:5.1%}"
    if base and variant != "float32":
      ratios = [b / t for b, t in zip(base, ts)]
      line += (f"  x{statistics.median(ratios):.2f} [{min(ratios):.2f}, "
               f"{max(ratios):.2f}]")
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
  for name in FLAGS.models:
    steps = FLAGS.steps or CASES[name][2]
    report(name, bench(name, FLAGS.variants, FLAGS.rounds, steps))


if __name__ == "__main__":
  app.run(main)
