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

import dataclasses
import os
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
from recipes import report
from recipes import train_step
from recipes.data import pipeline as pipeline_lib
from recipes.data import source as source_lib
from recipes.errors import ConfigError
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
  """The run's data: source, training / validation indices into its training split,
  and the training class counts."""
  source: Any
  train: np.ndarray
  validation: np.ndarray
  counts: np.ndarray


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
    """Sets the trainable layers of the phase that trains `epoch` (and retraces)."""
    span = phases_lib.span_at(self.length.spans, epoch)
    if span == self.span:
      return
    if self.length.phased and (self.span is None or span.trainable != self.span.trainable):
      phases_lib.set_trainable(self.model, span.trainable)
      self.step.retrace()
      print(f"Epoch {epoch + 1}: phase trains {span.trainable!r} at x{span.lr_scale:g} "
            "the rate", flush=True)
    self.span = span

  def train_epoch(self, epoch, on_step=None):
    """Trains one epoch in loops of `steps_per_loop` steps; `on_step(step, loss,
    accuracy)` sees every global batch."""
    length = self.length
    dataset = self.pipeline.train_dataset(self.data.source, self.data.train, epoch,
                                          self.runtime.seed)
    steps = min(length.steps_per_epoch, length.total_steps - epoch * length.steps_per_epoch)
    if steps < length.steps_per_epoch:  # a run measured in steps ends mid-epoch
      dataset = dataset.take(steps)
    iterator = iter(self.strategy.experimental_distribute_dataset(dataset))
    self.step.reset_metrics()
    bar = tf_keras.utils.Progbar(steps, stateful_metrics=["loss", "accuracy"],
                                 unit_name="step")
    done, loss_sum, accuracy_sum = 0, 0.0, 0.0
    while done < steps:
      n = min(self.runtime.steps_per_loop, steps - done)
      losses, accuracies = self.step.loop(iterator, n)
      if on_step is not None:
        for i in range(n):
          on_step(epoch * length.steps_per_epoch + done + i, float(losses[i]),
                  float(accuracies[i]))
      done += n
      # The loop's own per-batch means (equal batches): the epoch's running means,
      # without reading the metrics back from the device every loop.
      loss_sum += float(losses.sum())
      accuracy_sum += float(accuracies.sum())
      bar.update(done, values=[("loss", loss_sum / done), ("accuracy", accuracy_sum / done)])

  # -- evaluation --------------------------------------------------------------

  def predict(self, split="test"):
    """(labels, predictions) of the test split or the validation examples."""
    if split == "test":
      dataset = self.pipeline.eval_dataset(self.data.source)
    else:
      dataset = self.pipeline.eval_dataset(self.data.source, "train", self.data.validation)
    return self.evaluator.predict(dataset, pipeline_lib.PAD_LABEL)

  def score(self, split="test"):
    """Long-tail metrics of the model's current weights on `split`."""
    labels, predictions = self.predict(split)
    return evaluation.long_tail_metrics(labels, predictions, self.data.counts,
                                        *self.task.shot_thresholds)

  def evaluate(self, split="test"):
    """`score`, with the optimizer's weight averages if it keeps them."""
    with weight_ema.averaged_weights(self.optimizer, self.model.trainable_variables):
      return self.score(split)

  def learning_rate(self):
    lr = self.optimizer.learning_rate
    if isinstance(lr, tf_keras.optimizers.schedules.LearningRateSchedule):
      return lr(self.optimizer.iterations)
    return lr


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
  """The source, its validation hold-out (balanced, drawn with `seed`, before the
  long-tail draw), the training draw and its class counts."""
  source = task.data()
  pool = np.arange(len(source.train_labels))
  validation = np.zeros([0], np.int64)
  if task.validation_per_class:
    pool, validation = source_lib.balanced_holdout(
        source.train_labels, task.validation_per_class, seed, "Task.validation_per_class")
  train = pool
  if task.long_tail:
    train = pool[task.long_tail.select(source.train_labels[pool], source.num_classes)]
  counts = np.bincount(source.train_labels[train], minlength=source.num_classes)
  return Data(source, train, validation, counts)


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


