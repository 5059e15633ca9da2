"""The one trainer every recipe configures, in three steps:

- `build(model_dir, strategy, task, optimization, runtime)` validates every setting and
  constructs data, model, optimizer, loss and step functions; it writes nothing, and
  every ConfigError comes from here. A rule that derives settings (BiT-HyperRule)
  returns a plan that is applied before anything it affects is built.
- `fit(trainer)` runs the loop: phases, inner step loops, checkpoints, evaluation,
  the best checkpoint on validation and early stopping.
- `finish(trainer, record)` writes metrics, plots, the export and the operative
  config (with what `build` derived), on the chief only.

Checkpoints are written every `checkpoint_every_epochs` and restored on start, and
every epoch's data is a function of (seed, epoch), so rerunning a command on the same
model_dir resumes and finishes exactly as an uninterrupted run would.
"""

import contextlib
import dataclasses
import inspect
import json
import os
import re
import shutil
import signal
import sys
import tempfile
import time
from typing import Any, Dict, List, Optional

import gin
import numpy as np
import tensorflow as tf
import tf_keras

from recipes import checks
from recipes import evaluation
from recipes import experiment
from recipes import phases as phases_lib
from recipes import preemption
from recipes import report
from recipes import train_step
from recipes.data import pipeline as pipeline_lib
from recipes.data import source as source_lib
from recipes import run_lock
from recipes.errors import ConfigError
from recipes.errors import Diverged
from recipes.errors import Preempted
from tricks import layer_lr
from tricks import layer_rng
from tricks import weight_ema
from zoo import export
from zoo import finetune
from zoo import nfnet_checkpoint
from zoo import pretrained
from zoo import registry

MODEL_ERRORS = (pretrained.WeightsError, finetune.CheckpointError,
                nfnet_checkpoint.ConversionError)


@dataclasses.dataclass
class Data:
  """The run's data: source, training indices into its training split, validation
  indices into `validation_split` (the training split's hold-out, or the source's own
  "validation" split, e.g. Liu et al.'s list), and the training class counts."""
  source: Any
  train: np.ndarray
  validation: np.ndarray
  counts: np.ndarray
  validation_split: str = "train"


@dataclasses.dataclass
class Length:
  """How long the run is, and its phases placed in it."""
  epochs: int
  steps_per_epoch: int
  total_steps: int
  spans: List[phases_lib.Span]
  phased: bool  # phases were given: layers are frozen / unfrozen by them


@dataclasses.dataclass
class Trainer:
  """A built run: everything `fit` and `finish` need."""
  model_dir: str
  strategy: tf.distribute.Strategy
  task: experiment.Task
  optimization: experiment.Optimization
  runtime: experiment.Runtime
  data: Data
  pipeline: pipeline_lib.InputPipeline
  model: tf_keras.Model
  optimizer: tf_keras.optimizers.Optimizer
  schedule: Any  # the learning rate: a number, or a schedule of the global step
  step: train_step.TrainStep
  evaluator: train_step.EvalStep
  length: Length
  derived: Dict[str, Any]  # Gin binding -> value that build derived (card, plan)
  notes: List[str]
  config_text: str
  span: Optional[phases_lib.Span] = None
  books: Optional["Bookkeeping"] = None  # set by `fit`

  # -- training ----------------------------------------------------------------

  def enter(self, epoch):
    """Tells the loss the epoch (a loss with `set_epoch`, e.g. deferred re-weighting)
    and sets the trainable layers of the phase that trains `epoch` (and retraces)."""
    set_epoch = getattr(self.step.parts.loss_fn, "set_epoch", None)
    if set_epoch is not None:
      set_epoch(epoch)
    span = phases_lib.span_at(self.length.spans, epoch)
    if span == self.span:
      return
    if self.length.phased and (self.span is None or span.trainable != self.span.trainable):
      phases_lib.set_trainable(self.model, span.trainable)
      self.step.retrace()
      print(f"Epoch {epoch + 1}: phase trains {span.trainable!r} at x{span.lr_scale:g} "
            "the rate", flush=True)
    self.span = span

  def train_epoch(self, epoch, start=0, seed=None, on_step=None, stop=None):
    """Trains epoch `epoch` from its step `start` in loops of `steps_per_loop` steps,
    on the data order of `seed` (default: the run's). Returns the epoch's steps done:
    fewer than its length when `stop()` turned true between two loops. Raises
    NonFinite after a loop with a step whose loss or gradient norm is not finite.
    `on_step(step, loss, accuracy, learning_rate)` sees every global batch (up to a
    non-finite one)."""
    length = self.length
    seed = self.runtime.seed if seed is None else seed
    steps = self.steps_in(epoch)

    def dataset_fn(context):
      """This input pipeline's per-replica batches: `per_step` of them a global step."""
      dataset = self.pipeline.train_dataset(self.data.source, self.data.train, epoch, seed,
                                            context)
      per_step = context.num_replicas_in_sync // context.num_input_pipelines
      if steps < length.steps_per_epoch:  # a run measured in steps ends mid-epoch
        dataset = dataset.take(steps * per_step)
      if start:  # resuming mid-epoch: the epoch's order is rebuilt, its first steps skipped
        dataset = dataset.skip(start * per_step)
      return dataset

    iterator = iter(self.strategy.distribute_datasets_from_function(dataset_fn))
    bar = tf_keras.utils.Progbar(steps, stateful_metrics=["loss", "accuracy"],
                                 unit_name="step")
    done, loss_sum, accuracy_sum = start, 0.0, 0.0
    while done < steps:
      if stop is not None and stop():
        return done
      n = min(self.runtime.steps_per_loop, steps - done)
      result = self.step.loop(iterator, n)
      first = epoch * length.steps_per_epoch + done
      if on_step is not None:
        for i in range(n if result.bad_step < 0 else result.bad_step + 1):
          on_step(first + i, float(result.losses[i]), float(result.accuracies[i]),
                  float(self.learning_rate(first + i)))
      if result.bad_step >= 0:
        raise NonFinite(first + result.bad_step, epoch, loss=result.bad_loss,
                        grad_norm=result.bad_grad_norm)
      done += n
      # The loop's own per-batch means (equal batches): the epoch's running means,
      # without reading the metrics back from the device every loop.
      loss_sum += float(result.losses.sum())
      accuracy_sum += float(result.accuracies.sum())
      bar.update(done, values=[("loss", loss_sum / (done - start)),
                               ("accuracy", accuracy_sum / (done - start))])
    return done

  def steps_in(self, epoch):
    """Global steps in epoch `epoch` (the last one of a run measured in steps is short)."""
    length = self.length
    return min(length.steps_per_epoch, length.total_steps - epoch * length.steps_per_epoch)

  # -- evaluation --------------------------------------------------------------

  def predict(self, split="test"):
    """(labels, predictions) of the test split or the validation examples."""
    indices = None if split == "test" else self.data.validation
    name = "test" if split == "test" else self.data.validation_split
    return self.evaluator.predict(
        lambda context: self.pipeline.eval_dataset(self.data.source, name, indices, context),
        pipeline_lib.PAD_LABEL)

  def score(self, split="test"):
    """Long-tail metrics of the model's current weights on `split`."""
    labels, predictions = self.predict(split)
    return evaluation.long_tail_metrics(labels, predictions, self.data.counts,
                                        *self.task.shot_thresholds)

  def evaluate(self, split="test"):
    """`score`, with the optimizer's weight averages if it keeps them."""
    with weight_ema.averaged_weights(self.optimizer, self.model.trainable_variables):
      return self.score(split)

  def learning_rate(self, step=None):
    """The rate at global step `step` (default: the optimizer's current step)."""
    if callable(self.schedule):
      return self.schedule(self.optimizer.iterations if step is None else step)
    return self.schedule


