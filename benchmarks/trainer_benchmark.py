"""The trainer's loop against plain tf_keras `fit`, its host overhead, and the cache.

    ./bazelw run //benchmarks:trainer
    ./bazelw run //benchmarks:trainer -- --parts=sizes --steps_per_loop=8 --rounds=12

Three parts, each in this one process:

- Step time at three sizes (NFNet-nano 16px batch 8, NFNet-nano 32px batch 32,
  ResNet-50 64px batch 32), trained on the embedded digits. For each size the
  trainer is built with `recipes.build.build` (SGD with momentum, warm-up + cosine,
  cross-entropy) and a second copy of the model, with the same weights, optimizer
  type and configuration and the same loss function, is compiled for `fit` with
  `steps_per_execution` equal to the trainer's `steps_per_loop`. Both read the same
  dataset: batches of the trainer's own pipeline (`train_dataset` of epoch 0)
  materialised in memory and repeated, so only the loop differs. A chunk is one
  untimed loop (a fresh `fit` call starts its iterator there) then `--steps` timed
  steps; the trainer's chunk is `TrainStep.loop` calls on one iterator, each followed
  by the host work `Trainer.train_epoch` does with a loop's results; `fit`'s is one
  `fit(steps_per_epoch=...)` call, verbose 0, timed by a callback from the end of its
  first execution to the end of its last (one sync at each end; the per-epoch work of
  `fit` is outside the window; the callback's batch hooks, which verbose 0 would skip,
  cost microseconds an execution). Chunks alternate trainer / fit (the order flipped
  each round) so that machine drift hits both alike; the first chunk of each is
  tracing and untimed. Prints the median ms per step of each and `fit / trainer`.
- Host overhead: the same comparison on a model whose compute is negligible (8x8x3
  images, batch 8, one Dense layer), at `steps_per_loop` (and `steps_per_execution`)
  1 and 8: its time a step is the loop's per-step overhead (plus a few microseconds
  of compute). A third column times `TrainStep.loop` alone, without that host work,
  to show what that costs.
- The in-memory cache of decoded, resized training images: JPEGs written to a
  temporary image folder (`recipes.data.image_folder`), one epoch of the pipeline's
  training dataset iterated (no model) with `InputPipeline(cache=True)` and with
  `cache=False`, epochs alternating; the first epoch of each (which fills the cache)
  is untimed. Prints the median epoch time of each and the ratio.

Each figure is the median of its rounds with a noise estimate, the half-width of the
median's 95% interval over the median, and each ratio the median of the per-round
ratios with its 95% interval (`benchmarks/stats.py`: order statistics; none below 6
rounds). A benchmark, not a test: figures vary with the machine.
"""

import dataclasses
import functools
import os
import statistics
import tempfile
import time

from absl import app
from absl import flags
import numpy as np
import tensorflow as tf
import tf_keras

from benchmarks import rounds as rounds_lib
from benchmarks import stats
from benchmarks import timing
from recipes import strategies
from recipes.data import digits
from recipes.data import image_folder
from recipes.data import pipeline as pipeline_lib
from zoo import card as card_lib
from zoo import registry


@dataclasses.dataclass(frozen=True)
class Size:
  """A step size: a zoo model at a resolution and batch, and its default chunk."""
  model: str
  image_size: int
  batch_size: int
  steps: int  # timed steps a chunk by default


SIZES = {
    "nano16": Size("nfnet_nano", 16, 8, 32),
    "nano32": Size("nfnet_nano", 32, 32, 16),
    "resnet64": Size("resnet50", 64, 32, 8),
}
PARTS = ("sizes", "host", "cache")


FLAGS = flags.FLAGS
flags.DEFINE_list("parts", list(PARTS), "which parts to run")
flags.DEFINE_list("sizes", list(SIZES), f"step sizes to compare: {', '.join(SIZES)}")
flags.DEFINE_integer("steps", None, "timed steps a chunk at every size (rounded up to "
                     "whole loops); default: each size's own ("
                     + ", ".join(f"{k} {v.steps}" for k, v in SIZES.items()) + ")")
