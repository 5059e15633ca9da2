"""A setting's value against its type: whole numbers, numbers, and every field of a
config dataclass (Task, Optimization, Runtime, ...) against its type annotation, each
failure one ConfigError line that names the setting and the fix."""

import collections.abc
import dataclasses
import numbers
import typing

from recipes.errors import ConfigError


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


def check_fields(config):
  """Every field of a Task / Optimization / Runtime (a dataclass) against its type
  annotation: wrong types (a string for a number, 'yes' for True) are one line."""
  hints = typing.get_type_hints(type(config))
  for field in dataclasses.fields(config):
    name = f"{type(config).__name__}.{field.name}"
    error = _type_error(name, getattr(config, field.name), hints[field.name])
    if error:
      raise ConfigError(f"{error}; fix its Gin binding")