# -- build ---------------------------------------------------------------------


def set_up_runtime(runtime):
  """Seeds, op determinism and the precision policy, before anything is built."""
  checks.runtime(runtime)
  tf_keras.backend.experimental.enable_tf_random_generator()
  tf_keras.utils.set_random_seed(runtime.seed)
  if runtime.deterministic_ops:
    tf.config.experimental.enable_op_determinism()
  tf_keras.mixed_precision.set_global_policy(runtime.mixed_precision or "float32")


def load_data(task, seed):
  """The source, its validation examples (the source's own validation split, or a
  balanced hold-out drawn with `seed` before the long-tail draw), the training draw
  and its class counts."""
  source = checks.construct("Task.data", task.data)
  pool = np.arange(len(source.train_labels))
  validation = np.zeros([0], np.int64)
  given = getattr(source, "validation_labels", None)
  split = "train"
  if given is not None:
    if task.validation_per_class:
      raise ConfigError(f"{source.name} has its own validation split ({len(given)} "
                        "examples); drop Task.validation_per_class, or the source's "
                        "validation list")
    validation, split = np.arange(len(given)), "validation"
  elif task.validation_per_class:
    pool, validation = source_lib.balanced_holdout(
        source.train_labels, task.validation_per_class, seed, "Task.validation_per_class")
  train = pool
  if task.long_tail:
    train = pool[task.long_tail.select(source.train_labels[pool], source.num_classes)]
  counts = np.bincount(source.train_labels[train], minlength=source.num_classes)
  return Data(source, train, validation, counts, split)


def plan_run(optimization, runtime, data, base_pipeline):
  """(pipeline overrides, steps, schedule builder, notes, derived bindings): the
  hyperrule's plan, if any, else the run's own settings."""
  rule = optimization.hyperrule
  if rule is None:
    return {}, runtime.steps, optimization.learning_rate, [], {}
  if optimization.phases:
    raise ConfigError("Optimization.hyperrule sets one schedule for the whole run; it does "
                      "not combine with Optimization.phases (set HEAD_EPOCHS = 0)")
  first = next(iter(data.source.make_dataset("train", data.train[:1])))
  height, width = (int(d) for d in first[0].shape[:2])
  plan = rule.plan(len(data.train), height, width, base_pipeline.batch_size,
                   cutmix=bool(base_pipeline.cutmix_alpha))
  derived = {f"InputPipeline.{k}": v for k, v in plan.pipeline.items()}
  derived["Runtime.steps"] = plan.steps

  def learning_rate(total_steps, steps_per_epoch):
    del total_steps, steps_per_epoch
    return plan.learning_rate

  return dict(plan.pipeline), plan.steps, learning_rate, [plan.note], derived


def resolve_pipeline(base, overrides, model, card, full_frame=False):
  """The pipeline used: the Gin-built one with the plan's fields and, where still
  unset, the model card's; returns (pipeline, derived bindings)."""
  height, width = model.input_shape[1:3]
  model_size = height if height is not None and height == width else None
  pipeline = base.replace(**overrides)
  try:
    pipeline, taken = pipeline.with_card(card or pipeline.plain_card(model_size), model_size,
                                         full_frame)
    pipeline.check()
  except ValueError as e:
    raise ConfigError(str(e)) from None
  return pipeline, {f"InputPipeline.{k}": v for k, v in taken.items()}