flags.DEFINE_integer("rounds", 10, "timed chunks of each loop a size (interleaved)")
flags.DEFINE_integer("steps_per_loop", None, "the trainer's steps_per_loop and fit's "
                     "steps_per_execution at the sizes; default: Runtime's default")
flags.DEFINE_integer("distinct_batches", 16, "batches materialised and repeated")
flags.DEFINE_bool("jit_compile", False,
                  "XLA: Runtime.jit_compile (each replica's forward and backward) and "
                  "compile(jit_compile=True) for fit (its whole step)")
flags.DEFINE_list("host_steps_per_loop", ["1", "8"], "steps_per_loop of the host case")
flags.DEFINE_integer("host_steps", 128, "timed steps a chunk in the host case")
flags.DEFINE_integer("host_rounds", 20, "timed chunks of each loop in the host case")
flags.DEFINE_integer("cache_images", 1024, "JPEGs in the image folder of the cache part")
flags.DEFINE_integer("cache_jpeg_size", 256, "their side, pixels")
flags.DEFINE_integer("cache_image_size", 64, "the pipeline's training resolution")
flags.DEFINE_integer("cache_batch_size", 32, "the pipeline's batch")
flags.DEFINE_integer("cache_epochs", 6, "timed epochs of each (after an untimed one)")
flags.DEFINE_string("output", None, "also write the figures here as JSON")


# -- building both loops ---------------------------------------------------------


def build_fit_model(trainer, steps_per_execution, jit_compile=False):
  """A second copy of the trainer's model, its weights, optimizer and loss function,
  compiled for `fit` with `steps_per_execution`."""
  with trainer.strategy.scope():
    model = trainer.task.model()
    model.set_weights(trainer.model.get_weights())
    optimizer = type(trainer.optimizer).from_config(trainer.optimizer.get_config())
    model.compile(optimizer=optimizer, loss=trainer.step.parts.loss_fn,
                  metrics=[tf_keras.metrics.SparseCategoricalAccuracy("accuracy")],
                  steps_per_execution=steps_per_execution, jit_compile=jit_compile)
  return model


# -- timing ----------------------------------------------------------------------


class _FitTimer(tf_keras.callbacks.Callback):
  """Times of the ends of a `fit` call's first and last executions (each synced)."""

  def __init__(self, executions):
    super().__init__()
    self._supports_tf_logs = True  # no per-execution conversion: fit as with verbose=0
    self.executions = executions
    self.calls = 0
    self.times = []

  def on_train_batch_end(self, batch, logs=None):
    self.calls += 1
    if self.calls in (1, self.executions):
      for value in (logs or {}).values():
        np.asarray(value)  # wait for the execution to finish
      self.times.append(time.perf_counter())


def fit_chunk(model, dataset, loops, steps_per_execution):
  """Seconds a step over `loops` executions of one `fit` call, after its first."""
  timer = _FitTimer(loops + 1)
  model.fit(dataset, steps_per_epoch=(loops + 1) * steps_per_execution, epochs=1,
            verbose=0, callbacks=[timer])
  first, last = timer.times
  return (last - first) / (loops * steps_per_execution)


def compare(trainer, fit_models, dataset, loops, rounds, loop_alone=False):
  """{steps_per_loop: {trainer, fit (, loop_alone): seconds-a-step lists}}: the
  trainer's loop and fit models keyed by steps_per_execution, interleaved on one
  dataset; `loop_alone` adds `TrainStep.loop` without the trainer's host work."""
  iterator = iter(trainer.strategy.experimental_distribute_dataset(dataset))
  runs = {}
  for n, model in fit_models.items():
    runs[("trainer", n)] = functools.partial(timing.trainer_chunk, trainer, iterator,
                                             loops[n], n)
    runs[("fit", n)] = functools.partial(fit_chunk, model, dataset, loops[n], n)
    if loop_alone:
      runs[("loop_alone", n)] = functools.partial(
          timing.trainer_chunk, trainer, iterator, loops[n], n, host_work=False)
  times = rounds_lib.interleave(runs, rounds)
  return {n: {kind: times[(kind, m)] for kind, m in runs if m == n} for n in fit_models}


