"""A run's configuration in three parts, as Model Garden's ExperimentConfig splits it.

- `Task`: what is learned: data, long-tail profile or k-shot draw, input pipeline,
  model, model transforms, loss, shot thresholds, validation split.
- `Optimization`: how: optimizer, learning-rate schedule, gradient transforms, weight
  decay, per-layer-group rates or layer-wise rate decay, phases, and a rule that
  derives settings (BiT).
- `Runtime`: where and how long: seed, epochs or steps, precision, XLA, determinism,
  steps per loop, checkpoint / evaluation cadence, export, device settings.

Each is a frozen, Gin-configurable dataclass (`Task.loss = @logit_adjusted`,
`Runtime.epochs = %EPOCHS`) with a `validate()` that checks every field's type and
value before anything is built (as Model Garden's configs' `validate()`), each failure
one ConfigError line. Callables are constructors: the trainer calls them in `build`,
after any derived plan is known, so nothing Gin built is changed afterwards.
"""

import dataclasses
from typing import Any, Callable, Mapping, Optional, Sequence

import gin
import tf_keras

from recipes import evaluation
from recipes import setting_types
from recipes.data import pipeline as pipeline_lib
from recipes.errors import ConfigError
from recipes.methods import losses
from recipes.methods import phases as phases_lib
from recipes.methods import schedules

PRECISIONS = (None, "mixed_float16", "mixed_bfloat16")

@gin.configurable
@dataclasses.dataclass(frozen=True)
class Phase:
  """A stretch of training with its own trainable set and rate.

  Args:
    epochs: the phase's length; None (last phase only) takes the rest of the run; 0
      skips the phase (so a recipe can keep a head phase that users switch on).
    trainable: "all", "head" (the "logits" layer alone, the backbone frozen with
      BatchNorm in inference mode), or a regex: top-level layers whose name matches
      train, the rest are frozen.
    lr_scale: the phase runs the recipe's schedule over its own steps, times this.
  """
  epochs: Optional[int] = None
  trainable: str = "all"
  lr_scale: float = 1.0


@gin.configurable
def head_then_all(head_epochs=0, lr_scale=0.1):
  """Fine-tuning's two phases: `head_epochs` of the head alone, then every layer at
  `lr_scale` x the rate (LP-FT, Kumar et al. 2022); none when head_epochs is 0."""
  if not head_epochs:
    return []
  return [Phase(head_epochs, "head"), Phase(None, "all", lr_scale)]


@gin.configurable
@dataclasses.dataclass(frozen=True)
class Task:
  """What is learned.

  Args:
    data: returns a `recipes.data.source.Source` (e.g. `@digits`, `@tfds_source`).
    model: returns a tf_keras model that outputs logits (e.g. `@zoo.build`).
    pipeline: builds the `InputPipeline`; its unset resolution and normalisation
      come from the model's zoo card.
    long_tail: a `LongTail` drawn from the training pool, or None for all of it.
    model_transforms: `model -> model` rewrites applied in order (`@recompute`,
      `@swap_batch_norm`, `@acnet_convert`).
    loss: called as `loss(class_counts=)`; returns per-example losses.
    shot_thresholds: (many_shot_above, few_shot_below) training counts.
    validation_per_class: examples of each class held out of the training pool
      (before the long-tail or k-shot draw), drawn by `Runtime.seed` (in a k-shot run
      by `examples_per_class_seed`), for validation; 0 holds none out. The test split
      is never used to choose anything.
    examples_per_class: k, for a k-shot training set (BiT's `examples_per_class`): k
      examples of every class drawn from the training pool (after the validation
      hold-out) by `examples_per_class_seed`; None trains on the whole pool. A class
      with fewer than k is an error. It replaces the long-tail draw (`long_tail` None).
    examples_per_class_seed: the seed of that draw and, in a k-shot run, of the
      validation hold-out too: the split is apart from `Runtime.seed` (initialisation,
      augmentation, data order), so examples and initialisation vary independently.
    name: the recipe's name, recorded in metrics.json.
  """
  data: Callable[[], Any] = gin.REQUIRED
  model: Callable[[], tf_keras.Model] = gin.REQUIRED
  pipeline: Callable[..., pipeline_lib.InputPipeline] = pipeline_lib.InputPipeline
  long_tail: Optional[Any] = None
  model_transforms: Sequence[Callable] = ()
  loss: Callable = losses.cross_entropy
  shot_thresholds: Sequence[int] = (100, 20)
  validation_per_class: int = 0
  examples_per_class: Optional[int] = None
  examples_per_class_seed: int = 0
  name: Optional[str] = None

  def validate(self):
    """Every field's type; the hold-out, the k-shot draw and the shot thresholds."""
    setting_types.check_fields(self)
    whole = setting_types.whole
    whole("Task.validation_per_class", self.validation_per_class, 0)
    whole("Task.examples_per_class", self.examples_per_class, 1, allow_none=True)
    whole("Task.examples_per_class_seed", self.examples_per_class_seed, 0)
    if self.examples_per_class is not None and self.long_tail is not None:
      raise ConfigError(f"Task.examples_per_class={self.examples_per_class} and "
                        "Task.long_tail both draw the training set; set Task.long_tail = "
                        "None for a k-shot draw (or Task.examples_per_class = None)")
    many, few = self.shot_thresholds
    if not few <= many:
      raise ConfigError(f"Task.shot_thresholds={tuple(self.shot_thresholds)} must be "
                        "(many_shot_above, few_shot_below) with few <= many")


