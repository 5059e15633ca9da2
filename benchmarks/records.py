"""A benchmark sitting's record: a new JSON file a sitting, never one written before.

`write_new(record_dir, name, results)` writes record_dir/<name>.json, or <name>_2.json,
_3, ... when that name is taken, durably (fsync) and atomically: the content lands under
a temporary name and is hard-linked to the record's name, which fails rather than
replaces if another sitting took it meanwhile (then the next number is tried). A
record's stem names its benchmark, the code's revision and the date.
"""

import json
import os
import re
import tempfile


def stem(name, revision, date):
  """'<name>_<the commit's first 12 hex digits>[-changes]_<date>': a tree that differs
  from its commit ('<commit>+changes', benchmarks/runs.py's revision) says so; None or
  anything else: 'norev'."""
  found = re.fullmatch(r"([0-9a-f]{7,40})(\+changes)?", revision or "")
  if not found:
    return f"{name}_norev_{date}"
  return f"{name}_{found.group(1)[:12]}{'-changes' if found.group(2) else ''}_{date}"


def write_new(record_dir, name, results):
  """`results` to a new record_dir/<name>[_n].json; its path."""
  os.makedirs(record_dir, exist_ok=True)
  handle, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=record_dir)
  with os.fdopen(handle, "w") as f:
    json.dump(results, f, indent=1)
    f.flush()
    os.fsync(f.fileno())
  try:
    n = 1
    while True:
      path = os.path.join(record_dir, f"{name}.json" if n == 1 else f"{name}_{n}.json")
      try:
        os.link(tmp, path)
        return path
      except FileExistsError:
        n += 1
  finally:
    os.unlink(tmp)
