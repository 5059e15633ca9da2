"""Training and inference speed of every zoo model family, against this machine.

    ./bazelw run //benchmarks:zoo
    ./bazelw run //benchmarks:zoo -- --models=nfnet_f0 --timm_python=/work/peer/bin/python
    ./bazelw run //benchmarks:zoo -- --device=gpu      # on a machine with a GPU

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
  alternation, where timm has the model, once a `--timm_settings` entry: PyTorch's
  default (NCHW, eager), channels_last, and `torch.compile` where it builds here.
  `ours / timm` is the speed ratio of our faster float32 variant over each: the median
  of the per-round ratios and its 95% interval from order statistics
  (`stats.ratio_interval`); "ahead" or "behind" only where the interval leaves out
  1.0 (and from at least 6 rounds), else parity.
- Inference: the SavedModel that `zoo.export` writes (JPEG bytes in, preprocessing and
  model inside) at batch 1 and 32, images a second, for `--inference_models`, with
  random 320 x 320 JPEGs, at each model's test resolution.

With `--device=gpu` (or `tpu`) the training cases run at their zoo training size and
an accelerator-sized batch (`DEVICE_BATCH`), in float32 and in the device's mixed
precision (bfloat16; float16 where it has none), each with and without XLA, and the
yardstick is the device's published dense peak (`device_peaks.PEAKS`, named with its
source). Where no such device is present it says so in one line and exits 2.

Every figure is the median of its rounds with a noise estimate: the half-width of the
median's 95% interval over the median (`stats.median_interval`; none below 6 rounds).
A benchmark, not a test: figures vary with the machine.
"""

import dataclasses
import functools
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Optional

from absl import app
from absl import flags
from absl import logging
import numpy as np
import tensorflow as tf
import tf_keras

from benchmarks import device_peaks
from benchmarks import rounds as rounds_lib
from benchmarks import stats
from benchmarks import timing
from recipes import strategies
from zoo import export
from zoo import registry


@dataclasses.dataclass(frozen=True)
class Case:
  """A model family at a training input, and its timm name (if any)."""
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
DEVICE_BATCH = {"nfnet_f0": 64, "resnet50": 128, "inception_v3": 64,
                "resnet32_cifar": 256, "nfnet_nano": 128}  # at each card's train_size
DEVICE_STEPS = 20  # timed steps a chunk on an accelerator, one trainer loop
VARIANTS = {  # name: (jit_compile, mixed_precision)
    "fp32": (False, None),
    "fp32_xla": (True, None),
    "bf16": (False, "mixed_bfloat16"),
    "bf16_xla": (True, "mixed_bfloat16"),
    "fp16": (False, "mixed_float16"),
    "fp16_xla": (True, "mixed_float16"),
}
CPU_VARIANTS = ("fp32", "fp32_xla", "bf16")
TIMM_SETTINGS = ("default", "channels_last", "compile", "compile_channels_last")
DEVICES = ("cpu", "gpu", "tpu")
INFERENCE_BATCHES = (1, 32)

FLAGS = flags.FLAGS
flags.DEFINE_list("models", list(CASES), f"training cases: {', '.join(CASES)}")
flags.DEFINE_list("variants", None, f"of each, from {', '.join(VARIANTS)}; default: "
                  f"{', '.join(CPU_VARIANTS)} on the CPU, float32 and the device's mixed "
                  "precision, with and without XLA, on an accelerator")
flags.DEFINE_integer("rounds", 6, "timed chunks of each variant (interleaved; 6 or more "
                     "for a 95% interval)")
flags.DEFINE_integer("steps", None, "timed steps a chunk; default: each case's own")
flags.DEFINE_integer("batch_size", None, "default: each case's own")
flags.DEFINE_integer("image_size", None, "default: each case's own")
flags.DEFINE_string("timm_python", None, "a Python with torch and timm: adds timm's "
                    "model to the alternation where timm has it")
flags.DEFINE_list("timm_settings", ["default", "channels_last", "compile"],
                  f"how timm runs, each its own chunk: {', '.join(TIMM_SETTINGS)}")
flags.DEFINE_enum("device", "cpu", DEVICES, "where to train: cpu (yardstick: the "
                  "measured matmul rate) or an accelerator (its published peak)")
