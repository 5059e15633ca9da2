"""Decoupled training (Kang et al. 2020, "Decoupling Representation and Classifier for
Long-Tailed Recognition", arXiv:1910.09217): stage 1 learns the representation (and a
classifier) on the long-tailed data; stage 2 rebalances the classifier alone, from
stage 1's final (or best) checkpoint: cRT, LWS (both trained, class-balanced sampling)
or the tau-normalised classifier (post hoc, no training).

`run.procedure = @decoupled` runs both stages in one command:

    model_dir/stage1   a complete run of the trainer, Gin scope `stage1/`
    model_dir/stage2   a complete run from stage 1's final checkpoint, scope `stage2/`
    model_dir/decoupled.json   the stage-1 checkpoint stage 2 started from, and both
                               stages' headline test metrics

Each stage is an ordinary run (resumable, locked, with its own metrics.json). Bindings
under `stage1/` or `stage2/` (`stage2/Runtime.epochs = 10`,
`stage2/InputPipeline.sampler = @tricks.Sampler()`) apply to that stage only; unscoped
bindings to both, so both draw the same training and validation data. With
`decoupled.stage1_checkpoint = '<a ckpt-N prefix or a checkpoints/ directory>'` the
command skips stage 1 and runs stage 2 alone from that checkpoint.

The runner binds `stage2/zoo.load_stage1.checkpoint` to the checkpoint (so stage 2's
operative_config.gin names it); stage 2's `Task.model_transforms` must contain
`@zoo.load_stage1` (see zoo/decoupled.py and recipes/configs/runs/decoupled*.gin).
"""

import os
import time

import gin
import numpy as np
import tensorflow as tf

from recipes import build as build_lib
from recipes import evaluation
from recipes import experiment
from recipes import finish as finish_lib
from recipes import lifecycle
from recipes import run_report
from recipes import strategies
from recipes import train_step
from recipes import trainer as trainer_lib
from recipes.errors import ConfigError
from tricks import logit_adjustment
from tricks import posthoc
from tricks import tau_norm as tau_norm_lib
from zoo import decoupled as decoupled_zoo
from zoo import finetune

STAGE1, STAGE2 = "stage1", "stage2"
LOAD_BINDING = f"{STAGE2}/zoo.load_stage1.checkpoint"


def saved_checkpoint(stage_dir, which="final"):
  """Stage 1's final checkpoint (the newest in checkpoints/) or its best on validation
  (best/, kept when Runtime.best_metric is set)."""
  folder = "checkpoints" if which == "final" else "best"
  path = tf.train.latest_checkpoint(os.path.join(stage_dir, folder))
  if path is None:
    fix = ("; set Runtime.best_metric, or decoupled.stage1_weights = 'final'"
           if which == "best" else "")
    raise ConfigError(f"{stage_dir}/{folder} holds no checkpoint after stage 1{fix}")
  return path


def resolve_checkpoint(path):
  """A checkpoint prefix from a prefix or a directory (its newest); one-line errors."""
  try:
    return finetune._checkpoint_path(path)  # pylint: disable=protected-access
  except finetune.CheckpointError as e:
    raise ConfigError(f"decoupled.stage1_checkpoint: {e}") from None


def _task_with_load():
  """Stage 2's Task (constructed in the active scope), checked to load stage 1."""
  task = build_lib.construct("Task", experiment.Task)
  if not any(transform is decoupled_zoo.load_stage1 for transform in task.model_transforms):
    raise ConfigError(
        "stage 2 must start from stage 1's weights: add @zoo.load_stage1 to "
        "stage2/Task.model_transforms (e.g. [@zoo.load_stage1, @zoo.crt]; see "
        "recipes/configs/runs/decoupled_crt.gin)")
  return task


@gin.configurable(denylist=["model_dir", "strategy"])
def retrain_classifier(model_dir, strategy):
  """cRT or LWS stage 2: an ordinary training run whose model transforms load stage 1
  and rebalance the head (`@zoo.crt`, `@zoo.lws`)."""
  return trainer_lib.train_and_evaluate(model_dir, strategy, task=_task_with_load())


