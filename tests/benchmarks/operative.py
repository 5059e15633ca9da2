"""What reached a run: the bindings of its operative_config.gin, by their short names."""

import ast
import re


def short_name(name):
  """A binding's name as an operative config writes it: Gin drops a configurable's
  module when the name is unambiguous ('tricks.Sampler.kind' is written
  'Sampler.kind'); a scope ('stage2/') stays."""
  scope, _, rest = name.rpartition("/")
  short = ".".join(rest.split(".")[-2:])
  return f"{scope}/{short}" if scope else short


def operative_values(path):
  """{'NAME' or 'configurable.parameter' (short_name): value text} of an
  operative_config.gin."""
  with open(path) as f:
    return {short_name(k): v for k, v in
            re.findall(r"^([\w./]+) = (.+)$", f.read(), flags=re.M)}


def same_value(a, b):
  try:
    return ast.literal_eval(a) == ast.literal_eval(b)
  except (ValueError, SyntaxError):
    return a.replace(" ", "") == b.replace(" ", "")