@gin.configurable
@dataclasses.dataclass(frozen=True)
class Optimization:
  """How it is learned.

  Args:
    optimizer: a tf_keras optimizer class, called with `learning_rate=`.
    learning_rate: called as `learning_rate(total_steps=, steps_per_epoch=)` for
      each phase.
    gradient_transforms: `(grads, variables) -> grads` on unscaled, all-reduced
      gradients (e.g. `@AdaptiveGradClip()`).
    weight_decay_exclude: variable-name substrings decayed neither by the
      optimizer's decoupled weight_decay nor by `l2`.
    l2: coefficient of an L2 penalty l2 / 2 * sum ||w||^2 (coupled weight decay).
    layer_learning_rates: {name regex: multiplier} (tricks/layer_lr.py), or None.
    layer_decay: layer-wise learning-rate decay (BEiT's, timm's `--layer-decay`): a
      number in (0, 1]; a zoo model's stem, blocks and head (zoo/layer_groups.py) get
      decay^(L + 1 - depth) times the rate, the head the rate itself. None: off. Not
      with `layer_learning_rates`.
    phases: `Phase`s in order; empty: one phase, every layer, the whole run.
    hyperrule: a rule (`@BitHyperRule()`) whose plan sets the run's steps, rate
      schedule, resolution and MixUp from the training set, before anything is built.
    sam: sharpness-aware minimisation, two forward / backward passes a step
      (`@tricks.SAM()`, `@tricks.ImbSAM()`; tricks/sam.py), or None.
    weight_constraints: projections applied after every optimizer update (e.g.
      `@tricks.MaxNorm()`, tricks/max_norm.py), each built on the model.
  """
  optimizer: Callable = tf_keras.optimizers.SGD
  learning_rate: Callable = schedules.warmup_cosine
  gradient_transforms: Sequence[Callable] = ()
  weight_decay_exclude: Sequence[str] = ()
  l2: float = 0.0
  layer_learning_rates: Optional[Mapping[str, float]] = None
  layer_decay: Optional[float] = None
  phases: Sequence[Phase] = ()
  hyperrule: Optional[Any] = None
  sam: Optional[Any] = None
  weight_constraints: Sequence[Any] = ()

  def validate(self):
    """Every field's type; the L2 coefficient and each phase."""
    setting_types.check_fields(self)
    setting_types.number("Optimization.l2", self.l2, 0)
    phases_lib.check(self.phases)


