"""Checks `build` runs before a run writes anything: each failure is one ConfigError line
that names the setting and the fix."""

import numbers
import os
import tempfile

from recipes.errors import ConfigError

PRECISIONS = (None, "mixed_float16", "mixed_bfloat16")
METRICS = ("top1", "balanced_accuracy", "many_shot_accuracy", "medium_shot_accuracy",
           "few_shot_accuracy")


def whole(name, value, minimum, allow_none=False):
  """`value` is an int >= minimum (or None when allowed)."""
  if value is None and allow_none:
    return
  if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
    none = " or None" if allow_none else ""
    raise ConfigError(f"{name}={value!r} must be a whole number >= {minimum}{none}")


def number(name, value, minimum, strict=False):
  """`value` is a real number >= minimum (> when strict)."""
  bad = isinstance(value, bool) or not isinstance(value, numbers.Real)
  if bad or value < minimum or (strict and value == minimum):
    raise ConfigError(f"{name}={value!r} must be a number {'>' if strict else '>='} "
                      f"{minimum}")


def runtime(r):
  """Every Runtime setting."""
  whole("Runtime.seed", r.seed, 0)
  whole("Runtime.epochs", r.epochs, 1)
  whole("Runtime.steps", r.steps, 1, allow_none=True)
  whole("Runtime.steps_per_loop", r.steps_per_loop, 1)
  whole("Runtime.checkpoint_every_epochs", r.checkpoint_every_epochs, 1)
  whole("Runtime.eval_every_epochs", r.eval_every_epochs, 0)
  whole("Runtime.keep_checkpoints", r.keep_checkpoints, 1)
  whole("Runtime.early_stopping_patience", r.early_stopping_patience, 1, allow_none=True)
  if r.mixed_precision not in PRECISIONS:
    raise ConfigError(f"Runtime.mixed_precision={r.mixed_precision!r}; use None, "
                      "'mixed_float16' or 'mixed_bfloat16'")
  if r.best_metric is not None and r.best_metric not in METRICS:
    raise ConfigError(f"Runtime.best_metric={r.best_metric!r}; choose one of "
                      f"{', '.join(METRICS)}")
  if r.early_stopping_patience is not None and r.best_metric is None:
    raise ConfigError("Runtime.early_stopping_patience needs Runtime.best_metric (e.g. "
                      "'balanced_accuracy') and Task.validation_per_class > 0")
  if r.early_stopping_patience is not None and not r.eval_every_epochs:
    raise ConfigError("Runtime.early_stopping_patience needs Runtime.eval_every_epochs >= 1 "
                      "(validation only at the end cannot stop early)")


def task(t, runtime_):
  whole("Task.validation_per_class", t.validation_per_class, 0)
  if runtime_.best_metric is not None and not t.validation_per_class:
    raise ConfigError(f"Runtime.best_metric={runtime_.best_metric!r} needs a validation "
                      "split: set Task.validation_per_class (e.g. 5)")
  many, few = t.shot_thresholds
  if not few <= many:
    raise ConfigError(f"Task.shot_thresholds={tuple(t.shot_thresholds)} must be "
                      "(many_shot_above, few_shot_below) with few <= many")


def best_metric_has_classes(metric, counts, shot_thresholds):
  """A shot-group metric needs classes in its group (long_tail_metrics gives None)."""
  many, few = shot_thresholds
  groups = {"many_shot_accuracy": counts > many, "few_shot_accuracy": counts < few,
            "medium_shot_accuracy": (counts <= many) & (counts >= few)}
  if metric in groups and not groups[metric].any():
    raise ConfigError(f"Runtime.best_metric={metric!r} but no class has that many training "
                      f"examples (counts {list(counts)}, Task.shot_thresholds="
                      f"{tuple(shot_thresholds)}); choose 'balanced_accuracy'")


def optimization(o):
  number("Optimization.l2", o.l2, 0)


def batch(pipeline, num_examples, replicas):
  whole("InputPipeline.batch_size", pipeline.batch_size, 1)
  if pipeline.batch_size % replicas:
    raise ConfigError(
        f"InputPipeline.batch_size={pipeline.batch_size} does not split over {replicas} "
        "replicas; use a multiple of the replica count")
  if num_examples < pipeline.batch_size:
    raise ConfigError(
        f"the training split has {num_examples} examples, fewer than one global batch "
        f"of {pipeline.batch_size}; lower InputPipeline.batch_size")


def model_fits(keras_model, num_classes, image_sizes):
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


def model_dir_writable(model_dir):
  """Raises ConfigError unless `model_dir` exists as a writable directory or can be made."""
  path = os.path.abspath(model_dir)
  probe = path
  while not os.path.exists(probe):
    probe = os.path.dirname(probe)
  if not os.path.isdir(probe):
    raise ConfigError(
        f"model_dir {model_dir!r} cannot be created: {probe!r} is a file; choose "
        "another --model_dir")
  try:
    os.rmdir(tempfile.mkdtemp(dir=probe, prefix=".model_zoo-write-check-"))
  except OSError as e:
    raise ConfigError(
        f"model_dir {model_dir!r} is not writable ({e.strerror} in {probe!r}); choose "
        "a writable --model_dir") from None


def resume_config(model_dir, config_text):
  """A model_dir holds one run: refuse to resume it under another configuration."""
  path = os.path.join(model_dir, "config.gin")
  if not os.path.exists(path):
    return
  with open(path) as f:
    saved = f.read()
  if saved == config_text:
    return
  old = [l for l in saved.splitlines() if l and not l.startswith("#")]
  new = [l for l in config_text.splitlines() if l and not l.startswith("#")]
  was = next((l for l in old if l not in new), None)
  now = next((l for l in new if l not in old), None)
  raise ConfigError(
      f"model_dir {model_dir!r} holds a run with another configuration (its config.gin "
      f"has {was!r} where this run has {now!r}); rerun with the same flags to resume, "
      "or pick a new --model_dir")
