"""Timing shared by the benchmarks: the project's trainer on in-memory batches, and
chunks of its steps timed for benchmarks/rounds.py's rounds; the figures' intervals
and verdicts are benchmarks/stats.py's (`median_interval`, `ratio_interval`)."""

import dataclasses
import functools
import json
import time

import tensorflow as tf
import tf_keras

from benchmarks import runs
from benchmarks import stats
from recipes import build as build_lib
from recipes import experiment
from recipes.data import digits
from recipes.data import pipeline as pipeline_lib
from recipes.methods import losses
from recipes.methods import schedules

NUM_CLASSES = 10  # the embedded digits
SEED = 0


def default_steps_per_loop():
  """`Runtime.steps_per_loop` as the trainer has it by default."""
  return {f.name: f.default for f in dataclasses.fields(experiment.Runtime)}[
      "steps_per_loop"]


def build_trainer(model_fn, image_size, batch_size, steps_per_loop, model_dir, strategy,
                  jit_compile=False, mixed_precision=None):
  """The built run (`recipes.build.build`) of `model_fn` on the digits."""
  task, optimization, runtime = experiment.split(
      data=digits.digits, model=model_fn,
      # float32 batches: `fit` reads the very batches and its model takes them as
      # they come (uint8 ones would be normalised in the trainer's step alone).
      pipeline=functools.partial(pipeline_lib.InputPipeline, batch_size=batch_size,
                                 image_size=image_size, eval_image_size=image_size,
                                 uint8_batches=False),
      loss=losses.cross_entropy,
      optimizer=functools.partial(tf_keras.optimizers.SGD, momentum=0.9),
      learning_rate=functools.partial(schedules.warmup_cosine, peak_lr=0.1,
                                      warmup_epochs=1),
      epochs=10, seed=SEED, steps_per_loop=steps_per_loop, jit_compile=jit_compile,
      mixed_precision=mixed_precision, deterministic_ops=False)
  return build_lib.build(model_dir, strategy, task, optimization, runtime)


def materialised_batches(trainer, count):
  """`count` batches of the trainer's pipeline (epoch 0) held in memory, repeated."""
  ds = trainer.pipeline.train_dataset(trainer.data.source, trainer.data.train, 0, SEED)
  images, labels = zip(*ds.take(count))
  return tf.data.Dataset.from_tensor_slices(
      (tf.stack(images), tf.stack(labels))).repeat().prefetch(tf.data.AUTOTUNE)


def trainer_chunk(trainer, iterator, loops, steps_per_loop, host_work=True):
  """Seconds a step over `loops` loops, after one untimed loop; with `host_work`,
  each loop is followed by what `Trainer.train_epoch` does with its results (the
  running sums its progress bar shows; the bar's printing is not timed)."""
  step = trainer.step

  def one_loop():
    result = step.loop(iterator, steps_per_loop)
    if host_work:
      float(result.losses.sum())
      float(result.accuracies.sum())

  one_loop()
  start = time.perf_counter()
  for _ in range(loops):
    one_loop()
  return (time.perf_counter() - start) / (loops * steps_per_loop)


def loops_for(steps, steps_per_loop):
  return max(1, -(-steps // steps_per_loop))


def release():
  """Drops Keras's global state between parts (models built so far are done)."""
  tf_keras.backend.clear_session()


def end_report(summary, output=None):
  """The closing line on the timing rule; `summary` written to `output` as JSON, with
  its command, date, machine and revision (runs.provenance)."""
  print(f"\n({stats.TIMING_RULE})")
  if output:
    with open(output, "w") as f:
      json.dump({**runs.provenance(), **summary}, f, indent=2)