def build_model(task):
  """The model with its transforms, and its zoo card (None outside the zoo)."""
  try:
    model = task.model()
  except MODEL_ERRORS as e:
    raise ConfigError(str(e)) from None
  card = registry.card_of(model)
  for transform in task.model_transforms:
    try:
      model = registry.attach_card(transform(model), card) if card else transform(model)
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
  schedule = phases_lib.schedule(length.spans, learning_rate, length.steps_per_epoch)
  opt = optimization.optimizer(learning_rate=schedule)
  if optimization.weight_decay_exclude:
    opt.exclude_from_weight_decay(var_names=list(optimization.weight_decay_exclude))
  if runtime.mixed_precision == "mixed_float16":
    opt = tf_keras.mixed_precision.LossScaleOptimizer(opt)
  getattr(opt, "inner_optimizer", opt).build(model.trainable_variables)
  if optimization.layer_learning_rates is None:
    return opt, None, []
  try:
    rates = layer_lr.LayerLearningRates(optimization.layer_learning_rates)
    groups = rates.build(model.trainable_variables)
  except ValueError as e:
    raise ConfigError("Optimization.layer_learning_rates: "
                      + str(e).removeprefix("layer learning rates: ")) from None
  note = "layer learning rates: " + ", ".join(
      f"{n} variables x{m:g}" for m, n in sorted(groups.items()))
  return opt, rates, [note]


def build(model_dir, strategy, task, optimization, runtime):
  """Validates the run and constructs everything it uses; writes nothing."""
  set_up_runtime(runtime)
  checks.task(task, runtime)
  checks.optimization(optimization)
  data = load_data(task, runtime.seed)
  checks.best_metric_has_classes(runtime.best_metric, data.counts, task.shot_thresholds)
  try:
    base = task.pipeline()
  except ValueError as e:
    raise ConfigError(str(e)) from None
  checks.batch(base, len(data.train), strategy.num_replicas_in_sync)
  overrides, steps, learning_rate, notes, derived = plan_run(optimization, runtime, data,
                                                            base)
  with strategy.scope():
    model, card = build_model(task)
    pipeline, taken = resolve_pipeline(base, overrides, model, card,
                                       data.source.full_frame)
    derived.update(taken)
    checks.model_fits(model, data.source.num_classes,
                      {pipeline.image_size, pipeline.eval_image_size})
    length = run_length(optimization, runtime, data, pipeline, steps, model)
    opt, rates, rate_notes = build_optimizer(optimization, runtime, model, length,
                                             learning_rate)
    loss_fn = task.loss(class_counts=data.counts)
  for transform in optimization.gradient_transforms:
    if hasattr(transform, "build"):
      transform.build(model)
  decayed = [v for v in model.trainable_variables
             if not any(p in v.name for p in optimization.weight_decay_exclude)]
  step = train_step.TrainStep(train_step.StepParts(
      strategy, model, opt, loss_fn, pipeline.batch_size,
      list(optimization.gradient_transforms), optimization.l2, decayed, rates,
      runtime.jit_compile))
  config_text = gin.config_str()
  checks.model_dir_writable(model_dir)
  checks.resume_config(model_dir, config_text)
  return Trainer(model_dir, strategy, task, optimization, runtime, data, pipeline, model,
                 opt, step, train_step.EvalStep(strategy, model), length, derived,
                 notes + rate_notes, config_text)


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


class Bookkeeping:
  """Checkpoints (latest, and best on validation), summaries, early stopping."""

  def __init__(self, trainer):
    self.t = trainer
    rt = trainer.runtime
    with trainer.strategy.scope():
      self.epoch = tf.Variable(0, dtype=tf.int64, trainable=False, name="epoch")
      self.best_value = tf.Variable(-1.0, dtype=tf.float64, trainable=False, name="best")
      self.best_epoch = tf.Variable(0, dtype=tf.int64, trainable=False, name="best_epoch")
      self.stopped = tf.Variable(False, trainable=False, name="stopped_early")
    self.checkpoint = tf.train.Checkpoint(
        model=trainer.model, optimizer=trainer.optimizer, epoch=self.epoch,
        best_value=self.best_value, best_epoch=self.best_epoch, stopped=self.stopped,
        layer_rngs=layer_rng.layer_random_generators(trainer.model))
    self.manager = tf.train.CheckpointManager(
        self.checkpoint, os.path.join(trainer.model_dir, "checkpoints"),
        max_to_keep=rt.keep_checkpoints)
    self.best = tf.train.CheckpointManager(  # the validated (averaged) weights
        tf.train.Checkpoint(model=trainer.model),
        os.path.join(trainer.model_dir, "best"), max_to_keep=1)
    self.train_writer = tf.summary.create_file_writer(
        os.path.join(trainer.model_dir, "train"))
    self.eval_writer = tf.summary.create_file_writer(os.path.join(trainer.model_dir, "eval"))

  def restore(self):
    latest = self.manager.latest_checkpoint
    if latest:
      self.checkpoint.restore(latest).assert_existing_objects_matched()
      print(f"Resumed from {latest} at epoch {int(self.epoch.numpy())} of "
            f"{self.t.length.epochs}", flush=True)
    return int(self.epoch.numpy())

  def end_epoch(self, epoch):
    """Summaries, checkpoint, evaluations after `epoch` (0-based); True to stop early."""
    t, rt = self.t, self.t.runtime
    done = epoch + 1
    self.epoch.assign(done)
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
      self.manager.save(checkpoint_number=done)
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


