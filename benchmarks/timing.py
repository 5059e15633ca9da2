"""Timing shared by the benchmarks: the project's trainer on in-memory batches,
interleaved chunks with a noise estimate, and speed ratios with an interval."""

import dataclasses
import functools
import json
import statistics
import time

import numpy as np
import tensorflow as tf
import tf_keras

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
      pipeline=functools.partial(pipeline_lib.InputPipeline, batch_size=batch_size,
                                 image_size=image_size, eval_image_size=image_size),
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


def half_spread(times):
  """|median of the first half - median of the second| / median: the noise."""
  half = len(times) // 2
  if half == 0:
    return 0.0
  return abs(statistics.median(times[:half]) - statistics.median(times[half:])) \
      / statistics.median(times)


def interleave(runs, rounds):
  """{name: [seconds a step]} of `rounds` rounds: each round one chunk of every run,
  the order reversed every other round; one untimed chunk of each first."""
  for run in runs.values():
    run()
  times = {name: [] for name in runs}
  names = list(runs)
  for r in range(rounds):
    for name in (names if r % 2 == 0 else names[::-1]):
      times[name].append(runs[name]())
  return times


# Below this many rounds even the whole range of the per-round ratios holds their
# median with less than 95% confidence (the sign test: 1 - 2 x 0.5^n, 93.75% at n = 5),
# and a bootstrap interval over so few is too narrow to trust.
MIN_ROUNDS_FOR_VERDICT = 6


@dataclasses.dataclass(frozen=True)
class RatioInterval:
  """How many times faster "ours" is than a peer: the median of the per-round ratios
  and a percentile-bootstrap interval of that median, with the extremes."""
  ratio: float
  low: float
  high: float
  confidence: float
  rounds: int
  smallest: float
  largest: float

  @property
  def verdict(self):
    """Ahead or behind only where the interval leaves out 1.0, from enough rounds."""
    if self.rounds < MIN_ROUNDS_FOR_VERDICT:
      return f"no verdict (fewer than {MIN_ROUNDS_FOR_VERDICT} rounds)"
    if self.low > 1.0:
      return "ahead"
    if self.high < 1.0:
      return "behind"
    return "parity (interval includes 1.0)"

  def __str__(self):
    return f"{self.ratio:.2f}x [{self.low:.2f}, {self.high:.2f}]"

  def as_dict(self):
    return {"ratio": round(self.ratio, 3), "low": round(self.low, 3),
            "high": round(self.high, 3), "confidence": self.confidence,
            "rounds": self.rounds, "smallest": round(self.smallest, 3),
            "largest": round(self.largest, 3), "verdict": self.verdict}


def ratio_interval(ours, theirs, confidence=0.95, resamples=4000, seed=0):
  """Speed of `ours` over `theirs` from seconds a step, round by round.

  `ours[i]` and `theirs[i]` are the same round's chunks (run back to back, as
  `interleave` runs them), so each round gives one ratio theirs[i] / ours[i] and slow
  drift of the machine cancels within it. The point is the median of those ratios;
  the interval is the percentile bootstrap of that median over rounds (Efron &
  Tibshirani 1993, ch. 13): `resamples` draws of the rounds with replacement, a fixed
  seed, the (1 - confidence) / 2 and (1 + confidence) / 2 quantiles.
  """
  ours, theirs = np.asarray(ours, float), np.asarray(theirs, float)
  if ours.shape != theirs.shape or ours.ndim != 1 or not ours.size:
    raise ValueError(f"need equally many rounds of each, got {ours.shape} and "
                     f"{theirs.shape}")
  ratios = theirs / ours
  draws = np.random.default_rng(seed).integers(0, ratios.size,
                                               (resamples, ratios.size))
  medians = np.median(ratios[draws], axis=1)
  tail = (1 - confidence) / 2
  low, high = np.quantile(medians, [tail, 1 - tail])
  return RatioInterval(float(np.median(ratios)), float(low), float(high), confidence,
                       int(ratios.size), float(ratios.min()), float(ratios.max()))


def loops_for(steps, steps_per_loop):
  return max(1, -(-steps // steps_per_loop))


def release():
  """Drops Keras's global state between parts (models built so far are done)."""
  tf_keras.backend.clear_session()


def end_report(summary, output=None):
  """The closing line on noise; `summary` written to `output` as JSON when given."""
  print("\n(noise: how far the medians of the first and second half of the rounds "
        "differ; ratios within it are noise)")
  if output:
    with open(output, "w") as f:
      json.dump(summary, f, indent=2)
