"""Training and inference speed of every zoo model family, against this machine.

    ./bazelw run //benchmarks:zoo
    ./bazelw run //benchmarks:zoo -- --models=nfnet_f0 --timm_python=/tmp/timm/bin/python

In one process:

- This machine's matrix-multiply rate (a 2048^2 by 2048^2 `tf.linalg.matmul`,
  2 n^3 FLOPs, median of `--matmul_reps`), float32 and bfloat16: the yardstick.
- Training, through the project's trainer (`recipes.build.build`, as
  //benchmarks:trainer builds it: SGD with momentum, cross-entropy, 10 classes, the
  embedded digits resized and held in memory), each model family at a CPU-sized input
  (`CASES`), in three variants: float32, float32 with XLA (`Runtime.jit_compile`), and
  `Runtime.mixed_precision="mixed_bfloat16"`. Chunks of each variant alternate, the
  order flipped every round; the first chunk of each is untimed (tracing, compiling).
  Prints images a second and what fraction of the matmul rate (in the variant's
  compute dtype) that is, from the model's training FLOPs: 3 x the forward pass's
  (backward = 2 x forward, the usual count), the forward counted by TensorFlow's
  profiler (`float_operation`: 2 FLOPs a multiply-add in convolutions and matmuls,
  plus the element-wise ops it knows).
- With `--timm_python` (an interpreter with PyTorch and timm, outside the project),
  the same architecture in timm (`benchmarks/peer_timm.py`) takes part in the same
  alternation, where timm has the model; `ours / timm` is the speed ratio.
- Inference: the SavedModel that `zoo.export` writes (JPEG bytes in, preprocessing and
  model inside) at batch 1 and 32, images a second, for `--inference_models`, with
  random 320 x 320 JPEGs, at each model's test resolution.

Every figure has a noise estimate (how far the medians of the first and second half of
its rounds differ). A benchmark, not a test: figures vary with the machine.
"""

import dataclasses
import functools
import os
import statistics
import subprocess
import tempfile
import time
from typing import Optional

from absl import app
from absl import flags
from absl import logging
import numpy as np
import tensorflow as tf
import tf_keras

from benchmarks import timing
from recipes import strategies
from zoo import export
from zoo import registry


@dataclasses.dataclass(frozen=True)
class Case:
  """A model family at a CPU-sized training input, and its timm name (if any)."""
  model: str
  image_size: int
  batch_size: int
  steps: int  # timed steps a chunk
  timm: Optional[str] = None


CASES = {c.model: c for c in (
    Case("nfnet_f0", 128, 8, 3, "dm_nfnet_f0"),
    Case("resnet50", 64, 32, 4, "resnet50"),
    Case("inception_v3", 299, 4, 3, "inception_v3"),
    Case("resnet32_cifar", 32, 128, 4),
    Case("nfnet_nano", 32, 32, 8),
)}
VARIANTS = {  # name: (jit_compile, mixed_precision)
    "fp32": (False, None),
    "fp32_xla": (True, None),
    "bf16": (False, "mixed_bfloat16"),
}
INFERENCE_BATCHES = (1, 32)

FLAGS = flags.FLAGS
flags.DEFINE_list("models", list(CASES), f"training cases: {', '.join(CASES)}")
flags.DEFINE_list("variants", list(VARIANTS), f"of each: {', '.join(VARIANTS)}")
flags.DEFINE_integer("rounds", 4, "timed chunks of each variant (interleaved)")
flags.DEFINE_integer("steps", None, "timed steps a chunk; default: each case's own")
flags.DEFINE_string("timm_python", None, "a Python with torch and timm: adds timm's "
                    "model to the alternation where timm has it")
flags.DEFINE_list("inference_models", ["nfnet_f0", "resnet50"],
                  "SavedModel inference (none: empty)")
flags.DEFINE_integer("inference_rounds", 4, "timed chunks of each inference batch size")
flags.DEFINE_integer("matmul_reps", 10, "timed matmuls of each dtype")
flags.DEFINE_string("output", None, "also write the figures here as JSON")