def _features(trainer, split):
  """(features [n, d] float64, labels [n]) of the validation examples (split
  'validation') or the test split through the head's input (Trainer.predict's split
  and gathering)."""
  features_of = decoupled_zoo.feature_model(trainer.built.model)
  evaluator = train_step.EvalStep(trainer.built.strategy, features_of,
                                  output=lambda features: tf.cast(features, tf.float32),
                                  device_inputs=trainer.built.pipeline.device_inputs)
  labels, features = trainer.predict(split, evaluator)
  return features.astype(np.float64), labels


def _untrained_stage(model_dir, strategy, adjust):
  """A stage 2 that changes stage 1's model without training: `adjust(trainer)`
  changes the model and returns its report entry {key: value}; the model is saved as
  checkpoints/ckpt-0 and the run's report written as a trained run's is."""
  began = time.time()
  built = build_lib.build(model_dir, strategy, _task_with_load(),
                          build_lib.construct("Optimization", experiment.Optimization),
                          build_lib.construct("Runtime", experiment.Runtime))
  trainer = trainer_lib.Trainer(built)

  def body(run_dir):
    entry = adjust(trainer)
    run_dir.checkpoints.save(0)
    return finish_lib.finish(
        trainer, run_dir, trainer_lib.Record(last_epoch=0, final_train_loss=None,
                                             seconds=time.time() - began),
        extra=dict(entry, epochs=0, epochs_trained=0, steps=0))

  return lifecycle.run_in_model_dir(built, body)


def _choice(name, value, scores):
  """The report entry of a value given, or chosen on validation with its sweep."""
  print(f"{name}: tau = {value:g}" + (
      f" (best validation balanced accuracy {max(scores.values()):.4f} over "
      f"{len(scores)} values)" if scores else " (given)"), flush=True)
  return {"tau": float(value), "chosen_on": "validation" if scores else "given",
          "validation_balanced_accuracy": (
              {f"{k:g}": v for k, v in scores.items()} if scores else None)}


def _needs_validation(trainer, configurable):
  if not len(trainer.built.data.validation):
    raise ConfigError(f"{configurable} chooses tau on a validation split: set "
                      f"Task.validation_per_class (e.g. 5), or fix {configurable}.tau")


@gin.configurable(denylist=["model_dir", "strategy"])
def tau_normalized_classifier(model_dir, strategy, tau=None, grid=tau_norm_lib.GRID):
  """The tau-normalised classifier on stage 1's model, no training: tau (given, or the
  `grid` value of best balanced accuracy on the validation split,
  `Task.validation_per_class`; never the test split) is applied to the head, the model
  saved as checkpoints/ckpt-0, and the run's report written as a trained run's is,
  with `tau_norm` (tau, how it was chosen, the validation sweep) in metrics.json."""

  def normalize(trainer):
    chosen, scores = tau, None
    if tau is None:
      _needs_validation(trainer, "tau_normalized_classifier")
      features, labels = _features(trainer, "validation")
      kernel = decoupled_zoo.head_of(trainer.built.model).kernel.numpy()
      chosen, scores = tau_norm_lib.choose_tau(features, labels, kernel, grid)
    decoupled_zoo.tau_normalize(trainer.built.model, chosen)
    return {"tau_norm": _choice("tau-normalised classifier", chosen, scores)}

  return _untrained_stage(model_dir, strategy, normalize)


