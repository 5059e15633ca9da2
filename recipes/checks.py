"""Checks `build` runs before a run writes anything: each failure is one ConfigError line
that names the setting and the fix."""

import collections.abc
import dataclasses
import math
import numbers
import os
import re
import socket
import tempfile
import typing

import numpy as np
import tensorflow as tf

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


# What a callable setting usually holds, for the fix in its error line.
CALLABLE_EXAMPLES = {
    "Task.data": "@digits", "Task.model": "@zoo.build", "Task.pipeline": "@InputPipeline",
    "Task.loss": "@cross_entropy", "Optimization.optimizer": "@tf_keras.optimizers.SGD",
    "Optimization.learning_rate": "@warmup_cosine",
}


def _type_error(name, value, hint):
  """A one-line message if `value` does not fit the annotation `hint`, else None."""
  origin, args = typing.get_origin(hint), typing.get_args(hint)
  if hint is typing.Any:
    return None
  if origin is typing.Union:
    if value is None and type(None) in args:
      return None
    options = [a for a in args if a is not type(None)]
    errors = [_type_error(name, value, a) for a in options]
    if all(errors):
      return errors[0] + (" or None" if type(None) in args else "")
    return None
  if hint is bool:
    return None if isinstance(value, bool) else f"{name}={value!r} must be True or False"
  if hint is int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
      return f"{name}={value!r} must be a whole number"
    return None
  if hint is float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
      return f"{name}={value!r} must be a number"
    return None
  if hint is str:
    return None if isinstance(value, str) else f"{name}={value!r} must be a string"
  if hint is collections.abc.Callable or origin is collections.abc.Callable:
    if callable(value):
      return None
    example = CALLABLE_EXAMPLES.get(name, "@<configurable>")
    return (f"{name}={value!r} must be a configurable reference, e.g. {example} (a Gin "
            "@name, not a string)")
  if origin is collections.abc.Sequence:
    if isinstance(value, str) or not isinstance(value, collections.abc.Sequence):
      return f"{name}={value!r} must be a list or tuple"
    for i, item in enumerate(value):
      error = _type_error(f"{name}[{i}]", item, args[0] if args else typing.Any)
      if error:
        return error
    return None
  if origin is collections.abc.Mapping:
    if not isinstance(value, collections.abc.Mapping):
      return f"{name}={value!r} must be a dict, e.g. {{'logits': 10.0}}"
    return None
  if isinstance(hint, type) and not isinstance(value, hint):
    return f"{name}={value!r} must be a {hint.__name__}, e.g. @{hint.__name__}()"
  return None


def fields(config):
  """Every field of a Task / Optimization / Runtime (a dataclass) against its type
  annotation: wrong types (a string for a number, 'yes' for True) are one line."""
  hints = typing.get_type_hints(type(config))
  for field in dataclasses.fields(config):
    name = f"{type(config).__name__}.{field.name}"
    error = _type_error(name, getattr(config, field.name), hints[field.name])
    if error:
      raise ConfigError(f"{error}; fix its Gin binding")


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


def learning_rates(schedule, total_steps, samples=257):
  """Checks a learning-rate schedule (a number or a schedule of the step) at `samples`
  steps spread over the run: finite everywhere, never negative, positive somewhere."""
  steps = np.unique(np.linspace(0, max(total_steps - 1, 0), samples).round().astype(np.int64))
  values = []
  for step in steps:
    try:
      value = schedule(step) if callable(schedule) else schedule
      values.append(float(value))
    except (TypeError, ValueError, tf.errors.OpError):
      value = schedule
      raise ConfigError(f"the learning rate is {value!r}, not a number; check "
                        "LEARNING_RATE / Optimization.learning_rate") from None
  values = np.asarray(values)
  for step, value in zip(steps, values):
    if not math.isfinite(value):
      raise ConfigError(f"the learning rate is {value:g} at step {step}; it must be a finite "
                        "number > 0: check LEARNING_RATE / Optimization.learning_rate")
    if value < 0:
      raise ConfigError(f"the learning rate is {value:g} at step {step}; it must be > 0 (a "
                        "negative rate climbs the loss): check LEARNING_RATE")
  if not values.max() > 0:
    raise ConfigError(f"the learning rate is {values.max():g} at every step; it must be > 0 "
                      "somewhere: check LEARNING_RATE / Optimization.learning_rate")


def optimizer_settings(opt):
  """Hyper-parameters a tf_keras optimizer accepts without complaint but that make no
  sense: negative weight decay, EMA momentum outside [0, 1]."""
  decay = getattr(opt, "weight_decay", None)
  if decay is not None and not (isinstance(decay, numbers.Real) and decay >= 0):
    raise ConfigError(f"Optimization.optimizer weight_decay={decay!r} must be a number >= 0; "
                      "check DECOUPLED_WEIGHT_DECAY")
  ema = getattr(opt, "ema_momentum", None)
  if getattr(opt, "use_ema", False) and not 0 <= ema < 1:
    raise ConfigError(f"Optimization.optimizer ema_momentum={ema!r} must be in [0, 1)")