def summarise(times):
  """Median ms a step of each loop, the paired ratio fit / trainer with its interval,
  and the worst noise."""
  trainer_s = statistics.median(times["trainer"])
  fit_s = statistics.median(times["fit"])
  ratio = stats.ratio_interval(ours=times["trainer"], theirs=times["fit"])
  row = {"trainer_ms_per_step": round(trainer_s * 1e3, 3),
         "fit_ms_per_step": round(fit_s * 1e3, 3),
         "fit_over_trainer": round(ratio.ratio, 3),
         "fit_over_trainer_interval": ratio.as_dict(),
         "noise": stats.largest_noise(times.values()),
         "rounds": len(times["trainer"])}
  if "loop_alone" in times:
    row["loop_alone_ms_per_step"] = round(statistics.median(times["loop_alone"]) * 1e3, 3)
  return row


# -- the parts -------------------------------------------------------------------


def bench_size(size, steps, rounds, steps_per_loop, model_dir, strategy,
               distinct_batches=16, jit_compile=False):
  """Trainer against fit at one `Size`."""
  model_fn = functools.partial(registry.build, size.model,
                               num_classes=timing.NUM_CLASSES,
                               input_shape=(size.image_size, size.image_size, 3))
  trainer = timing.build_trainer(model_fn, size.image_size, size.batch_size,
                                 steps_per_loop, model_dir, strategy, jit_compile)
  fit_model = build_fit_model(trainer, steps_per_loop, jit_compile)
  dataset = timing.materialised_batches(
      trainer, min(distinct_batches, trainer.length.steps_per_epoch))
  times = compare(trainer, {steps_per_loop: fit_model}, dataset,
                  {steps_per_loop: timing.loops_for(steps, steps_per_loop)}, rounds)
  row = summarise(times[steps_per_loop])
  row.update(model=size.model, image_size=size.image_size, batch_size=size.batch_size,
             steps_per_loop=steps_per_loop,
             timed_steps_a_chunk=(timing.loops_for(steps, steps_per_loop)
                                  * steps_per_loop))
  return row


def tiny_model(image_size=8):
  """One Dense layer on 8x8x3 images: a step's compute is a few microseconds."""
  inputs = tf_keras.Input((image_size, image_size, 3))
  outputs = tf_keras.layers.Dense(timing.NUM_CLASSES, name="logits")(
      tf_keras.layers.Flatten()(inputs))
  return tf_keras.Model(inputs, outputs, name="tiny")


def bench_host(steps_per_loops, steps, rounds, model_dir, strategy, distinct_batches=16,
               jit_compile=False):
  """{steps_per_loop: row}: trainer against fit on the tiny model."""
  trainer = timing.build_trainer(tiny_model, 8, 8, max(steps_per_loops), model_dir,
                                 strategy, jit_compile)
  fit_models = {n: build_fit_model(trainer, n, jit_compile) for n in steps_per_loops}
  dataset = timing.materialised_batches(trainer, distinct_batches)
  times = compare(trainer, fit_models, dataset,
                  {n: timing.loops_for(steps, n) for n in steps_per_loops}, rounds,
                  loop_alone=True)
  return {n: dict(summarise(times[n]),
                  timed_steps_a_chunk=timing.loops_for(steps, n) * n)
          for n in steps_per_loops}