def build_model(task, class_counts):
  """The model with its transforms, and its zoo card (None outside the zoo). A transform
  with a `class_counts` parameter gets the training split's counts (as losses do)."""
  try:
    model = checks.construct("Task.model", task.model)
  except MODEL_ERRORS as e:
    raise ConfigError(str(e)) from None
  card = registry.card_of(model)
  for transform in task.model_transforms:
    try:
      takes_counts = "class_counts" in inspect.signature(transform).parameters
      built = transform(model, class_counts=class_counts) if takes_counts else transform(model)
      model = registry.attach_card(built, card) if card else built
    except ValueError as e:
      raise ConfigError(f"Task.model_transforms: {e}") from None
  return model, card


def run_length(optimization, runtime, data, pipeline, steps, model):
  """The run's epochs, steps and phases (validated)."""
  steps_per_epoch = pipeline.steps_per_epoch(len(data.train))
  epochs = -(-steps // steps_per_epoch) if steps is not None else runtime.epochs
  total_steps = steps or epochs * steps_per_epoch
  spans = phases_lib.place(optimization.phases, epochs, steps_per_epoch, total_steps)
  phased = bool(optimization.phases)
  if phased and any(s.trainable != "head" for s in spans):
    head = _head(model)
    if len(model.trainable_variables) == len(head.trainable_variables):
      raise ConfigError("Optimization.phases unfreeze a backbone frozen for the whole run "
                        "(finetune_model.freeze); use phases (HEAD_EPOCHS) or "
                        "FREEZE_BACKBONE (head only), not both")
  if phased and any(s.trainable == "head" for s in spans):
    _head(model)
  return Length(epochs, steps_per_epoch, total_steps, spans, phased)


def _head(model):
  try:
    return model.get_layer(finetune.HEAD)
  except ValueError:
    raise ConfigError(f"Optimization.phases need a model with a {finetune.HEAD!r} head "
                      f"layer; {model.name!r} has none (use a zoo model)") from None


def build_optimizer(optimization, runtime, model, length, learning_rate):
  """The optimizer (loss-scaled for float16) with its slots built, so a checkpoint
  restores into them, and the per-layer-group rates (or None)."""
  schedule = checks.construct("Optimization.learning_rate", phases_lib.schedule,
                              length.spans, learning_rate, length.steps_per_epoch)
  checks.learning_rates(schedule, length.total_steps)
  opt = checks.construct("Optimization.optimizer", optimization.optimizer,
                         learning_rate=schedule)
  checks.optimizer_settings(opt)
  if optimization.weight_decay_exclude:
    opt.exclude_from_weight_decay(var_names=list(optimization.weight_decay_exclude))
  if runtime.mixed_precision == "mixed_float16":
    opt = tf_keras.mixed_precision.LossScaleOptimizer(opt)
  getattr(opt, "inner_optimizer", opt).build(model.trainable_variables)
  if optimization.layer_learning_rates is None:
    return opt, None, [], schedule
  try:
    rates = layer_lr.LayerLearningRates(optimization.layer_learning_rates)
    groups = rates.build(model.trainable_variables)
  except ValueError as e:
    raise ConfigError("Optimization.layer_learning_rates: "
                      + str(e).removeprefix("layer learning rates: ")) from None
  note = "layer learning rates: " + ", ".join(
      f"{n} variables x{m:g}" for m, n in sorted(groups.items()))
  return opt, rates, [note], schedule


def build(model_dir, strategy, task, optimization, runtime):
  """Validates the run and constructs everything it uses; writes nothing."""
  for part in (task, optimization, runtime):
    checks.fields(part)
  set_up_runtime(runtime)
  checks.task(task, runtime)
  checks.optimization(optimization)
  phases_lib.check(optimization.phases)
  data = load_data(task, runtime.seed)
  checks.best_metric_has_validation(runtime.best_metric, len(data.validation))
  checks.best_metric_has_classes(runtime.best_metric, data.counts, task.shot_thresholds)
  base = checks.construct("Task.pipeline", task.pipeline)
  checks.batch(base, len(data.train), strategy.num_replicas_in_sync)
  overrides, steps, learning_rate, notes, derived = plan_run(optimization, runtime, data,
                                                            base)
  with strategy.scope():
    model, card = build_model(task, data.counts)
    pipeline, taken = resolve_pipeline(base, overrides, model, card,
                                       data.source.full_frame)
    derived.update(taken)
    checks.model_fits(model, data.source.num_classes,
                      {pipeline.image_size, pipeline.eval_image_size})
    length = run_length(optimization, runtime, data, pipeline, steps, model)
    opt, rates, rate_notes, schedule = build_optimizer(optimization, runtime, model, length,
                                             learning_rate)
    loss_fn = checks.construct("Task.loss", task.loss, class_counts=data.counts)
  for transform in optimization.gradient_transforms:
    if hasattr(transform, "build"):
      transform.build(model)
  decayed = [v for v in model.trainable_variables
             if not any(p in v.name for p in optimization.weight_decay_exclude)]
  step = train_step.TrainStep(train_step.StepParts(
      strategy, model, opt, loss_fn, pipeline.batch_size,
      list(optimization.gradient_transforms), optimization.l2, decayed, rates,
      runtime.jit_compile))
  if isinstance(strategy, tf.distribute.TPUStrategy):
    notes = notes + tpu_checks(strategy, runtime, pipeline, data)
  config_text = gin.config_str()
  checks.model_dir_writable(model_dir)
  checks.resume_config(model_dir, config_text)
  return Trainer(model_dir, strategy, task, optimization, runtime, data, pipeline, model,
                 opt, schedule, step, train_step.EvalStep(strategy, model), length, derived,
                 notes + rate_notes, config_text)


def tpu_checks(strategy, runtime, pipeline, data):
  """checks.tpu on the datasets this run feeds its replicas; advice lines."""
  replicas = strategy.num_replicas_in_sync
  context = tf.distribute.InputContext(1, 0, replicas)
  datasets = {
      "training": pipeline.train_dataset(data.source, data.train, 0, runtime.seed, context),
      "test": pipeline.eval_dataset(data.source, context=context)}
  if len(data.validation):
    datasets["validation"] = pipeline.eval_dataset(data.source, data.validation_split,
                                                   data.validation, context)
  return checks.tpu(runtime, pipeline, replicas, datasets)


# -- fit -----------------------------------------------------------------------


@dataclasses.dataclass
class Record:
  """What `fit` leaves for `finish`."""
  first_epoch: int
  last_epoch: int
  final_train_loss: Optional[float]
  seconds: float
  best: Optional[Dict[str, Any]] = None
  stopped_early: bool = False
  retries: int = 0  # rollbacks after a non-finite step, in this process


class NonFinite(Exception):
  """A step (or the weights about to be saved) went NaN or Inf."""

  def __init__(self, step, epoch, loss=None, grad_norm=None, weight=None):
    super().__init__(step)
    self.step, self.epoch = step, epoch
    if weight is not None:
      self.what = f"weight {weight[0]!r} is {weight[1]}"
    elif loss is not None and not np.isfinite(loss):
      self.what = f"the loss is {loss}"
    else:
      self.what = f"the gradient norm is {grad_norm} (loss {loss:.4g})"


def data_seed(seed, retries):
  """The seed of the epochs' data order: the run's, or after `retries` rollbacks a
  fresh one (so a retry does not meet the batches that diverged again)."""
  return seed + 1_000_000_000 * retries


CHECKPOINT = re.compile(r"^ckpt-(\d+)\.index$")


class Bookkeeping:
  """Checkpoints (latest, and best on validation), summaries, early stopping.

  Checkpoints are numbered by global step and hold the model, the optimizer, the
  epoch and step within it, the epoch's running metrics, the layers' random
  generators and the rollback count, so a run resumes exactly, even mid-epoch.
  A checkpoint is written only after every weight is checked finite.

  Multi-worker: every worker saves (saving reads the replicas' variables, which takes
  every worker), but only the chief into model_dir; the others save into a scratch
  directory of their own, deleted at the end (`close`), as TF's multi-worker guide
  says. Every worker restores from model_dir's checkpoints.
  """

  def __init__(self, trainer):
    self.t = trainer
    rt = trainer.runtime
    with trainer.strategy.scope():
      self.epoch = tf.Variable(0, dtype=tf.int64, trainable=False, name="epoch")
      self.step_in_epoch = tf.Variable(0, dtype=tf.int64, trainable=False,
                                       name="step_in_epoch")
      self.retries = tf.Variable(0, dtype=tf.int64, trainable=False, name="retries")
      # The rollback count whose data order the current epoch follows.
      self.epoch_order = tf.Variable(0, dtype=tf.int64, trainable=False, name="epoch_order")
      self.best_value = tf.Variable(-1.0, dtype=tf.float64, trainable=False, name="best")
      self.best_epoch = tf.Variable(0, dtype=tf.int64, trainable=False, name="best_epoch")
      self.stopped = tf.Variable(False, trainable=False, name="stopped_early")
    self.checkpoint = tf.train.Checkpoint(
        model=trainer.model, optimizer=trainer.optimizer, epoch=self.epoch,
        step_in_epoch=self.step_in_epoch, retries=self.retries, epoch_order=self.epoch_order,
        best_value=self.best_value, best_epoch=self.best_epoch, stopped=self.stopped,
        loss_metric=trainer.step.loss_metric, accuracy_metric=trainer.step.accuracy_metric,
        layer_rngs=layer_rng.layer_random_generators(trainer.model))
    self.directory = os.path.join(trainer.model_dir, "checkpoints")  # restored from
    self.chief = is_chief(trainer.strategy)
    self.scratch = None if self.chief else tempfile.mkdtemp(prefix="model_zoo-worker-")
    root = trainer.model_dir if self.chief else self.scratch  # written to
    if self.chief:
      for name in ("checkpoints", "best"):
        remove_temporary(os.path.join(root, name))
    self.manager = checkpoint_manager(self.checkpoint, os.path.join(root, "checkpoints"),
                                      rt.keep_checkpoints if self.chief else 1)
    self.best = checkpoint_manager(  # the validated (averaged) weights
        tf.train.Checkpoint(model=trainer.model), os.path.join(root, "best"), 1)
    if self.chief:
      self.train_writer = tf.summary.create_file_writer(os.path.join(root, "train"))
      self.eval_writer = tf.summary.create_file_writer(os.path.join(root, "eval"))
    else:
      self.train_writer = self.eval_writer = tf.summary.create_noop_writer()
    self.restored = None  # the checkpoint the run stands on
    self.position = None  # (epoch, step in epoch) of `restored`

  def candidates(self):
    """The checkpoints on disk, newest first (the directory, not the state file, is
    the truth: a kill between a checkpoint's write and the state file's update leaves
    the state file behind)."""
    if not tf.io.gfile.isdir(self.directory):
      return []
    numbered = [(int(m.group(1)), m.group(0)[:-len(".index")])
                for m in map(CHECKPOINT.match, tf.io.gfile.listdir(self.directory)) if m]
    return [os.path.join(self.directory, name) for _, name in sorted(numbered, reverse=True)]

  def restore(self):
    """Restores the newest checkpoint that reads back whole; a damaged one (truncated,
    emptied, a shard missing) is reported in one warning line, moved to
    checkpoints/damaged/, and the one before it is tried. Returns (epoch, step in
    epoch) to start from; (0, 0) with no checkpoint."""
    damaged = False
    for path in self.candidates():
      try:
        self.checkpoint.read(path).assert_existing_objects_matched()
      except (tf.errors.OpError, IndexError, EOFError) as e:  # the files, not the run
        reason = " ".join(str(e).split())[:160]
        print(f"warning: checkpoint {path} is damaged ({type(e).__name__}: {reason}); "
              "moved to checkpoints/damaged/, trying the one before it", file=sys.stderr,
              flush=True)
        if self.chief:
          quarantine(path)
        damaged = True
        continue
      except (AssertionError, ValueError) as e:
        raise ConfigError(
            f"checkpoint {path} does not match this run's model and optimizer "
            f"({' '.join(str(e).split())[:120]}); it was written by another version of "
            "the recipe: choose a new --model_dir") from None
      self.restored = path
      epoch, step = int(self.epoch.numpy()), int(self.step_in_epoch.numpy())
      self.position = (epoch, step)
      if damaged and self.chief:  # the state file names what was moved: write it again
        self.manager = record_state(self.checkpoint, self.directory,
                                    self.t.runtime.keep_checkpoints, self.candidates())
      print(f"Resumed from {path} at epoch {epoch} of {self.t.length.epochs}"
            + (f", step {step} of {self.t.length.steps_per_epoch}" if step else ""),
            flush=True)
      return epoch, step
    if damaged:
      raise ConfigError(f"every checkpoint in {self.directory} is damaged (moved to its "
                        "damaged/ folder); to start afresh choose a new --model_dir")
    return 0, 0

  def close(self):
    """Deletes a non-chief worker's scratch directory."""
    if self.scratch is not None:
      shutil.rmtree(self.scratch, ignore_errors=True)
      self.scratch = None

  def forget_later_best(self):
    """After a rollback: a best checkpoint saved after the restored point came from the
    abandoned attempt; it is removed and the next validation sets the best again."""
    latest = self.best.latest_checkpoint
    if latest and int(latest.rsplit("-", 1)[1]) > int(self.best_epoch.numpy()):
      for path in tf.io.gfile.glob(latest + ".*"):
        tf.io.gfile.remove(path)
      self.best = record_state(tf.train.Checkpoint(model=self.t.model),
                               os.path.dirname(latest), 1, [])
      self.best_value.assign(-1.0)
      self.best_epoch.assign(0)

  def save(self, epoch, step_in_epoch=0):
    """Checks every weight finite, then writes a checkpoint at (`epoch` epochs done,
    `step_in_epoch` steps into the next); returns its path."""
    step = epoch * self.t.length.steps_per_epoch + step_in_epoch
    if self.position == (epoch, step_in_epoch):
      return self.restored  # nothing new since: never rewrite the checkpoint in place
    bad = first_non_finite(self.t.model.weights + list(self.t.optimizer.variables))
    if bad is not None:
      raise NonFinite(step, epoch, weight=bad)
    self.epoch.assign(epoch)
    self.step_in_epoch.assign(step_in_epoch)
    path = self.manager.save(checkpoint_number=step)
    self.restored, self.position = path, (epoch, step_in_epoch)
    return path

  def end_epoch(self, epoch):
    """Summaries, checkpoint, evaluations after `epoch` (0-based); True to stop early."""
    t, rt = self.t, self.t.runtime
    done = epoch + 1
    self.epoch.assign(done)
    self.step_in_epoch.assign(0)
    with self.train_writer.as_default(step=done):
      tf.summary.scalar("loss", t.step.loss_metric.result())
      tf.summary.scalar("accuracy", t.step.accuracy_metric.result())
      tf.summary.scalar("learning_rate", t.learning_rate())
    last = done == t.length.epochs
    evaluating = rt.eval_every_epochs and done % rt.eval_every_epochs == 0
    stop = False
    if rt.best_metric and (evaluating or last):
      stop = self.validate(done)
      self.stopped.assign(stop)
    if done % rt.checkpoint_every_epochs == 0 or last or stop:
      self.save(done)
    if evaluating and not last:
      write_eval_summaries(self.eval_writer, t.evaluate(), done)
    return stop

  def validate(self, done):
    """Scores the validation split; keeps the best checkpoint; True when patience ran
    out."""
    t, rt = self.t, self.t.runtime
    with weight_ema.averaged_weights(t.optimizer, t.model.trainable_variables):
      value = t.score("validation")[rt.best_metric]
      better = value > float(self.best_value.numpy())
      if better:
        bad = first_non_finite(t.model.weights)
        if bad is not None:
          raise NonFinite(done * t.length.steps_per_epoch, done - 1, weight=bad)
        self.best.save(checkpoint_number=done)
    with self.eval_writer.as_default(step=done):
      tf.summary.scalar(f"validation_{rt.best_metric}", value)
    if better:
      self.best_value.assign(value)
      self.best_epoch.assign(done)
      return False
    patience = rt.early_stopping_patience
    evals_since = (done - int(self.best_epoch.numpy())) // max(1, rt.eval_every_epochs or 1)
    if patience is not None and evals_since >= patience:
      print(f"Early stop after epoch {done}: validation {rt.best_metric} has not passed "
            f"{float(self.best_value.numpy()):.4f} (epoch {int(self.best_epoch.numpy())}) "
            f"in {evals_since} evaluations", flush=True)
      return True
    return False


def checkpoint_manager(checkpoint, directory, max_to_keep):
  """A CheckpointManager; a state file that does not parse is set aside (the
  checkpoints themselves are found by listing the directory)."""
  try:
    return tf.train.CheckpointManager(checkpoint, directory, max_to_keep=max_to_keep)
  except (tf.errors.OpError, ValueError) as e:
    state = os.path.join(directory, "checkpoint")
    print(f"warning: {state} does not parse ({type(e).__name__}); set aside as "
          "checkpoint.damaged", file=sys.stderr, flush=True)
    tf.io.gfile.rename(state, state + ".damaged", overwrite=True)
    return tf.train.CheckpointManager(checkpoint, directory, max_to_keep=max_to_keep)


def record_state(checkpoint, directory, max_to_keep, paths):
  """A CheckpointManager over `paths` (newest first), its state file written anew."""
  state = os.path.join(directory, "checkpoint")
  if tf.io.gfile.exists(state):
    tf.io.gfile.remove(state)
  if paths:
    tf.compat.v1.train.update_checkpoint_state(directory, paths[0],
                                               all_model_checkpoint_paths=list(reversed(paths)))
  return tf.train.CheckpointManager(checkpoint, directory, max_to_keep=max_to_keep)


def remove_temporary(directory):
  """Removes what a kill during a checkpoint write leaves: `<prefix>_temp*/` folders
  of shards that were never merged into a checkpoint."""
  if not tf.io.gfile.isdir(directory):
    return
  for name in tf.io.gfile.listdir(directory):
    name = name.rstrip("/")
    path = os.path.join(directory, name)
    if "_temp" in name and tf.io.gfile.isdir(path):
      print(f"Removed {path}, left by a checkpoint write that did not finish", flush=True)
      tf.io.gfile.rmtree(path)


def quarantine(prefix):
  """Moves the files of checkpoint `prefix` into a `damaged/` folder beside it."""
  directory, name = os.path.split(prefix)
  damaged = os.path.join(directory, "damaged")
  tf.io.gfile.makedirs(damaged)
  for path in tf.io.gfile.glob(prefix + ".*"):
    tf.io.gfile.rename(path, os.path.join(damaged, os.path.basename(path)), overwrite=True)


def first_non_finite(variables):
  """(name, 'nan' or 'inf') of the first floating-point variable holding a non-finite
  value, or None."""
  floats = [v for v in variables if v.dtype.is_floating]
  if not floats:
    return None
  flags = all_finite(floats).numpy()
  for variable, finite in zip(floats, flags):
    if not finite:
      values = variable.numpy()
      return variable.name, "nan" if np.isnan(values).any() else "inf"
  return None


@tf.function
def all_finite(variables):
  return tf.stack([tf.reduce_all(tf.math.is_finite(tf.cast(v, tf.float32)))
                   for v in variables])


def fit(trainer, on_step=None):
  """Trains from the latest good checkpoint to the run's end (or an early stop).

  A non-finite step rolls back to the last good checkpoint and retries on a fresh
  data order, up to `Runtime.nonfinite_retries` times in a row, then raises Diverged.
  SIGTERM (or Ctrl-C) saves a checkpoint where the run is and raises Preempted."""
  books = Bookkeeping(trainer)
  trainer.books = books
  epoch, start = books.restore()
  if books.restored is None:
    try:
      books.save(0)  # the point a divergence in the first epochs rolls back to
    except NonFinite as bad:
      raise Diverged(f"the initial weights are not finite ({bad.what}); check the model's "
                     "pretrained weights or initialisation") from None
  began = time.time()
  retried, rollbacks, rolled_back_to = 0, 0, None
  with preemption.Notice() as notice:
    requested = stop_requested(trainer.strategy, notice)
    while True:
      try:
        first = epoch
        loss, stopped = _train(trainer, books, epoch, start, on_step, notice, requested)
        break
      except NonFinite as bad:
        if books.restored != rolled_back_to:
          retried = 0  # the run got past its last rollback: a new divergence
        if retried >= trainer.runtime.nonfinite_retries:
          tried = (f"after {retried} {'retry' if retried == 1 else 'retries'} on fresh data "
                   "orders" if retried else "no retries: Runtime.nonfinite_retries = 0")
          raise Diverged(
              f"training diverged at step {bad.step} (epoch {bad.epoch + 1}): {bad.what}; "
              f"the last good checkpoint is {books.restored} ({tried}); lower "
              "LEARNING_RATE (or clip harder, or raise Runtime.nonfinite_retries) and "
              "train in a new --model_dir") from None
        retried += 1
        rollbacks += 1
        before = int(books.retries.numpy())
        epoch, start = books.restore()
        rolled_back_to = books.restored
        books.retries.assign(max(before, int(books.retries.numpy())) + 1)
        books.forget_later_best()
        print(f"\nStep {bad.step}: {bad.what}; rolled back to {books.restored} (epoch "
              f"{epoch}, step {start}); retry {retried} of "
              f"{trainer.runtime.nonfinite_retries} on a fresh data order", flush=True)
  if loss is None and int(books.epoch.numpy()):  # restored at the end: its last epoch's
    loss = float(trainer.step.loss_metric.result())  # running loss is in the checkpoint
  trainer.enter(trainer.length.epochs)
  best = None
  if trainer.runtime.best_metric and books.best.latest_checkpoint:
    best = {"epoch": int(books.best_epoch.numpy()),
            f"validation_{trainer.runtime.best_metric}": float(books.best_value.numpy()),
            "checkpoint": books.best.latest_checkpoint}
  return Record(first, int(books.epoch.numpy()), loss, time.time() - began, best, stopped,
                retries=rollbacks)


def stop_requested(strategy, notice):
  """A function telling whether the run is asked to stop: this process's `notice`, or
  in a multi-worker job any worker's (one all-reduce of a flag, asked between inner
  loops), so every worker saves at the same step and exits (tf.distribute's
  PreemptionCheckpointHandler's idea: a worker that saved alone would wait forever for
  the others)."""
  resolver = getattr(strategy, "cluster_resolver", None)
  workers = sum(len(tasks) for kind, tasks in resolver.cluster_spec().as_dict().items()
                if kind in ("chief", "worker")) if resolver is not None else 1
  if not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy) or workers < 2:
    return lambda: notice.requested

  def any_worker():
    flag = tf.constant(1.0 if notice.requested else 0.0)
    flags = strategy.run(lambda: tf.identity(flag))
    return float(strategy.reduce(tf.distribute.ReduceOp.SUM, flags, axis=None)) > 0

  return any_worker