def fit(trainer, on_step=None):
  """Trains from the latest checkpoint to the run's end (or an early stop)."""
  books = Bookkeeping(trainer)
  trainer.books = books
  first = books.restore()
  start = time.time()
  loss = None
  stopped = bool(books.stopped.numpy())
  for epoch in range(first, first if stopped else trainer.length.epochs):
    print(f"Epoch {epoch + 1}/{trainer.length.epochs}", flush=True)
    trainer.enter(epoch)
    trainer.train_epoch(epoch, on_step)
    loss = float(trainer.step.loss_metric.result())
    if books.end_epoch(epoch):
      stopped = True
      break
  trainer.enter(trainer.length.epochs)
  best = None
  if trainer.runtime.best_metric and books.best.latest_checkpoint:
    best = {"epoch": int(books.best_epoch.numpy()),
            f"validation_{trainer.runtime.best_metric}": float(books.best_value.numpy()),
            "checkpoint": books.best.latest_checkpoint}
  return Record(first, int(books.epoch.numpy()), loss, time.time() - start, best, stopped)


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
      final_train_loss=record.final_train_loss if record.first_epoch < record.last_epoch
      else None, best_on_validation=best_on_validation(trainer, record),
      derived={k: list(v) if isinstance(v, tuple) else v for k, v in trainer.derived.items()})
  metrics["reported"] = ("top-level metrics: the test split, final weights (averaged when "
                         "the optimizer keeps an EMA); best_on_validation: the best "
                         "checkpoint on validation")
  if len(data.validation):
    final = trainer.evaluate("validation")
    metrics["final_validation"] = {k: final[k] for k in checks.METRICS}
  if trainer.optimization.hyperrule is not None:
    metrics["hyperrule"] = trainer.notes[0]
  if not is_chief(trainer.strategy):
    return metrics
  write_eval_summaries(trainer.books.eval_writer, metrics, trainer.length.epochs)
  report.write_json(os.path.join(trainer.model_dir, "metrics.json"), metrics)
  report.plot_per_class_accuracy(
      os.path.join(trainer.model_dir, "per_class_accuracy.png"), metrics,
      title=f"{trainer.task.name or data.source.name}: per-class accuracy vs. training count")
  if rt.export_saved_model:
    write_export(os.path.join(trainer.model_dir, "export"), trainer.model, trainer.optimizer,
                 trainer.pipeline)
  report.write_text(os.path.join(trainer.model_dir, "operative_config.gin"),
                    operative_config(trainer))
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
  `Optimization()` and `Runtime()`. `on_step(step, loss, accuracy)` sees every
  global batch (the LR range test records them).
  """
  trainer = build(model_dir, strategy, task or experiment.Task(),
                  optimization or experiment.Optimization(),
                  runtime or experiment.Runtime())
  if is_chief(strategy):
    os.makedirs(model_dir, exist_ok=True)
    report.write_text(os.path.join(model_dir, "config.gin"), trainer.config_text)
  data = trainer.data
  print(f"{data.source.name}: {len(data.train)} training examples (per class "
        f"{data.counts.tolist()}), {len(data.validation)} validation, "
        f"{len(data.source.test_labels)} test; {trainer.length.steps_per_epoch} steps of "
        f"{trainer.pipeline.batch_size} an epoch on {strategy.num_replicas_in_sync} "
        f"replica(s); writing to {model_dir}", flush=True)
  for note in trainer.notes:
    print(note, flush=True)
  return finish(trainer, fit(trainer, on_step))
