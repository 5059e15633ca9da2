"""A run built from its settings: `build(model_dir, strategy, task, optimization,
runtime)` validates every setting and constructs the data, model, optimizer, loss and
step functions, and returns them as a `Built`. It writes nothing, and every ConfigError
a run can raise before training comes from here. A rule that derives settings
(BiT-HyperRule) returns a `DerivedSettings` that is applied before anything it affects is built.
"""

import dataclasses
import numbers
import re
from typing import Any, Callable, Dict, List, Optional

import gin
import numpy as np
import tensorflow as tf
import tf_keras

from recipes import best as best_lib
from recipes import experiment
from recipes import hooks
from recipes import lifecycle
from recipes import strategies
from recipes import train_step
from recipes.data import pipeline as pipeline_lib
from recipes.data import source as source_lib
from recipes.errors import ConfigError
from recipes.methods import phases as phases_lib
from recipes.methods import schedules
from tricks import layer_lr
from tricks import weight_ema
from zoo import finetune
from zoo import layer_groups
from zoo import nfnet_checkpoint
from zoo import pretrained
from zoo import registry

MODEL_ERRORS = (pretrained.WeightsError, finetune.CheckpointError,
                nfnet_checkpoint.ConversionError)


def _configurable_named_in(message):
  """The innermost Gin configurable a wrapped exception message names, or None."""
  found = re.findall(r"In call to configurable '([^']+)'", message)
  return found[0] if found else None


def construct(setting, make, *args, **kwargs):
  """`make(*args, **kwargs)`, with ValueError / TypeError raised while building a
  configured object (a bad value Gin passed, a wrong keyword) turned into one
  ConfigError line naming the setting and the configurable."""
  try:
    return make(*args, **kwargs)
  except ConfigError:
    raise
  except (ValueError, TypeError) as e:
    text = str(e)
    first = " ".join(next((l for l in text.splitlines() if l.strip()), repr(e)).split())
    if "Required bindings" in text:  # Gin's own: the entry point words it
      raise
    inner = _configurable_named_in(text)
    where = f"{setting} ({inner})" if inner and inner not in setting else setting
    raise ConfigError(f"{where}: {first.rstrip('.')}; fix its Gin bindings") from None


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
class DerivedSettings:
  """The settings a rule derives (BiT-HyperRule), or the run's own when it has none."""
  pipeline: Dict[str, Any]  # InputPipeline fields the rule sets
  steps: Optional[int]  # Runtime.steps (None: the run is measured in epochs)
  learning_rate: Callable  # builder: (total_steps, steps_per_epoch) -> rate or schedule
  rule_note: Optional[str] = None  # what the rule chose, in a line (None: no rule)
  derived: Dict[str, Any] = dataclasses.field(default_factory=dict)  # binding -> value


@dataclasses.dataclass
class Optimizing:
  """The optimizer (slots built), its learning rate, and the per-layer-group rates."""
  optimizer: tf_keras.optimizers.Optimizer
  schedule: Any  # a number, or a schedule of the global step
  layer_rates: Optional[layer_lr.LayerLearningRates] = None
  notes: List[str] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class Built:
  """Everything a run uses, constructed and validated (the trainer's input)."""
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
  notes: List[str]  # lines printed before training (the rule's note first, if any)
  config_text: str  # the Gin config the run was started with (config.gin)
  rule_note: Optional[str] = None  # the hyper-rule's choices (metrics.json "hyperrule")


def set_up_runtime(runtime):
  """Seeds, op determinism and the precision policy, before anything is built."""
  runtime.validate()
  tf_keras.backend.experimental.enable_tf_random_generator()
  tf_keras.utils.set_random_seed(runtime.seed)
  if runtime.deterministic_ops:
    tf.config.experimental.enable_op_determinism()
  tf_keras.mixed_precision.set_global_policy(runtime.mixed_precision or "float32")