def _train(trainer, books, first, start, on_step, notice, requested):
  """Epochs `first` (from its step `start`) to the end; (last epoch's loss, stopped
  early)."""
  length = trainer.length
  loss = None
  stopped = bool(books.stopped.numpy())
  for epoch in range(first, first if stopped else length.epochs):
    if requested():
      _preempted(books, epoch, start, notice)
    print(f"Epoch {epoch + 1}/{length.epochs}", flush=True)
    trainer.enter(epoch)
    if not start:
      trainer.step.reset_metrics()
      books.epoch_order.assign(books.retries)  # a new epoch takes the latest order
    # A resumed partial epoch keeps the order it began with, even after a rollback.
    seed = data_seed(trainer.runtime.seed, int(books.epoch_order.numpy()))
    done = trainer.train_epoch(epoch, start, seed, on_step, stop=requested)
    if done < trainer.steps_in(epoch):
      _preempted(books, epoch, done, notice)
    start = 0
    loss = float(trainer.step.loss_metric.result())
    if books.end_epoch(epoch):
      stopped = True
      break
  return loss, stopped


def _preempted(books, epoch, step_in_epoch, notice):
  path = books.save(epoch, step_in_epoch)
  name = ("SIGTERM on another worker" if notice.signal is None
          else signal.Signals(notice.signal).name)
  by_hand = notice.signal == signal.SIGINT
  raise Preempted(f"{'interrupted' if by_hand else 'preempted'} ({name}) at epoch "
                  f"{epoch + 1}, step {step_in_epoch} of {books.t.length.steps_per_epoch}: "
                  f"saved {path}; rerun the same command to resume from it", by_hand)


