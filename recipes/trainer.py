"""The one trainer every recipe configures: build, fit, finish.

    built = build.build(model_dir, strategy, task, optimization, runtime)  # build.py
    lifecycle.run_in_model_dir(built, body)  # lock, config.gin, checkpoints, close: lifecycle.py
      fit(trainer, run_dir)      # this module: the epochs, and at each epoch's end
                                 # summaries, validation (best.py), a checkpoint
                                 # (checkpoints.py); rollbacks (nonfinite.py) and
                                 # SIGTERM (preemption.py) around them
      finish.finish(...)         # report, plot, export, operative config: finish.py

Checkpoints are written every `checkpoint_every_epochs` and restored on start, and
every epoch's data is a function of (seed, epoch), so rerunning a command on the same
model_dir resumes and finishes exactly as an uninterrupted run would.
"""

import dataclasses
import time
from typing import Any, Dict, Optional

import tensorflow as tf
import tf_keras

from recipes import build as build_lib
from recipes import evaluation
from recipes import experiment
from recipes import finish as finish_lib
from recipes import hooks
from recipes import lifecycle
from recipes import nonfinite
from recipes import preemption
from recipes.data import pipeline as pipeline_lib
from recipes.errors import Diverged
from recipes.methods import phases as phases_lib
from tricks import weight_ema


class Trainer:
  """Trains and evaluates a built run (build.Built) epoch by epoch. `on_step(step,
  loss, accuracy, learning_rate)`, if given, sees every global batch (up to a
  non-finite one): the LR range test records them."""

  def __init__(self, built, on_step=None):
    self.built = built
    self.on_step = on_step
    self.span = None  # the phase the model is set up for

  # -- training ----------------------------------------------------------------

  def begin_epoch(self, epoch):
    """Tells the loss the epoch (a loss with `set_epoch`, e.g. deferred re-weighting)
    and sets the trainable layers of the phase that trains `epoch` (and retraces).
    `epoch` = the run's epochs sets up the state after training (the last phase)."""
    built = self.built
    if isinstance(built.step.parts.loss_fn, hooks.EpochAware):
      built.step.parts.loss_fn.set_epoch(epoch)
    span = phases_lib.span_at(built.length.spans, epoch)
    if span == self.span:
      return
    if built.length.phased and (self.span is None or span.trainable != self.span.trainable):
      phases_lib.set_trainable(built.model, span.trainable)
      built.step.retrace()
      print(f"Epoch {epoch + 1}: phase trains {span.trainable!r} at x{span.lr_scale:g} "
            "the rate", flush=True)
    self.span = span

  def train_epoch(self, epoch, *, start, seed, stop):
    """Trains epoch `epoch` from its step `start` in loops of `steps_per_loop` steps,
    on the data order of `seed`. Returns the epoch's steps done:
    fewer than its length when `stop()` turned true between two loops. Raises
    NonFinite after a loop with a step whose loss or gradient norm is not finite."""
    built = self.built
    steps = self.steps_in(epoch)

    def dataset_fn(context):
      """This input pipeline's per-replica batches: `per_step` of them a global step."""
      dataset = built.pipeline.train_dataset(built.data.source, built.data.train, epoch,
                                             seed, context)
      per_step = context.num_replicas_in_sync // context.num_input_pipelines
      if steps < built.length.steps_per_epoch:  # a run measured in steps ends mid-epoch
        dataset = dataset.take(steps * per_step)
      if start:  # resuming mid-epoch: the epoch's order is rebuilt, its first steps skipped
        dataset = dataset.skip(start * per_step)
      return dataset

    iterator = iter(built.strategy.distribute_datasets_from_function(dataset_fn))
    bar = tf_keras.utils.Progbar(steps, stateful_metrics=["loss", "accuracy"],
                                 unit_name="step")
    done, loss_sum, accuracy_sum = start, 0.0, 0.0
    while done < steps:
      if stop():
        return done
      n = min(built.runtime.steps_per_loop, steps - done)
      result = built.step.loop(iterator, n)
      first = epoch * built.length.steps_per_epoch + done
      if self.on_step is not None:
        for i in range(n if result.bad_step < 0 else result.bad_step + 1):
          self.on_step(first + i, float(result.losses[i]), float(result.accuracies[i]),
                       float(self.learning_rate(first + i)))
      if result.bad_step >= 0:
        raise nonfinite.NonFinite(first + result.bad_step, epoch, loss=result.bad_loss,
                                  grad_norm=result.bad_grad_norm)
      done += n
      # The loop's own per-batch means (equal batches): the epoch's running means,
      # without reading the metrics back from the device every loop.
      loss_sum += float(result.losses.sum())
      accuracy_sum += float(result.accuracies.sum())
      bar.update(done, values=[("loss", loss_sum / (done - start)),
                               ("accuracy", accuracy_sum / (done - start))])
    built.step.end_epoch()  # the epoch is complete: once-an-epoch weight constraints
    return done

  def steps_in(self, epoch):
    """Global steps in epoch `epoch` (the last one of a run measured in steps is short)."""
    length = self.built.length
    return min(length.steps_per_epoch, length.total_steps - epoch * length.steps_per_epoch)

  # -- evaluation --------------------------------------------------------------

  def predict(self, split="test", evaluator=None):
    """(labels, outputs) of the test split or the validation examples: predictions,
    or what `evaluator` (a train_step.EvalStep) computes instead."""
    data, pipeline = self.built.data, self.built.pipeline
    indices = None if split == "test" else data.validation
    name = "test" if split == "test" else data.validation_split
    return (evaluator or self.built.evaluator).predict(
        lambda context: pipeline.eval_dataset(data.source, name, indices, context),
        pipeline_lib.PAD_LABEL)

  def score(self, split="test"):
    """Long-tail metrics of the model's current weights on `split`."""
    labels, predictions = self.predict(split)
    return evaluation.long_tail_metrics(labels, predictions, self.built.data.counts,
                                        *self.built.task.shot_thresholds)

  def evaluate(self, split="test"):
    """`score`, with the optimizer's weight averages if it keeps them."""
    with weight_ema.averaged_weights(self.built.optimizer,
                                     self.built.model.trainable_variables):
      return self.score(split)

  def learning_rate(self, step=None):
    """The rate at global step `step` (default: the optimizer's current step)."""
    schedule = self.built.schedule
    if callable(schedule):
      return schedule(self.built.optimizer.iterations if step is None else step)
    return schedule