def load_data(task, seed):
  """The source, its validation examples (the source's own validation split, or a
  balanced hold-out drawn with `seed` before the long-tail draw), the training draw
  and its class counts. A k-shot run (`Task.examples_per_class`) draws both its
  hold-out and its k examples a class with `Task.examples_per_class_seed`, not
  `seed`."""
  source = construct("Task.data", task.data)
  pool = np.arange(len(source.train_labels))
  validation = np.zeros([0], np.int64)
  given = source.validation_labels
  split = "train"
  if given is not None:
    if task.validation_per_class:
      raise ConfigError(f"{source.name} has its own validation split ({len(given)} "
                        "examples); drop Task.validation_per_class, or the source's "
                        "validation list")
    validation, split = np.arange(len(given)), "validation"
  elif task.validation_per_class:
    # A k-shot run's split (hold-out and draw) follows its own seed alone.
    holdout_seed = (seed if task.examples_per_class is None
                    else task.examples_per_class_seed)
    pool, validation = source_lib.balanced_holdout(
        source.train_labels, task.validation_per_class, holdout_seed,
        "Task.validation_per_class")
  train = pool
  if task.long_tail:
    train = pool[task.long_tail.select(source.train_labels[pool], source.num_classes)]
  if task.examples_per_class is not None:
    train = pool[source_lib.per_class_draw(
        source.train_labels[pool], task.examples_per_class, task.examples_per_class_seed,
        source.num_classes)]
  counts = np.bincount(source.train_labels[train], minlength=source.num_classes)
  return Data(source=source, train=train, validation=validation, counts=counts,
              validation_split=split)


def plan_run(optimization, runtime, data, base_pipeline):
  """The hyperrule's plan, if the run has one, else the run's own settings."""
  rule = optimization.hyperrule
  if rule is None:
    return DerivedSettings(pipeline={}, steps=runtime.steps,
                           learning_rate=optimization.learning_rate)
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

  return DerivedSettings(pipeline=dict(plan.pipeline), steps=plan.steps,
                         learning_rate=learning_rate, rule_note=plan.note, derived=derived)


def resolve_pipeline(base, overrides, model, card, full_frame=False):
  """The pipeline used: the Gin-built one with the plan's fields and, where still
  unset, the model card's; returns (pipeline, derived bindings)."""
  height, width = model.input_shape[1:3]
  model_size = height if height is not None and height == width else None
  pipeline = base.replace(**overrides)
  try:
    pipeline, taken = pipeline.with_card(card or pipeline.plain_card(model_size), model_size,
                                         full_frame, channels=model.input_shape[-1])
    pipeline.check()
  except ValueError as e:
    raise ConfigError(str(e)) from None
  return pipeline, {f"InputPipeline.{k}": v for k, v in taken.items()}


def build_model(task, class_counts):
  """The model with its transforms, and its zoo card (None outside the zoo). A transform
  declared `hooks.CountsAware` gets the training split's counts (as losses do)."""
  try:
    model = construct("Task.model", task.model)
  except MODEL_ERRORS as e:
    raise ConfigError(str(e)) from None
  card = registry.card_of(model)
  for transform in task.model_transforms:
    try:
      if isinstance(transform, hooks.CountsAware) and transform.takes_class_counts:
        built = transform(model, class_counts=class_counts)
      else:
        built = transform(model)
      model = registry.attach_card(built, card) if card else built
    except ValueError as e:
      raise ConfigError(f"Task.model_transforms: {e}") from None
  return model, card


def model_fits(keras_model, num_classes, image_sizes, channels=3):
  """The model's outputs, input size and input channels fit the data and pipeline."""
  outputs = keras_model.output_shape[-1]
  if outputs != num_classes:
    raise ConfigError(
        f"the data set has {num_classes} classes but the model outputs {outputs}; "
        f"bind the model's num_classes to {num_classes} (e.g. NUM_CLASSES = {num_classes})")
  height, width = keras_model.input_shape[1:3]
  for size in image_sizes:
    if (height, width) != (None, None) and (height, width) != (size, size):
      raise ConfigError(
          f"the model takes {height}x{width} images but the pipeline feeds {size}x{size}; "
          "make InputPipeline.image_size / eval_image_size match the model's input_shape")
  takes = keras_model.input_shape[-1]
  if takes != channels:
    raise ConfigError(
        f"the model takes {takes}-channel images but the pipeline normalises {channels} "
        f"(InputPipeline.mean / std); leave them unset (the card's) or give {takes} "
        f"value{'s' if takes > 1 else ''} each")


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
  return Length(epochs=epochs, steps_per_epoch=steps_per_epoch, total_steps=total_steps,
                spans=spans, phased=phased)


def _head(model):
  try:
    return model.get_layer(finetune.HEAD)
  except ValueError:
    raise ConfigError(f"Optimization.phases need a model with a {finetune.HEAD!r} head "
                      f"layer; {model.name!r} has none (use a zoo model)") from None