def write_eval_summaries(writer, metrics, step):
  with writer.as_default(step=step):
    for key in checks.METRICS:
      if metrics.get(key) is not None:
        tf.summary.scalar(key, metrics[key])


# -- finish --------------------------------------------------------------------


def is_chief(strategy):
  """Whether this worker writes the run's outputs (multi-worker: the chief, or worker
  0 when there is no chief)."""
  resolver = getattr(strategy, "cluster_resolver", None)
  if resolver is None or not resolver.task_type:
    return True
  spec = resolver.cluster_spec().as_dict()
  if "chief" in spec:
    return resolver.task_type == "chief"
  return resolver.task_type == "worker" and resolver.task_id == 0


def best_on_validation(trainer, record):
  """Test metrics of the best-on-validation weights, labelled; the final weights are
  put back afterwards."""
  if record.best is None:
    return None
  final = [v.numpy() for v in trainer.model.weights]
  tf.train.Checkpoint(model=trainer.model).read(record.best["checkpoint"]).expect_partial()
  metrics = trainer.score()  # the checkpoint holds the weights that were validated
  for variable, value in zip(trainer.model.weights, final):
    variable.assign(value)
  return dict(record.best, test=metrics)


def operative_config(trainer):
  """Gin's operative config, then the bindings `build` derived (later lines win when
  the file is parsed again, so the file reproduces the run)."""
  text = gin.operative_config_str()
  if trainer.derived:
    lines = [f"{k} = {v!r}" for k, v in sorted(trainer.derived.items())]
    text += ("\n# Derived in build (model card, hyperrule plan); these values were used:\n"
             + "\n".join(lines) + "\n")
  return text