@dataclasses.dataclass
class Record:
  """What `fit` leaves for `finish`."""
  last_epoch: int  # epochs done
  final_train_loss: Optional[float]
  seconds: float  # training time in this process
  best: Optional[Dict[str, Any]] = None  # best.Best.summary()
  stopped_early: bool = False
  rollbacks_this_process: int = 0  # after a non-finite step


def fit(trainer, run_dir):
  """Trains from the latest good checkpoint to the run's end (or an early stop).

  A non-finite step rolls back to the last good checkpoint and retries on a fresh
  data order (nonfinite.RollbackPolicy). SIGTERM (or Ctrl-C) saves a checkpoint where the
  run is and raises Preempted."""
  ckpt = run_dir.checkpoints
  epoch, start = ckpt.restore()
  if ckpt.restored is None:
    try:
      ckpt.save(0)  # the point a divergence in the first epochs rolls back to
    except nonfinite.NonFinite as bad:
      raise Diverged(f"the initial weights are not finite ({bad.what}); check the model's "
                     "pretrained weights or initialisation") from None
  began = time.time()
  rollbacks = nonfinite.RollbackPolicy(trainer.built.runtime.nonfinite_retries)
  with preemption.Notice() as notice:
    stop = preemption.stop_requested(trainer.built.strategy, notice)
    while True:
      try:
        loss, stopped = _train_epochs(trainer, run_dir, epoch, start, (notice, stop))
        break
      except nonfinite.NonFinite as bad:
        rollbacks.count_one(bad, ckpt.restored)
        epoch, start = ckpt.roll_back()
        rollbacks.went_back_to(ckpt.restored)
        run_dir.best.forget_later()
        print(f"\nStep {bad.step}: {bad.what}; rolled back to {ckpt.restored} (epoch "
              f"{epoch}, step {start}); retry {rollbacks.in_a_row} of {rollbacks.limit} "
              "on a fresh data order", flush=True)
  if loss is None and ckpt.progress.epochs_done:  # restored at the end: its last epoch's
    loss = float(trainer.built.step.loss_metric.result())  # running loss is in the ckpt
  trainer.begin_epoch(trainer.built.length.epochs)
  return Record(last_epoch=ckpt.progress.epochs_done, final_train_loss=loss,
                seconds=time.time() - began, best=run_dir.best.summary(),
                stopped_early=stopped, rollbacks_this_process=rollbacks.count)


def _train_epochs(trainer, run_dir, first, start, stopping):
  """Epochs `first` (from its step `start`) to the end; (last epoch's loss, stopped
  early). `stopping`: the preemption notice and the function asking for a stop."""
  notice, stop = stopping
  built, progress = trainer.built, run_dir.checkpoints.progress
  loss = None
  stopped = bool(run_dir.best.stopped.numpy())
  for epoch in range(first, first if stopped else built.length.epochs):
    if stop():
      _preempted(trainer, run_dir, notice, (epoch, start))
    print(f"Epoch {epoch + 1}/{built.length.epochs}", flush=True)
    trainer.begin_epoch(epoch)
    if not start:
      built.step.reset_metrics()
      progress.begin_epoch()
    seed = progress.data_seed(built.runtime.seed)  # a resumed epoch keeps its order
    began = time.monotonic()
    done = trainer.train_epoch(epoch, start=start, seed=seed, stop=stop)
    if done < trainer.steps_in(epoch):
      _preempted(trainer, run_dir, notice, (epoch, done))
    loss = float(built.step.loss_metric.result())
    stopped = end_epoch(trainer, run_dir, epoch)
    left = sum(trainer.steps_in(e) for e in range(epoch + 1, built.length.epochs))
    print(epoch_line(epoch + 1, built.length.epochs, done - start, left,
                     built.pipeline.batch_size, time.monotonic() - began), flush=True)
    start = 0
    if stopped:
      break
  return loss, stopped