@gin.configurable(denylist=["model_dir", "strategy"])
def posthoc_adjusted_classifier(model_dir, strategy, tau=None, grid=posthoc.DEFAULT_TAUS):
  """Post-hoc logit adjustment (Menon et al. 2021, eq. 9) of stage 1's model, no
  training: f(x) - tau log(pi) with pi the training split's priors, tau given or the
  `grid` value of best balanced accuracy on the validation split (never the test
  split). The shift goes into the head's bias (exactly eq. 9's logits, at evaluation
  and in the export); metrics.json's `posthoc` holds tau and the validation sweep."""

  def adjust(trainer):
    head = decoupled_zoo.head_of(trainer.built.model)
    if head.bias is None:
      raise ConfigError(f"posthoc_adjusted_classifier shifts the head's bias, and "
                        f"{head.name!r} has none (a normed head?); bind "
                        "Task.model_transforms = [@posthoc_adjusted] in training instead")
    counts = trainer.built.data.counts
    chosen, scores = tau, None
    if tau is None:
      _needs_validation(trainer, "posthoc_adjusted_classifier")
      evaluator = train_step.EvalStep(trainer.built.strategy, trainer.built.model,
                                      output=lambda logits: tf.cast(logits, tf.float32),
                                      device_inputs=trainer.built.pipeline.device_inputs)
      labels, logits = trainer.predict("validation", evaluator)
      scores = {float(u): posthoc.balanced_accuracy(
          posthoc.adjust(logits, counts, u).argmax(-1), labels) for u in grid}
      chosen = posthoc.choose_tau(logits, labels, counts, grid)
    shift = chosen * logit_adjustment.log_priors(counts)
    head.bias.assign(head.bias - tf.constant(shift, head.bias.dtype))
    return {"posthoc": _choice("post-hoc adjustment", chosen, scores)}

  return _untrained_stage(model_dir, strategy, adjust)


STAGE1_WEIGHTS = ("final", "best")


def _check_stage1_weights(stage1_weights):
  """Before stage 1 trains: 'best' needs stage 1 to keep a best checkpoint."""
  if stage1_weights not in STAGE1_WEIGHTS:
    raise ConfigError(f"decoupled.stage1_weights={stage1_weights!r}; use 'final' or 'best'")
  if stage1_weights == "best":
    with gin.config_scope(STAGE1):
      runtime = build_lib.construct("Runtime", experiment.Runtime)
    if runtime.best_metric is None:
      raise ConfigError("decoupled.stage1_weights = 'best' needs stage 1 to keep its best "
                        "checkpoint: set Runtime.best_metric (e.g. 'balanced_accuracy') "
                        "and a validation split")


@gin.configurable(denylist=["model_dir", "strategy"])
def decoupled(model_dir, strategy, stage2=gin.REQUIRED, stage1_checkpoint=None,
              stage1_weights="final"):
  """Stage 1 in model_dir/stage1 (scope `stage1/`), unless `stage1_checkpoint` is
  given, then `stage2(model_dir/stage2, strategy)` from it (scope `stage2/`); returns
  stage 2's metrics. Stage 2 starts from stage 1's final weights, or with
  `stage1_weights = 'best'` from its best on validation (Kang et al.'s code loads
  `state_dict_best`)."""
  stage1 = None
  if stage1_checkpoint is None:
    _check_stage1_weights(stage1_weights)
    with gin.config_scope(STAGE1):
      stage1 = trainer_lib.train_and_evaluate(os.path.join(model_dir, STAGE1), strategy)
    checkpoint = saved_checkpoint(os.path.join(model_dir, STAGE1), stage1_weights)
  else:
    checkpoint = resolve_checkpoint(stage1_checkpoint)
  checkpoint = os.path.abspath(checkpoint)
  print(f"Stage 2 starts from {checkpoint}", flush=True)
  with gin.unlock_config():
    gin.bind_parameter(LOAD_BINDING, checkpoint)
  with gin.config_scope(STAGE2):
    metrics = stage2(os.path.join(model_dir, STAGE2), strategy)
  if strategies.is_chief(strategy):
    headline = evaluation.METRICS
    run_report.write_json(os.path.join(model_dir, "decoupled.json"), {
        "stage1_checkpoint": checkpoint,
        "stage1": {k: stage1.get(k) for k in headline} if stage1 else None,
        "stage2": {k: metrics.get(k) for k in headline},
        "stage2_metrics": os.path.join(model_dir, STAGE2, "metrics.json")})
  return metrics