def finish(trainer, record):
  """Evaluates and writes the report, plot, export and operative config; returns the
  metrics."""
  rt, data = trainer.runtime, trainer.data
  metrics = trainer.evaluate()
  metrics.update(
      recipe=trainer.task.name, epochs=trainer.length.epochs, epochs_trained=record.last_epoch,
      steps=trainer.length.total_steps, seed=rt.seed, data=data.source.name,
      class_names=[str(name) for name in data.source.class_names],
      num_train_examples=int(len(data.train)), num_validation_examples=int(len(
          data.validation)), global_batch_size=trainer.pipeline.batch_size,
      num_replicas=trainer.strategy.num_replicas_in_sync,
      train_seconds_this_run=round(record.seconds, 1), stopped_early=record.stopped_early,
      final_train_loss=record.final_train_loss,
      best_on_validation=best_on_validation(trainer, record),
      derived={k: list(v) if isinstance(v, tuple) else v for k, v in trainer.derived.items()})
  metrics["reported"] = ("top-level metrics: the test split, final weights (averaged when "
                         "the optimizer keeps an EMA); best_on_validation: the best "
                         "checkpoint on validation")
  if len(data.validation):
    final = trainer.evaluate("validation")
    metrics["final_validation"] = {k: final[k] for k in checks.METRICS}
  if trainer.optimization.hyperrule is not None:
    metrics["hyperrule"] = trainer.notes[0]
  metrics["nonfinite_rollbacks"] = record.retries
  skipped = list(getattr(data.source, "skipped_files", ()))
  metrics["skipped_files"] = {"count": len(skipped), "paths": skipped}
  if not is_chief(trainer.strategy):
    if rt.export_saved_model:  # every worker exports (it reads the replicas' variables);
      write_export(os.path.join(trainer.books.scratch, "export"), trainer.model,  # kept:
                   trainer.optimizer, trainer.pipeline)  # the chief's
    return metrics
  write_eval_summaries(trainer.books.eval_writer, metrics, trainer.length.epochs)
  report.plot_per_class_accuracy(
      os.path.join(trainer.model_dir, "per_class_accuracy.png"), metrics,
      title=f"{trainer.task.name or data.source.name}: per-class accuracy vs. training count")
  if rt.export_saved_model:
    write_export(os.path.join(trainer.model_dir, "export"), trainer.model, trainer.optimizer,
                 trainer.pipeline)
  report.write_text(os.path.join(trainer.model_dir, "operative_config.gin"),
                    operative_config(trainer))
  # Last: its presence marks a finished run (a rerun leaves it as it is).
  report.write_json(os.path.join(trainer.model_dir, "metrics.json"), metrics)
  return metrics