def epoch_line(epochs_done, epochs, steps, steps_left, batch_size, seconds):
  """A person's progress line after an epoch: its images a second (training and the
  epoch's evaluations, wall clock) and the run's time left at that rate."""
  rate = steps * batch_size / max(seconds, 1e-9)
  left = int(round(steps_left * seconds / steps)) if steps else 0
  hours, rest = divmod(left, 3600)
  return (f"Epoch {epochs_done}/{epochs} done in {seconds:.0f} s: {rate:,.0f} images/s, "
          f"{hours}:{rest // 60:02d}:{rest % 60:02d} left at this rate")


def _preempted(trainer, run_dir, notice, position):
  """Saves at `position` (epoch, step in epoch) and raises Preempted."""
  epoch, step_in_epoch = position
  saved = run_dir.checkpoints.save(epoch, step_in_epoch)
  raise preemption.preempted(notice, saved, epoch, step_in_epoch,
                             trainer.built.length.steps_per_epoch)


def end_epoch(trainer, run_dir, epoch):
  """After `epoch` (0-based): summaries, validation and the best checkpoint, a
  checkpoint, the test evaluation's summaries; True to stop early."""
  built, runtime = trainer.built, trainer.built.runtime
  done = epoch + 1
  run_dir.checkpoints.progress.end_epoch(done)
  with run_dir.train_writer.as_default(step=done):
    tf.summary.scalar("loss", built.step.loss_metric.result())
    tf.summary.scalar("accuracy", built.step.accuracy_metric.result())
    tf.summary.scalar("learning_rate", trainer.learning_rate())
  last = done == built.length.epochs
  evaluating = runtime.eval_every_epochs and done % runtime.eval_every_epochs == 0
  stop = False
  if runtime.best_metric and (evaluating or last):
    stop = validate(trainer, run_dir, done)
  if done % runtime.checkpoint_every_epochs == 0 or last or stop:
    run_dir.checkpoints.save(done)
  if evaluating and not last:
    tested = trainer.evaluate()
    evaluation.write_summaries(run_dir.eval_writer, tested, done)
    run_dir.best_on_test.offer(done, tested)  # Runtime.test_selection's record
  return stop


def validate(trainer, run_dir, done):
  """Scores the validation split with the (averaged) weights and offers the value to
  the best checkpoint; True when the patience ran out."""
  built = trainer.built
  metric = built.runtime.best_metric
  with weight_ema.averaged_weights(built.optimizer, built.model.trainable_variables):
    value = trainer.score("validation")[metric]
    stop = run_dir.best.update(done, value, built.length.steps_per_epoch)
  with run_dir.eval_writer.as_default(step=done):
    tf.summary.scalar(f"validation_{metric}", value)
  return stop


def announce(built, model_dir):
  """The run's data and shape, in one line, and the notes `build` left."""
  data = built.data
  print(f"{data.source.name}: {len(data.train)} training examples (per class "
        f"{data.counts.tolist()}), {len(data.validation)} validation, "
        f"{len(data.source.test_labels)} test; {built.length.steps_per_epoch} steps of "
        f"{built.pipeline.batch_size} an epoch on {built.strategy.num_replicas_in_sync} "
        f"replica(s); writing to {model_dir}", flush=True)
  for note in built.notes:
    print(note, flush=True)


def train_and_evaluate(model_dir, strategy, task=None, optimization=None, runtime=None,
                       on_step=None):
  """Builds, fits and finishes one run; returns its metrics.

  `task`, `optimization`, `runtime` default to the Gin-configured `Task()`,
  `Optimization()` and `Runtime()`. `on_step(step, loss, accuracy, learning_rate)`
  sees every global batch (the LR range test records them). A model_dir holds one run:
  a second one exits with a ConfigError; a finished one returns its report untouched.
  """
  built = build_lib.build(
      model_dir, strategy, task or build_lib.construct("Task", experiment.Task),
      optimization or build_lib.construct("Optimization", experiment.Optimization),
      runtime or build_lib.construct("Runtime", experiment.Runtime))
  trainer = Trainer(built, on_step=on_step)

  def body(run_dir):
    announce(built, model_dir)
    return finish_lib.finish(trainer, run_dir, fit(trainer, run_dir))

  return lifecycle.run_in_model_dir(built, body)