@gin.configurable
@dataclasses.dataclass(frozen=True)
class Runtime:
  """Where and for how long.

  Args:
    seed: the seed of every random choice (data draw, initialisation, augmentation).
    epochs: the run's length; `steps` (global steps) overrides it, the last epoch
      cut short.
    mixed_precision: None, "mixed_float16" (dynamic loss scaling) or "mixed_bfloat16".
    jit_compile: XLA-compile each replica's forward and backward pass. On CPU it slows
      every zoo model but the smallest (docs/costs.md, "What the zoo costs").
    deterministic_ops: TF's op determinism (same command, same metrics).
    steps_per_loop: training steps run inside one tf.function call; the progress bar,
      summaries and host-side checks run once per loop.
    checkpoint_every_epochs, eval_every_epochs, keep_checkpoints: bookkeeping
      (eval_every_epochs 0: evaluate at the end only).
    best_metric: the validation metric (a key of the long-tail metrics, e.g.
      "balanced_accuracy") whose best checkpoint is kept in model_dir/best; needs
      `Task.validation_per_class`.
    early_stopping_patience: stop after this many validations without a new best;
      None never stops early.
    nonfinite_retries: after a step whose loss or gradient norm is NaN or Inf, roll
      back to the last good checkpoint and retry on a fresh data order this many
      times (Model Garden's recovery_max_trials), then stop with exit status 3.
    export_saved_model: write model_dir/export, a SavedModel serving encoded images.
    gpu_memory_growth: allocate GPU memory as needed (set before devices are used).
    test_selection: the code whose protocol picks the best epoch on the test split (e.g.
      "Cao et al. 2019's"): the test split is scored at every evaluation and the best
      top-1 epoch recorded, labelled, as metrics.json's `best_on_test_protocol` (the
      top-level metrics stay the final weights'); for reproducing a paper's number,
      never for choosing a model (recipes/best_on_test.py). None: not kept.
  """
  seed: int = 0
  epochs: int = 30
  steps: Optional[int] = None
  mixed_precision: Optional[str] = None
  jit_compile: bool = False
  deterministic_ops: bool = True
  steps_per_loop: int = 1
  checkpoint_every_epochs: int = 1
  eval_every_epochs: int = 5
  keep_checkpoints: int = 3
  best_metric: Optional[str] = None
  early_stopping_patience: Optional[int] = None
  nonfinite_retries: int = 2
  export_saved_model: bool = False
  gpu_memory_growth: bool = False
  test_selection: Optional[str] = None

  def validate(self):
    """Every field's type and value, and the settings that need one another."""
    setting_types.check_fields(self)
    whole = setting_types.whole
    whole("Runtime.seed", self.seed, 0)
    whole("Runtime.epochs", self.epochs, 1)
    whole("Runtime.steps", self.steps, 1, allow_none=True)
    whole("Runtime.steps_per_loop", self.steps_per_loop, 1)
    whole("Runtime.checkpoint_every_epochs", self.checkpoint_every_epochs, 1)
    whole("Runtime.eval_every_epochs", self.eval_every_epochs, 0)
    whole("Runtime.keep_checkpoints", self.keep_checkpoints, 1)
    whole("Runtime.nonfinite_retries", self.nonfinite_retries, 0)
    whole("Runtime.early_stopping_patience", self.early_stopping_patience, 1,
          allow_none=True)
    if self.mixed_precision not in PRECISIONS:
      raise ConfigError(f"Runtime.mixed_precision={self.mixed_precision!r}; use None, "
                        "'mixed_float16' or 'mixed_bfloat16'")
    if self.best_metric is not None and self.best_metric not in evaluation.METRICS:
      raise ConfigError(f"Runtime.best_metric={self.best_metric!r}; choose one of "
                        f"{', '.join(evaluation.METRICS)}")
    if self.early_stopping_patience is not None and self.best_metric is None:
      raise ConfigError("Runtime.early_stopping_patience needs Runtime.best_metric (e.g. "
                        "'balanced_accuracy') and Task.validation_per_class > 0")
    if self.test_selection is not None and not (isinstance(self.test_selection, str)
                                                and self.test_selection.strip()):
      raise ConfigError(f"Runtime.test_selection={self.test_selection!r}; name the code "
                        "whose protocol it follows (e.g. \"Cao et al. 2019's\") or leave it "
                        "None")
    if self.test_selection and not self.eval_every_epochs:
      raise ConfigError("Runtime.test_selection needs Runtime.eval_every_epochs >= 1 (the "
                        "test split is scored at each evaluation)")
    if self.early_stopping_patience is not None and not self.eval_every_epochs:
      raise ConfigError("Runtime.early_stopping_patience needs Runtime.eval_every_epochs "
                        ">= 1 (validation only at the end cannot stop early)")


def split(**settings):
  """(Task, Optimization, Runtime) from one flat set of their fields, for Python callers:
  `train_and_evaluate(model_dir, strategy, *split(data=..., model=..., epochs=3))`."""
  parts = (Task, Optimization, Runtime)
  names = [{f.name for f in dataclasses.fields(p)} for p in parts]
  unknown = sorted(set(settings) - set().union(*names))
  if unknown:
    raise TypeError(f"no Task, Optimization or Runtime field named {unknown[0]!r}")
  return tuple(p(**{k: v for k, v in settings.items() if k in n})
               for p, n in zip(parts, names))