def write_export(path, keras_model, optimizer, pipeline):
  """The serving SavedModel, written beside `path` and then moved into place."""
  partial = path + ".partial"
  if tf.io.gfile.exists(partial):
    tf.io.gfile.rmtree(partial)
  with weight_ema.averaged_weights(optimizer, keras_model.trainable_variables):
    export.export_saved_model(keras_model, partial, pipeline.eval_image_size,
                              list(pipeline.mean), list(pipeline.std),
                              pipeline.eval_crop_fraction, pipeline.eval_resize_method)
  if tf.io.gfile.exists(path):
    tf.io.gfile.rmtree(path)
  tf.io.gfile.rename(partial, path)


# -- the entry -----------------------------------------------------------------


@gin.configurable(denylist=["model_dir", "strategy", "task", "optimization", "runtime",
                            "on_step"])
def train_and_evaluate(model_dir, strategy, task=None, optimization=None, runtime=None,
                       on_step=None):
  """Builds, fits and finishes one run; returns its metrics.

  `task`, `optimization`, `runtime` default to the Gin-configured `Task()`,
  `Optimization()` and `Runtime()`. `on_step(step, loss, accuracy, learning_rate)`
  sees every global batch (the LR range test records them). A model_dir holds one run:
  a second one exits with a ConfigError; a finished one returns its report untouched.
  """
  trainer = build(model_dir, strategy,
                  task or checks.construct("Task", experiment.Task),
                  optimization or checks.construct("Optimization", experiment.Optimization),
                  runtime or checks.construct("Runtime", experiment.Runtime))
  chief = is_chief(strategy)
  # One run per model_dir: a second one stops here, before writing anything.
  lock = run_lock.acquire(model_dir) if chief else contextlib.nullcontext()
  with lock:
    finished = finished_report(model_dir)
    if finished is not None:
      print(f"{model_dir} holds a finished run: its report (metrics.json) is left as it "
            "was; choose a new --model_dir to train again", flush=True)
      return finished
    if chief:
      report.write_text(os.path.join(model_dir, "config.gin"), trainer.config_text)
    data = trainer.data
    print(f"{data.source.name}: {len(data.train)} training examples (per class "
          f"{data.counts.tolist()}), {len(data.validation)} validation, "
          f"{len(data.source.test_labels)} test; {trainer.length.steps_per_epoch} steps of "
          f"{trainer.pipeline.batch_size} an epoch on {strategy.num_replicas_in_sync} "
          f"replica(s); writing to {model_dir}", flush=True)
    for note in trainer.notes:
      print(note, flush=True)
    with data_errors(trainer):
      try:
        return finish(trainer, fit(trainer, on_step))
      finally:
        if trainer.books is not None:
          trainer.books.close()