# -- the yardstick and the work ---------------------------------------------------


def matmul_flops_per_second(dtype, n=2048, reps=10):
  """FLOP/s of an n x n by n x n matmul in `dtype` (2 n^3 FLOPs), median of `reps`."""
  a = tf.random.stateless_normal([n, n], seed=[1, 2], dtype=tf.float32)
  a = tf.cast(a, dtype)
  matmul = tf.function(lambda x: tf.reduce_sum(tf.cast(tf.linalg.matmul(x, x),
                                                       tf.float32)))
  matmul(a).numpy()
  times = []
  for _ in range(reps):
    start = time.perf_counter()
    matmul(a).numpy()
    times.append(time.perf_counter() - start)
  return 2 * n ** 3 / statistics.median(times)


def forward_flops(model, image_size):
  """FLOPs of `model`'s inference forward pass on one image (TensorFlow's profiler)."""
  fn = tf.function(lambda x: model(x, training=False)).get_concrete_function(
      tf.TensorSpec([1, image_size, image_size, 3], tf.float32))
  options = tf.compat.v1.profiler.ProfileOptionBuilder.float_operation()
  options["output"] = "none"
  return tf.compat.v1.profiler.profile(
      graph=fn.graph, run_meta=tf.compat.v1.RunMetadata(), cmd="op",
      options=options).total_float_ops


def training_flops(model, image_size):
  """FLOPs of one training image: forward + backward (2 x forward)."""
  return 3 * forward_flops(model, image_size)


# -- the peer ---------------------------------------------------------------------