def write_jpegs(root, count, side, classes=timing.NUM_CLASSES, seed=timing.SEED):
  """`count` smooth random JPEGs (quality 90) of `side`^2 in `classes` folders."""
  rng = np.random.default_rng(seed)
  for c in range(classes):
    os.makedirs(os.path.join(root, f"class_{c}"), exist_ok=True)
  for i in range(count):
    coarse = rng.uniform(0, 255, (1, max(2, side // 16), max(2, side // 16), 3))
    image = tf.image.resize(coarse, [side, side])[0] + rng.normal(0, 8, (side, side, 3))
    data = tf.io.encode_jpeg(tf.cast(tf.clip_by_value(image, 0, 255), tf.uint8),
                             quality=90)
    tf.io.write_file(os.path.join(root, f"class_{i % classes}", f"{i}.jpg"), data)


def epoch_seconds(pipeline, source, indices, epoch):
  """Seconds to iterate one training epoch of `pipeline` (no model)."""
  start = time.perf_counter()
  for _ in pipeline.train_dataset(source, indices, epoch, timing.SEED):
    pass
  return time.perf_counter() - start


def bench_cache(root, image_size, batch_size, epochs):
  """Epoch time of the training dataset with and without the in-memory cache."""
  source = image_folder.image_folder(root=root, test_per_class=1)
  indices = np.arange(len(source.train_labels))
  make = functools.partial(
      pipeline_lib.InputPipeline, batch_size=batch_size, image_size=image_size,
      eval_image_size=image_size, random_flip=True, mean=card_lib.IMAGENET_MEAN,
      std=card_lib.IMAGENET_STD)
  pipelines = {"cached": make(cache=True), "uncached": make(cache=False)}
  epoch = {name: 0 for name in pipelines}

  def run(name):
    seconds = epoch_seconds(pipelines[name], source, indices, epoch[name])
    epoch[name] += 1
    return seconds

  times = rounds_lib.interleave(
      {name: functools.partial(run, name) for name in pipelines}, epochs)
  cached, uncached = (statistics.median(times[k]) for k in ("cached", "uncached"))
  ratio = stats.ratio_interval(ours=times["cached"], theirs=times["uncached"])
  return {"images": len(indices), "image_size": image_size, "batch_size": batch_size,
          "cached_ms_per_epoch": round(cached * 1e3, 1),
          "uncached_ms_per_epoch": round(uncached * 1e3, 1),
          "uncached_over_cached": round(ratio.ratio, 2),
          "uncached_over_cached_interval": ratio.as_dict(),
          "noise": stats.largest_noise(times.values()),
          "epochs": epochs}


# -- main ------------------------------------------------------------------------


def check_flags():
  unknown = set(FLAGS.parts) - set(PARTS)
  if unknown:
    raise app.UsageError(f"unknown --parts {sorted(unknown)}; choose from {list(PARTS)}")
  unknown = set(FLAGS.sizes) - set(SIZES)
  if unknown:
    raise app.UsageError(f"unknown --sizes {sorted(unknown)}; choose from {list(SIZES)}")
  for name in ("steps", "rounds", "steps_per_loop", "distinct_batches", "host_steps",
               "host_rounds", "cache_jpeg_size", "cache_image_size", "cache_batch_size",
               "cache_epochs"):
    value = getattr(FLAGS, name)
    if value is not None and value < 1:
      raise app.UsageError(f"--{name}={value} must be >= 1")
  if FLAGS.cache_images < 2 * timing.NUM_CLASSES + FLAGS.cache_batch_size:
    raise app.UsageError(f"--cache_images={FLAGS.cache_images} must be at least "
                         f"{2 * timing.NUM_CLASSES + FLAGS.cache_batch_size}")
  try:
    spls = [int(n) for n in FLAGS.host_steps_per_loop]
  except ValueError:
    raise app.UsageError("--host_steps_per_loop takes whole numbers") from None
  if min(spls) < 1:
    raise app.UsageError("--host_steps_per_loop takes numbers >= 1")
  return sorted(set(spls))


def run_sizes(model_dir, strategy, steps_per_loop):
  """The trainer against fit at each --sizes entry; prints the table, returns its rows."""
  print(f"\nTrainer against fit (steps_per_execution = steps_per_loop = "
        f"{steps_per_loop}), {FLAGS.rounds} interleaved chunks each:", flush=True)
  rows = {}
  for name in FLAGS.sizes:
    size = SIZES[name]
    rows[name] = bench_size(size, FLAGS.steps or size.steps, FLAGS.rounds,
                            steps_per_loop, model_dir, strategy,
                            FLAGS.distinct_batches, FLAGS.jit_compile)
    timing.release()
    print(f"  {name}: done", flush=True)
  print(f"\n{'size':<32}{'trainer ms':>12}{'fit ms':>10}  {'fit/trainer':<26}"
        f"{'noise':>8}")
  for name, row in rows.items():
    label = f"{row['model']} {row['image_size']}px batch {row['batch_size']}"
    print(f"{label:<32}{row['trainer_ms_per_step']:>12.1f}"
          f"{row['fit_ms_per_step']:>10.1f}  "
          f"{stats.ratio_text(row['fit_over_trainer_interval']):<26}"
          f"{stats.noise_text([row['noise']]):>8}")
  print(f"({stats.TIMING_RULE})")
  return rows


def run_host(host_spls, default_spl, model_dir, strategy):
  """Host overhead a step at each --host_steps_per_loop; prints the table."""
  rows = bench_host(host_spls, FLAGS.host_steps, FLAGS.host_rounds, model_dir,
                    strategy, FLAGS.distinct_batches, FLAGS.jit_compile)
  timing.release()
  print("\nHost overhead a step (one Dense layer on 8x8x3, batch 8; "
        f"{FLAGS.host_rounds} interleaved chunks each):")
  print(f"{'steps_per_loop':<16}{'trainer ms':>12}{'loop alone':>12}{'fit ms':>10}  "
        f"{'fit/trainer':<26}{'noise':>8}")
  for n, row in rows.items():
    mark = " (default)" if n == default_spl else ""
    print(f"{str(n) + mark:<16}{row['trainer_ms_per_step']:>12.3f}"
          f"{row['loop_alone_ms_per_step']:>12.3f}{row['fit_ms_per_step']:>10.3f}  "
          f"{stats.ratio_text(row['fit_over_trainer_interval']):<26}"
          f"{stats.noise_text([row['noise']]):>8}")
  print("(loop alone: TrainStep.loop without the host work that "
        "Trainer.train_epoch does after every loop)")
  return {str(n): row for n, row in rows.items()}


def run_cache(tmp):
  """An epoch of the training dataset cached against uncached; prints the figures."""
  root = os.path.join(tmp, "images")
  print(f"\nWriting {FLAGS.cache_images} JPEGs of {FLAGS.cache_jpeg_size}px ...",
        flush=True)
  write_jpegs(root, FLAGS.cache_images, FLAGS.cache_jpeg_size)
  row = bench_cache(root, FLAGS.cache_image_size, FLAGS.cache_batch_size,
                    FLAGS.cache_epochs)
  row["jpeg_size"] = FLAGS.cache_jpeg_size
  print(f"\nAn epoch of the training dataset ({row['images']} JPEGs of "
        f"{FLAGS.cache_jpeg_size}px -> {row['image_size']}px, batch "
        f"{row['batch_size']}, no model; median of {row['epochs']} epochs after the "
        "first):")
  print(f"  cache=True {row['cached_ms_per_epoch']:.0f} ms, cache=False "
        f"{row['uncached_ms_per_epoch']:.0f} ms: uncached / cached "
        f"{stats.ratio_text(row['uncached_over_cached_interval'])} (noise "
        f"{stats.noise_text([row['noise']])})")
  return row


def main(argv):
  del argv
  host_spls = check_flags()
  default_spl = timing.default_steps_per_loop()
  steps_per_loop = FLAGS.steps_per_loop or default_spl
  strategy = strategies.make_strategy("auto")
  threads = tf.config.threading.get_intra_op_parallelism_threads() or "all"
  print(f"{strategy.__class__.__name__} on "
        f"{', '.join(strategy.extended.worker_devices)}; {threads} threads; Runtime's "
        f"default steps_per_loop is {default_spl}"
        f"{'; XLA' if FLAGS.jit_compile else ''}", flush=True)
  summary = {"default_steps_per_loop": default_spl, "jit_compile": FLAGS.jit_compile}
  with tempfile.TemporaryDirectory(prefix="trainer_benchmark_") as tmp:
    model_dir = os.path.join(tmp, "model_dir")
    if "sizes" in FLAGS.parts:
      summary["sizes"] = run_sizes(model_dir, strategy, steps_per_loop)
    if "host" in FLAGS.parts:
      summary["host"] = run_host(host_spls, default_spl, model_dir, strategy)
    if "cache" in FLAGS.parts:
      summary["cache"] = run_cache(tmp)
  timing.end_report(summary, FLAGS.output)


if __name__ == "__main__":
  app.run(main)