def finished_report(model_dir):
  """The metrics of the finished run in `model_dir` (finish writes metrics.json last),
  or None."""
  path = os.path.join(model_dir, "metrics.json")
  if not os.path.exists(path):
    return None
  try:
    with open(path) as f:
      return json.load(f)
  except (OSError, ValueError):
    return None  # damaged: finish writes it again


@contextlib.contextmanager
def data_errors(trainer):
  """A file that fails to decode mid-run (it passed the scan's header check) becomes
  one ConfigError line naming it; the checkpoints stay as they were."""
  try:
    yield
  except (tf.errors.InvalidArgumentError, tf.errors.DataLossError,
          tf.errors.UnimplementedError) as e:
    find = getattr(trainer.data.source, "find_bad_files", None)
    if find is None:
      raise
    print(f"\n{type(e).__name__} while reading the data; decoding the data set's files "
          "to name the one that failed ...", flush=True)
    bad = find("train", None) + find("test", None)  # validation: "train" or its own
    if trainer.data.validation_split != "train":
      bad += find(trainer.data.validation_split, None)
    if not bad:
      raise
    raise ConfigError(
        f"{bad[0]} does not decode as an image (tf.io.decode_image fails on it)"
        + (f", and {len(bad) - 1} more files" if len(bad) > 1 else "")
        + "; remove or replace it, or bind image_folder.on_bad_file = 'skip'; the "
        "checkpoints are intact, rerun to resume") from None