def runtime(r):
  """Every Runtime setting."""
  whole("Runtime.seed", r.seed, 0)
  whole("Runtime.epochs", r.epochs, 1)
  whole("Runtime.steps", r.steps, 1, allow_none=True)
  whole("Runtime.steps_per_loop", r.steps_per_loop, 1)
  whole("Runtime.checkpoint_every_epochs", r.checkpoint_every_epochs, 1)
  whole("Runtime.eval_every_epochs", r.eval_every_epochs, 0)
  whole("Runtime.keep_checkpoints", r.keep_checkpoints, 1)
  whole("Runtime.nonfinite_retries", r.nonfinite_retries, 0)
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
  if r.test_selection is not None and not (isinstance(r.test_selection, str)
                                            and r.test_selection.strip()):
    raise ConfigError(f"Runtime.test_selection={r.test_selection!r}; name the code whose "
                      "protocol it follows (e.g. \"Cao et al. 2019's\") or leave it None")
  if r.test_selection and not r.eval_every_epochs:
    raise ConfigError("Runtime.test_selection needs Runtime.eval_every_epochs >= 1 (the "
                      "test split is scored at each evaluation)")
  if r.early_stopping_patience is not None and not r.eval_every_epochs:
    raise ConfigError("Runtime.early_stopping_patience needs Runtime.eval_every_epochs >= 1 "
                      "(validation only at the end cannot stop early)")


def task(t, runtime_):
  del runtime_
  whole("Task.validation_per_class", t.validation_per_class, 0)
  whole("Task.examples_per_class", t.examples_per_class, 1, allow_none=True)
  whole("Task.examples_per_class_seed", t.examples_per_class_seed, 0)
  if t.examples_per_class is not None and t.long_tail is not None:
    raise ConfigError(f"Task.examples_per_class={t.examples_per_class} and Task.long_tail "
                      "both draw the training set; set Task.long_tail = None for a k-shot "
                      "draw (or Task.examples_per_class = None)")
  many, few = t.shot_thresholds
  if not few <= many:
    raise ConfigError(f"Task.shot_thresholds={tuple(t.shot_thresholds)} must be "
                      "(many_shot_above, few_shot_below) with few <= many")


def best_metric_has_validation(metric, num_validation):
  """Choosing the best checkpoint needs validation examples: a hold-out, or the source's
  own validation split (a list data set's val list)."""
  if metric is not None and not num_validation:
    raise ConfigError(f"Runtime.best_metric={metric!r} needs a validation split: set "
                      "Task.validation_per_class (e.g. 5), or use a source with its own "
                      "validation list")


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
  if pipeline.steps_per_epoch(num_examples) < 1:  # echoed examples count
    echoed = (f" (echoed x{pipeline.echo_factor:g}: {pipeline.echo_placement})"
              if pipeline.echo_factor != 1 else "")
    raise ConfigError(
        f"the training split has {num_examples} examples{echoed}, fewer than one global "
        f"batch of {pipeline.batch_size}; lower InputPipeline.batch_size or raise "
        "InputPipeline.echo_factor")


def data_service_answers(address, timeout=10.0):
  """Raises ConfigError when nothing listens at the tf.data service dispatcher `address`
  (a well-formed "grpc://host:port", or None): the service's client would wait forever."""
  if address is None:
    return
  host, port = address.split("://")[-1].rsplit(":", 1)
  try:
    socket.create_connection((host, int(port)), timeout=timeout).close()
  except OSError as e:
    raise ConfigError(
        f"InputPipeline.data_service={address!r}: no dispatcher answers there "
        f"({e.strerror or e}); start one (docs/input.md) or unset it to make batches "
        "here") from None


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


def tpu(runtime_, pipeline, replicas, datasets):
  """What a TPU run needs settled on the host before its first step; returns advice
  lines. `datasets` maps a name to a dataset the TPU will be fed. Raises ConfigError
  for float16 (TPUs compute in bfloat16) and for any dataset whose element shapes are
  not fully static (XLA compiles one program for one shape)."""
  if runtime_.mixed_precision == "mixed_float16":
    raise ConfigError("Runtime.mixed_precision = 'mixed_float16' on a TPU: TPUs compute in "
                      "bfloat16; set Runtime.mixed_precision = 'mixed_bfloat16'")
  for name, dataset in datasets.items():
    for spec in tf.nest.flatten(dataset.element_spec):
      if not spec.shape.is_fully_defined():
        raise ConfigError(f"the {name} data's elements have shape {spec.shape}, not static; "
                          "a TPU needs fixed shapes (batch with drop_remainder, pad "
                          "evaluation to whole batches)")
  advice = []
  per_replica = pipeline.batch_size // replicas
  if per_replica % 8:
    advice.append(f"TPU: {per_replica} examples a replica is not a multiple of 8; XLA pads "
                  "the batch dimension, so a multiple of 8 (128 ideally) wastes nothing")
  if runtime_.steps_per_loop == 1:
    advice.append("TPU: Runtime.steps_per_loop = 1 makes the host talk to the TPU every "
                  "step; set it to 50-200 (or an epoch's steps)")
  return advice