class Peer:
  """timm's training step in a process of `python` (benchmarks/peer_timm.py)."""

  def __init__(self, python, name, image_size, batch, classes):
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "peer_timm.py")
    self.process = subprocess.Popen(
        [python, script, name, str(image_size), str(batch), str(classes)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    self.version = self.process.stdout.readline().strip()
    if not self.version.startswith("ready"):
      self.close()
      raise RuntimeError(f"timm peer for {name} did not start (--timm_python={python}): "
                         "does it import torch and timm?")

  def chunk(self, steps):
    self.process.stdin.write(f"{steps}\n")
    self.process.stdin.flush()
    return float(self.process.stdout.readline())

  def close(self):
    if self.process.stdin:
      self.process.stdin.close()
    self.process.wait(timeout=60)


# -- training ---------------------------------------------------------------------


def bench_training(case, variants, rounds, steps, model_dir, strategy, timm_python=None):
  """{variant (and "timm"): {images_per_second, noise, ...}} of one case."""
  model_fn = functools.partial(registry.build, case.model, num_classes=timing.NUM_CLASSES,
                               input_shape=(case.image_size, case.image_size, 3))
  runs, trainers = {}, {}
  spl = timing.default_steps_per_loop()
  loops = timing.loops_for(steps, spl)
  for name in variants:
    jit_compile, precision = VARIANTS[name]
    trainer = timing.build_trainer(model_fn, case.image_size, case.batch_size, spl,
                               os.path.join(model_dir, name), strategy,
                               jit_compile=jit_compile, mixed_precision=precision)
    tf_keras.mixed_precision.set_global_policy("float32")
    dataset = timing.materialised_batches(trainer, 4)
    iterator = iter(trainer.strategy.experimental_distribute_dataset(dataset))
    trainers[name] = trainer
    runs[name] = functools.partial(timing.trainer_chunk, trainer, iterator, loops, spl)
  peer = None
  if timm_python and case.timm:
    peer = Peer(timm_python, case.timm, case.image_size, case.batch_size, timing.NUM_CLASSES)
    runs["timm"] = functools.partial(peer.chunk, loops * spl)
  try:
    times = timing.interleave(runs, rounds)
  finally:
    if peer:
      peer.close()
  flops = training_flops(trainers[variants[0]].model, case.image_size)
  rows = {}
  for name, seconds in times.items():
    step = statistics.median(seconds)
    rows[name] = {"ms_per_step": round(step * 1e3, 1),
                  "images_per_second": round(case.batch_size / step, 2),
                  "noise": round(timing.half_spread(seconds), 3)}
  return {"model": case.model, "image_size": case.image_size,
          "batch_size": case.batch_size, "timed_steps_a_chunk": loops * spl,
          "rounds": rounds, "training_gflops_per_image": round(flops / 1e9, 3),
          "timm": case.timm if peer else None,
          "timm_version": peer.version if peer else None, "variants": rows}


# -- inference --------------------------------------------------------------------


def random_jpegs(count, side=320, seed=0):
  """`count` smooth random JPEG encodings of side x side."""
  rng = np.random.default_rng(seed)
  out = []
  for _ in range(count):
    coarse = rng.uniform(0, 255, (1, side // 16, side // 16, 3))
    image = tf.image.resize(coarse, [side, side])[0]
    out.append(tf.io.encode_jpeg(tf.cast(image, tf.uint8), quality=90).numpy())
  return out


def bench_inference(names, rounds, root):
  """{model: {batch: {images_per_second, noise}}}: the exported SavedModel's serving
  signature on JPEG bytes, batch sizes interleaved across models."""
  jpegs = random_jpegs(max(INFERENCE_BATCHES))
  runs, sizes = {}, {}
  for name in names:
    card = registry.card(name)
    model = registry.build(name, num_classes=1000,
                           input_shape=(card.test_size, card.test_size, 3))
    path = export.export_saved_model(model, os.path.join(root, name), card.test_size,
                                     card.mean, card.std, card.test_crop,
                                     card.resize_method)
    serve = tf.saved_model.load(path).signatures["serving_default"]
    sizes[name] = card.test_size
    for batch in INFERENCE_BATCHES:
      images = tf.constant(jpegs[:batch])
      calls = max(1, 16 // batch)

      def run(serve=serve, images=images, calls=calls, batch=batch):
        start = time.perf_counter()
        for _ in range(calls):
          serve(images=images)["classes"].numpy()
        return (time.perf_counter() - start) / (calls * batch)
      runs[(name, batch)] = run
    timing.release()
  times = timing.interleave(runs, rounds)
  return {name: {"test_size": sizes[name], **{
      str(batch): {"images_per_second": round(1 / statistics.median(times[(name, batch)]),
                                              2),
                   "noise": round(timing.half_spread(times[(name, batch)]), 3)}
      for batch in INFERENCE_BATCHES}} for name in names}


# -- main -------------------------------------------------------------------------


def check_flags():
  for flag, known in (("models", CASES), ("variants", VARIANTS)):
    unknown = sorted(set(getattr(FLAGS, flag)) - set(known))
    if unknown:
      raise app.UsageError(f"unknown --{flag} {unknown}; choose from {list(known)}")
  unknown = sorted(set(FLAGS.inference_models) - set(registry.MODELS))
  if unknown:
    raise app.UsageError(f"unknown --inference_models {unknown}; `bazel run //zoo:list`")
  if not FLAGS.variants:
    raise app.UsageError("--variants is empty; choose from " + ", ".join(VARIANTS))
  for name in ("rounds", "steps", "inference_rounds", "matmul_reps"):
    value = getattr(FLAGS, name)
    if value is not None and value < 1:
      raise app.UsageError(f"--{name}={value} must be >= 1")
  if FLAGS.timm_python and not os.access(FLAGS.timm_python, os.X_OK):
    raise app.UsageError(f"--timm_python={FLAGS.timm_python} is not an executable")


def print_training(rows, matmul):
  print(f"\n{'model':<16}{'input':>11}{'GFLOP/img':>10}  "
        + "".join(f"{v + ' img/s':>15}{'peak':>7}" for v in FLAGS.variants)
        + (f"{'timm img/s':>12}{'ours/timm':>11}" if FLAGS.timm_python else "")
        + f"{'noise':>7}")
  for row in rows.values():
    v = row["variants"]
    size = f"{row['image_size']}px b{row['batch_size']}"
    line = f"{row['model']:<16}{size:>11}{row['training_gflops_per_image']:>10.3g}  "
    flops = row["training_gflops_per_image"] * 1e9
    for name in FLAGS.variants:
      ips = v[name]["images_per_second"]
      peak = matmul["bfloat16" if VARIANTS[name][1] else "float32"]
      line += f"{ips:>15.1f}{ips * flops / peak:>7.1%}"
    if FLAGS.timm_python:
      ours = [v[n]["images_per_second"] for n in ("fp32", "fp32_xla") if n in v]
      if "timm" in v and ours:
        timm = v["timm"]["images_per_second"]
        line += f"{timm:>12.1f}{max(ours) / timm:>10.2f}x"
      else:
        line += f"{'-':>12}{'-':>11}"
    line += f"{max(x['noise'] for x in v.values()):>7.1%}"
    print(line)
  print("(peak: training FLOP/s as a fraction of the matmul rate in the variant's "
        "compute dtype; ours/timm: our faster float32 variant over timm's float32)")


def main(argv):
  del argv
  check_flags()
  logging.set_verbosity(logging.WARNING)  # SavedModel's chatter
  tf.get_logger().setLevel("ERROR")  # the v1 profiler's deprecation warnings
  strategy = strategies.make_strategy("auto")
  threads = tf.config.threading.get_intra_op_parallelism_threads() or "all"
  print(f"{strategy.__class__.__name__} on "
        f"{', '.join(strategy.extended.worker_devices)}; {threads} threads", flush=True)
  matmul = {d: matmul_flops_per_second(d, reps=FLAGS.matmul_reps)
            for d in ("float32", "bfloat16")}
  print(f"matmul 2048^2: float32 {matmul['float32'] / 1e9:.0f} GFLOP/s, bfloat16 "
        f"{matmul['bfloat16'] / 1e9:.0f} GFLOP/s", flush=True)
  summary = {"matmul_gflops": {d: round(v / 1e9, 1) for d, v in matmul.items()},
             "training": {}, "inference": {}}
  with tempfile.TemporaryDirectory(prefix="zoo_benchmark_") as tmp:
    for name in FLAGS.models:
      case = CASES[name]
      print(f"training {name} {case.image_size}px batch {case.batch_size}: "
            f"{', '.join(FLAGS.variants)}"
            f"{' and timm ' + case.timm if FLAGS.timm_python and case.timm else ''} ...",
            flush=True)
      summary["training"][name] = bench_training(
          case, FLAGS.variants, FLAGS.rounds, FLAGS.steps or case.steps,
          os.path.join(tmp, name), strategy, FLAGS.timm_python)
      timing.release()
    if summary["training"]:
      print_training(summary["training"], matmul)
      versions = {r["timm_version"] for r in summary["training"].values() if r["timm"]}
      if versions:
        print(f"(timm: {', '.join(v.replace('ready ', '') for v in sorted(versions))})")
    if FLAGS.inference_models:
      print("\nexporting " + ", ".join(FLAGS.inference_models) + " ...", flush=True)
      rows = bench_inference(FLAGS.inference_models, FLAGS.inference_rounds,
                             os.path.join(tmp, "export"))
      summary["inference"] = rows
      print(f"\nSavedModel inference, JPEG bytes in (decode, crop, resize, model):")
      print(f"{'model':<16}{'test size':>10}"
            + "".join(f"{'batch ' + str(b) + ' img/s':>17}" for b in INFERENCE_BATCHES)
            + f"{'noise':>7}")
      for name, row in rows.items():
        print(f"{name:<16}{row['test_size']:>10}"
              + "".join(f"{row[str(b)]['images_per_second']:>17.1f}"
                        for b in INFERENCE_BATCHES)
              + f"{max(row[str(b)]['noise'] for b in INFERENCE_BATCHES):>7.1%}")
  timing.end_report(summary, FLAGS.output)


if __name__ == "__main__":
  app.run(main)