def optimizer_settings(opt):
  """A tf_keras optimizer (the base class declares weight decay and EMA), and the
  hyper-parameters it accepts without complaint but that make no sense: negative weight
  decay, EMA momentum outside [0, 1]."""
  if not isinstance(opt, tf_keras.optimizers.Optimizer):
    raise ConfigError(f"Optimization.optimizer built a {type(opt).__name__}, not a tf_keras "
                      "optimizer; bind a tf_keras.optimizers.Optimizer (SGD, AdamW, "
                      "tricks.Adafactor, ...: not the legacy ones)")
  decay = opt.weight_decay
  if decay is not None and not (isinstance(decay, numbers.Real) and decay >= 0):
    raise ConfigError(f"Optimization.optimizer weight_decay={decay!r} must be a number >= 0; "
                      "check DECOUPLED_WEIGHT_DECAY")
  if opt.use_ema and not 0 <= opt.ema_momentum < 1:
    raise ConfigError(f"Optimization.optimizer ema_momentum={opt.ema_momentum!r} must be "
                      "in [0, 1)")


def build_optimizer(optimization, runtime, model, length, learning_rate):
  """The optimizer (loss-scaled for float16) with its slots built, so a checkpoint
  restores into them, and the per-layer-group rates (if any)."""
  schedule = construct("Optimization.learning_rate", phases_lib.schedule,
                              length.spans, learning_rate, length.steps_per_epoch)
  schedules.check_learning_rates(schedule, length.total_steps)
  opt = construct("Optimization.optimizer", optimization.optimizer,
                         learning_rate=schedule)
  optimizer_settings(opt)
  if optimization.weight_decay_exclude:
    opt.exclude_from_weight_decay(var_names=list(optimization.weight_decay_exclude))
  if runtime.mixed_precision == "mixed_float16":
    opt = tf_keras.mixed_precision.LossScaleOptimizer(opt)
  inner = weight_ema.inner(opt)
  inner.build(model.trainable_variables)
  layered = (optimization.layer_decay is not None
             or optimization.layer_learning_rates is not None)
  if layered and inner.use_ema and inner.ema_overwrite_frequency:
    raise ConfigError("per-layer rates (Optimization.layer_decay / layer_learning_rates) "
                      "cannot follow an optimizer that overwrites its weights with their "
                      "average (ema_overwrite_frequency); unset ema_overwrite_frequency")
  if optimization.layer_decay is not None:
    return Optimizing(optimizer=opt, schedule=schedule,
                      **layer_decay_rates(model, optimization))
  if optimization.layer_learning_rates is None:
    return Optimizing(optimizer=opt, schedule=schedule)
  try:
    rates = layer_lr.LayerLearningRates(optimization.layer_learning_rates)
    groups = rates.build(model.trainable_variables)
  except ValueError as e:
    raise ConfigError("Optimization.layer_learning_rates: "
                      + str(e).removeprefix("layer learning rates: ")) from None
  note = "layer learning rates: " + ", ".join(
      f"{n} variables x{m:g}" for m, n in sorted(groups.items()))
  return Optimizing(optimizer=opt, schedule=schedule, layer_rates=rates, notes=[note])


def layer_decay_rates(model, optimization):
  """{layer_rates, notes}: BEiT's layer-wise rate decay over the model's stem, blocks
  and head (zoo/layer_groups.py), as per-variable rates (tricks/layer_lr.py)."""
  decay = optimization.layer_decay
  if optimization.layer_learning_rates is not None:
    raise ConfigError("Optimization.layer_decay and Optimization.layer_learning_rates both "
                      "set the layers' rates; keep one (LAYER_DECAY or "
                      "LAYER_LEARNING_RATES)")
  try:
    groups = layer_groups.layer_groups(model)
    names = [[v.name for layer in group for v in layer.trainable_weights]
             for group in groups]
    placed = {n for group in names for n in group}
    outside = [v.name for v in model.trainable_variables if v.name not in placed]
    if outside:
      raise ValueError(f"{len(outside)} trainable variables (e.g. {outside[0]!r}) are in "
                       "no layer group")
    pairs = layer_lr.layer_decay(names, decay)
    rates = layer_lr.LayerLearningRates(pairs)
    rates.build(model.trainable_variables)
  except ValueError as e:
    raise ConfigError(f"Optimization.layer_decay={decay!r}: {e}; check LAYER_DECAY") from None
  depth = len(groups) - 2
  note = (f"layer decay {decay:g}: stem, {depth} blocks, head; rates "
          f"x{decay ** (depth + 1):.3g} (stem) ... x{decay:g} (last block), x1 (head)")
  return dict(layer_rates=rates, notes=[note])