flags.DEFINE_string("device_name", None, "the accelerator's name for the peak table, "
                    "where TensorFlow does not report it (TPUs: e.g. 'TPU v4')")
flags.DEFINE_string("tpu", "local", "with --device=tpu: the TPU's name or address")
flags.DEFINE_list("inference_models", ["nfnet_f0", "resnet50"],
                  "SavedModel inference (none: empty)")
flags.DEFINE_integer("inference_rounds", 6, "timed chunks of each inference batch size")
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
  """timm's training step in a process of `python` (benchmarks/peer_timm.py), run
  under one of its `TIMM_SETTINGS`; `skipped` holds why, where the setting cannot run
  here (torch.compile without a working C++ toolchain)."""

  def __init__(self, python, name, case, classes, setting):
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "peer_timm.py")
    self.process = subprocess.Popen(
        [python, script, name, str(case.image_size), str(case.batch_size), str(classes),
         setting], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    first = self.process.stdout.readline().strip()
    self.version, self.skipped = None, None
    if first.startswith("skipped"):
      self.skipped = first[len("skipped"):].strip()
      self.close()
    elif first.startswith("ready"):
      self.version = first[len("ready"):].strip()
    else:
      self.close()
      raise RuntimeError(f"timm peer for {name} did not start (--timm_python={python}): "
                         "does it import torch and timm?")

  def chunk(self, steps):
    self.process.stdin.write(f"{steps}\n")
    self.process.stdin.flush()
    return float(self.process.stdout.readline())

  def close(self):
    if self.process.stdin and not self.process.stdin.closed:
      self.process.stdin.close()
    self.process.wait(timeout=60)


def timm_key(setting):
  """The name of timm's row under `setting`: "timm" for its default."""
  return "timm" if setting == "default" else f"timm_{setting}"


def peer_ratios(times):
  """ours / timm for each timm row in `times` ({name: [seconds a step a round]}), ours
  being our faster float32 variant; None without one of each."""
  median = lambda name: statistics.median(times[name])
  ours = [n for n in ("fp32", "fp32_xla") if n in times]
  timm = [n for n in times if n.startswith("timm")]
  if not ours or not timm:
    return None
  ours = min(ours, key=median)
  return {"ours": ours, "timm_best": min(timm, key=median),
          "ratios": {n: stats.ratio_interval(times[ours], times[n]).as_dict()
                     for n in timm}}


# -- training ---------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Plan:
  """How every case is timed."""
  variants: tuple
  rounds: int
  steps: Optional[int] = None  # timed steps a chunk; None: the case's own
  steps_per_loop: Optional[int] = None  # None: the trainer's default
  timm_python: Optional[str] = None
  timm_settings: tuple = ()


def start_peers(plan, case):
  """{setting: Peer} of the case's timm model, skipped ones included."""
  peers = {}
  if plan.timm_python and case.timm:
    try:
      for setting in plan.timm_settings:
        peers[setting] = Peer(plan.timm_python, case.timm, case, timing.NUM_CLASSES,
                              setting)
    except Exception:
      for peer in peers.values():
        if not peer.skipped:
          peer.close()
      raise
  return peers


def bench_training(case, plan, model_dir, strategy):
  """{variants: {variant or timm row: {images_per_second, noise, ...}}, peers, ...} of
  one case."""
  model_fn = functools.partial(registry.build, case.model, num_classes=timing.NUM_CLASSES,
                               input_shape=(case.image_size, case.image_size, 3))
  runs, trainers = {}, {}
  steps = plan.steps or case.steps
  spl = plan.steps_per_loop or timing.default_steps_per_loop()
  loops = timing.loops_for(steps, spl)
  for name in plan.variants:
    jit_compile, precision = VARIANTS[name]
    trainer = timing.build_trainer(model_fn, case.image_size, case.batch_size, spl,
                                   os.path.join(model_dir, name), strategy,
                                   jit_compile=jit_compile, mixed_precision=precision)
    tf_keras.mixed_precision.set_global_policy("float32")
    dataset = timing.materialised_batches(trainer, 4)
    iterator = iter(trainer.strategy.experimental_distribute_dataset(dataset))
    trainers[name] = trainer
    runs[name] = functools.partial(timing.trainer_chunk, trainer, iterator, loops, spl)
  peers = start_peers(plan, case)
  try:
    for setting, peer in peers.items():
      if not peer.skipped:
        runs[timm_key(setting)] = functools.partial(peer.chunk, loops * spl)
    times = rounds_lib.interleave(runs, plan.rounds)
  finally:
    for peer in peers.values():
      if not peer.skipped:
        peer.close()
  flops = training_flops(trainers[plan.variants[0]].model, case.image_size)
  rows = {}
  for name, seconds in times.items():
    step = statistics.median(seconds)
    rows[name] = {"ms_per_step": round(step * 1e3, 1),
                  "images_per_second": round(case.batch_size / step, 2),
                  "noise": stats.median_interval(seconds).as_dict()["noise"],
                  "seconds_a_step_each_round": [round(t, 5) for t in seconds]}
  versions = {p.version for p in peers.values() if p.version}
  return {"model": case.model, "image_size": case.image_size,
          "batch_size": case.batch_size, "timed_steps_a_chunk": loops * spl,
          "rounds": plan.rounds, "training_flops_per_image": flops,
          "training_gflops_per_image": round(flops / 1e9, 3),
          "timm": case.timm if peers else None,
          "timm_version": ", ".join(sorted(versions)) or None,
          "timm_skipped": {timm_key(s): p.skipped for s, p in peers.items() if p.skipped},
          "variants": rows, "peers": peer_ratios(times)}


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
  times = rounds_lib.interleave(runs, rounds)
  return {name: {"test_size": sizes[name], **{
      str(batch): {"images_per_second": round(1 / statistics.median(times[(name, batch)]),
                                              2),
                   "noise": stats.median_interval(times[(name, batch)]).as_dict()["noise"],
                   "seconds_an_image_each_round": [round(t, 6) for t in
                                                   times[(name, batch)]]}
      for batch in INFERENCE_BATCHES}} for name in names}


# -- main -------------------------------------------------------------------------


def check_flags():
  for flag, known in (("models", CASES), ("variants", VARIANTS),
                      ("timm_settings", TIMM_SETTINGS)):
    unknown = sorted(set(getattr(FLAGS, flag) or ()) - set(known))
    if unknown:
      raise app.UsageError(f"unknown --{flag} {unknown}; choose from {list(known)}")
  unknown = sorted(set(FLAGS.inference_models) - set(registry.MODELS))
  if unknown:
    raise app.UsageError(f"unknown --inference_models {unknown}; `bazel run //zoo:list`")
  if FLAGS.variants is not None and not FLAGS.variants:
    raise app.UsageError("--variants is empty; choose from " + ", ".join(VARIANTS))
  for name in ("rounds", "steps", "inference_rounds", "matmul_reps", "batch_size",
               "image_size"):
    value = getattr(FLAGS, name)
    if value is not None and value < 1:
      raise app.UsageError(f"--{name}={value} must be >= 1")
  if FLAGS.timm_python and not os.access(FLAGS.timm_python, os.X_OK):
    raise app.UsageError(f"--timm_python={FLAGS.timm_python} is not an executable")
  if FLAGS.timm_python and FLAGS.device != "cpu":
    raise app.UsageError(f"--timm_python runs timm on the CPU; drop it with "
                         f"--device={FLAGS.device}")
  if FLAGS.timm_python and not FLAGS.timm_settings:
    raise app.UsageError("--timm_settings is empty; choose from "
                         + ", ".join(TIMM_SETTINGS))


@dataclasses.dataclass(frozen=True)
class Yardstick:
  """What a training rate is a fraction of: FLOP/s by the variant's compute dtype."""
  flops_per_second: dict  # {"float32": ..., "bfloat16": ..., "float16": ...}
  label: str  # for the table's footnote

  def of(self, variant):
    precision = VARIANTS[variant][1]
    dtype = {None: "float32", "mixed_bfloat16": "bfloat16",
             "mixed_float16": "float16"}[precision]
    return self.flops_per_second[dtype]


def device_yardstick(name, replicas):
  """The published peak of `replicas` devices called `name`, the same for every
  variant (a float32 step's fraction of the mixed-precision peak shows what is left);
  None for a device not in `device_peaks.PEAKS`."""
  peak = device_peaks.published_peak(name)
  if peak is None:
    return None
  rate = replicas * peak.tflops * 1e12
  return Yardstick({d: rate for d in ("float32", "bfloat16", "float16")},
                   f"{replicas} x {peak.tflops:g} TFLOP/s dense {peak.dtype}, "
                   f"{peak.source}")


def device_variants(name):
  """float32 and the device's mixed precision, each with and without XLA."""
  half = {"mixed_bfloat16": "bf16", "mixed_float16": "fp16"}[
      device_peaks.mixed_precision_for(device_peaks.published_peak(name))]
  return ("fp32", "fp32_xla", half, half + "_xla")


def add_fractions(row, yardstick):
  """Each variant's training FLOP/s as a fraction of `yardstick` (ours only)."""
  for name, figures in row["variants"].items():
    if name in VARIANTS and yardstick is not None:
      fraction = (figures["images_per_second"] * row["training_flops_per_image"]
                  / yardstick.of(name))
      figures["fraction_of_peak"] = float(f"{fraction:.4g}")


def print_training(rows, variants, yardstick):
  print(f"\n{'model':<16}{'input':>11}{'GFLOP/img':>10}  "
        + "".join(f"{v + ' img/s':>15}{'peak':>7}" for v in variants) + f"{'noise':>7}")
  for row in rows.values():
    v = row["variants"]
    size = f"{row['image_size']}px b{row['batch_size']}"
    line = f"{row['model']:<16}{size:>11}{row['training_gflops_per_image']:>10.3g}  "
    for name in variants:
      fraction = v[name].get("fraction_of_peak")
      line += (f"{v[name]['images_per_second']:>15.1f}"
               + (f"{fraction:>7.1%}" if fraction is not None else f"{'-':>7}"))
    print(line + f"{stats.noise_text(v[name]['noise'] for name in variants):>7}")
  label = (yardstick.label if yardstick
           else "an unknown peak: add the device to device_peaks.PEAKS")
  print(f"(peak: training FLOP/s, 3 x the forward pass's, as a fraction of {label})")


def print_peers(rows):
  """ours / timm with intervals, and which timm setting wins."""
  rows = [r for r in rows.values() if r["timm"]]
  if not rows:
    return
  print(f"\nours / timm, training step in float32 (per-round ratios: median and its "
        f"95% interval from order statistics):")
  print(f"{'model':<14}{'ours img/s':>16}  {'timm setting':<24}{'img/s':>8}  "
        f"{'ours/timm':<26}verdict")
  for row in rows:
    v, peers = row["variants"], row["peers"]
    ours = (f"{peers['ours']} {v[peers['ours']]['images_per_second']:.1f}" if peers
            else "-")
    first = f"{row['model']:<14}{ours:>16}  "
    for name, ratio in (peers["ratios"] if peers else {}).items():
      best = " (best)" if name == peers["timm_best"] else ""
      interval = stats.ratio_text(ratio)
      print(f"{first}{name + best:<24}{v[name]['images_per_second']:>8.1f}  "
            f"{interval:<26}{ratio['verdict']}")
      first = " " * 32
    for name, why in row["timm_skipped"].items():
      print(f"{first}{name:<24}skipped: {why}")
      first = " " * 32
  versions = sorted({r["timm_version"] for r in rows if r["timm_version"]})
  print(f"(timm: {'; '.join(versions)}; {stats.TIMING_RULE})")


def find_accelerator(kind):
  """(strategy, device name) of the local `kind` ("gpu" or "tpu"), or None."""
  if kind == "gpu":
    gpus = tf.config.list_physical_devices("GPU")
    if not gpus:
      return None
    details = tf.config.experimental.get_device_details(gpus[0])
    return (strategies.make_strategy("auto"),
            FLAGS.device_name or details.get("device_name", "GPU"))
  try:
    strategy = strategies.make_strategy("tpu", tpu=FLAGS.tpu)
  except Exception:  # pylint: disable=broad-except
    return None
  return strategy, FLAGS.device_name or "TPU (name it with --device_name)"


def setup(summary):
  """(strategy, variants, yardstick, steps_per_loop) for `--device`; exits 2 where
  the accelerator asked for is absent."""
  if FLAGS.device == "cpu":
    strategy = strategies.make_strategy("auto")
    matmul = {d: matmul_flops_per_second(d, reps=FLAGS.matmul_reps)
              for d in ("float32", "bfloat16")}
    print(f"matmul 2048^2: float32 {matmul['float32'] / 1e9:.0f} GFLOP/s, bfloat16 "
          f"{matmul['bfloat16'] / 1e9:.0f} GFLOP/s", flush=True)
    summary["matmul_gflops"] = {d: round(v / 1e9, 1) for d, v in matmul.items()}
    return (strategy, tuple(FLAGS.variants or CPU_VARIANTS),
            Yardstick({**matmul, "float16": matmul["float32"]},
                      "this machine's matmul rate in the variant's compute dtype"), None)
  found = find_accelerator(FLAGS.device)
  if found is None:
    print(f"--device={FLAGS.device}: no {FLAGS.device.upper()} is present on this "
          "machine (TensorFlow finds none); run it where there is one", file=sys.stderr)
    sys.exit(2)
  strategy, name = found
  yardstick = device_yardstick(name, strategy.num_replicas_in_sync)
  peak = device_peaks.published_peak(name)
  summary["device"] = {"kind": FLAGS.device, "name": name,
                       "replicas": strategy.num_replicas_in_sync,
                       "peak": dataclasses.asdict(peak) if peak else None}
  print(f"{name} x {strategy.num_replicas_in_sync}: "
        + (f"{peak.tflops:g} TFLOP/s dense {peak.dtype} each ({peak.source})" if peak
           else "no published peak in device_peaks.PEAKS"), flush=True)
  return (strategy, tuple(FLAGS.variants or device_variants(name)), yardstick,
          FLAGS.steps or DEVICE_STEPS)


def case_for(name):
  """The training case of model `name` for `--device`, with the flags' overrides."""
  case = CASES[name]
  if FLAGS.device != "cpu":
    case = dataclasses.replace(case, image_size=registry.card(name).train_size,
                               batch_size=DEVICE_BATCH[name], steps=DEVICE_STEPS)
  return dataclasses.replace(case, image_size=FLAGS.image_size or case.image_size,
                             batch_size=FLAGS.batch_size or case.batch_size)


def run_training(summary, strategy, plan, yardstick, tmp):
  for name in FLAGS.models:
    case = case_for(name)
    print(f"training {name} {case.image_size}px batch {case.batch_size}: "
          f"{', '.join(plan.variants)}"
          f"{' and timm ' + case.timm if plan.timm_python and case.timm else ''} ...",
          flush=True)
    row = bench_training(case, plan, os.path.join(tmp, name), strategy)
    add_fractions(row, yardstick)
    summary["training"][name] = row
    timing.release()
  if summary["training"]:
    print_training(summary["training"], plan.variants, yardstick)
    print_peers(summary["training"])


def run_inference(summary, tmp):
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
          + f"{stats.noise_text(row[str(b)]['noise'] for b in INFERENCE_BATCHES):>7}")


def main(argv):
  del argv
  check_flags()
  logging.set_verbosity(logging.WARNING)  # SavedModel's chatter
  tf.get_logger().setLevel("ERROR")  # the v1 profiler's deprecation warnings
  summary = {"training": {}, "inference": {}}
  strategy, variants, yardstick, steps_per_loop = setup(summary)
  threads = tf.config.threading.get_intra_op_parallelism_threads() or "all"
  print(f"{strategy.__class__.__name__} on "
        f"{', '.join(strategy.extended.worker_devices)}; {threads} threads", flush=True)
  plan = Plan(variants, FLAGS.rounds, FLAGS.steps, steps_per_loop, FLAGS.timm_python,
              tuple(FLAGS.timm_settings))
  with tempfile.TemporaryDirectory(prefix="zoo_benchmark_") as tmp:
    run_training(summary, strategy, plan, yardstick, tmp)
    if FLAGS.inference_models:
      run_inference(summary, tmp)
  timing.end_report(summary, FLAGS.output)


if __name__ == "__main__":
  app.run(main)