def build_step(strategy, optimization, runtime, model, optimizing, loss_fn, pipeline,
               class_counts=None):
  """The training step: loss, gradient transforms, L2 on the decayed variables, SAM
  (built with the class counts), weight constraints (built on the model), on
  `pipeline`'s global batches as its `device_inputs` hands them to the model."""
  for transform in optimization.gradient_transforms:
    if isinstance(transform, hooks.BuiltOnModel):
      transform.build(model)
  sam = optimization.sam
  if sam is not None:
    try:
      sam.build(class_counts)
    except ValueError as e:
      raise ConfigError(f"Optimization.sam: {e}") from None
  constraints = list(optimization.weight_constraints)
  for constraint in constraints:
    if not isinstance(constraint, hooks.WeightConstraint):
      raise ConfigError(f"Optimization.weight_constraints: {constraint!r} is not a weight "
                        "constraint (build(model), project(value), variable, every); use "
                        "e.g. @tricks.MaxNorm()")
    try:
      constraint.build(model)
    except ValueError as e:
      raise ConfigError(f"Optimization.weight_constraints: {e}") from None
  decayed = [v for v in model.trainable_variables
             if not any(p in v.name for p in optimization.weight_decay_exclude)]
  return train_step.TrainStep(train_step.StepParts(
      strategy=strategy, model=model, optimizer=optimizing.optimizer, loss_fn=loss_fn,
      global_batch=pipeline.batch_size,
      gradient_transforms=list(optimization.gradient_transforms),
      l2=optimization.l2, l2_variables=decayed, layer_learning_rates=optimizing.layer_rates,
      jit_compile=runtime.jit_compile, sam=sam, weight_constraints=constraints,
      device_inputs=pipeline.device_inputs))


def check_settings(task, optimization, runtime):
  """Every check that needs no data or model (the settings' own `validate()`)."""
  task.validate()
  optimization.validate()
  set_up_runtime(runtime)


def build(model_dir, strategy, task, optimization, runtime):
  """Validates the run and constructs everything it uses; writes nothing."""
  check_settings(task, optimization, runtime)
  data = load_data(task, runtime.seed)
  best_lib.check_metric(runtime.best_metric, len(data.validation), data.counts,
                        task.shot_thresholds)
  base = construct("Task.pipeline", task.pipeline)
  base.check_batch(len(data.train), strategy.num_replicas_in_sync)
  plan = plan_run(optimization, runtime, data, base)
  derived = dict(plan.derived)
  with strategy.scope():
    model, card = build_model(task, data.counts)
    pipeline, taken = resolve_pipeline(base, plan.pipeline, model, card,
                                       data.source.full_frame)
    derived.update(taken)
    model_fits(model, data.source.num_classes,
                      {pipeline.image_size, pipeline.eval_image_size}, len(pipeline.mean))
    pipeline_lib.data_service_answers(pipeline.data_service)
    length = run_length(optimization, runtime, data, pipeline, plan.steps, model)
    optimizing = build_optimizer(optimization, runtime, model, length, plan.learning_rate)
    loss_fn = construct("Task.loss", task.loss, class_counts=data.counts)
  step = build_step(strategy, optimization, runtime, model, optimizing, loss_fn,
                    pipeline, data.counts)
  notes = ([plan.rule_note] if plan.rule_note else []) + optimizing.notes
  if isinstance(strategy, tf.distribute.TPUStrategy):
    notes += tpu_checks(strategy, runtime, pipeline, data)
  config_text = gin.config_str()
  lifecycle.check_model_dir(model_dir, config_text)
  return Built(
      model_dir=model_dir, strategy=strategy, task=task, optimization=optimization,
      runtime=runtime, data=data, pipeline=pipeline, model=model,
      optimizer=optimizing.optimizer, schedule=optimizing.schedule, step=step,
      evaluator=train_step.EvalStep(strategy, model, device_inputs=pipeline.device_inputs),
      length=length, derived=derived,
      notes=notes, config_text=config_text, rule_note=plan.rule_note)


def tpu_checks(strategy, runtime, pipeline, data):
  """strategies.tpu_advice on the datasets this run feeds its replicas; its lines."""
  replicas = strategy.num_replicas_in_sync
  context = tf.distribute.InputContext(1, 0, replicas)
  datasets = {
      "training": pipeline.train_dataset(data.source, data.train, 0, runtime.seed, context),
      "test": pipeline.eval_dataset(data.source, context=context)}
  if len(data.validation):
    datasets["validation"] = pipeline.eval_dataset(data.source, data.validation_split,
                                                   data.validation, context)
  return strategies.tpu_advice(runtime, pipeline, replicas, datasets)
