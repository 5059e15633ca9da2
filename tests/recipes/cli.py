"""Runs the recipe entry point (`recipes.train`) as a user would, in real processes.

`run(args)` forks a child of this process (which has imported TensorFlow once, so a
bad-input case costs milliseconds, not an import) and runs the command line's own
entry, `recipes.train.cli(argv)`, there: its exit status, stdout and stderr are the
ones a user sees. `spawn(args)` starts a fresh `python -m recipes.train` instead, for
tests that signal or kill the run.

The parent must not have run TensorFlow ops before forking (no runtime threads yet);
tests that use `run` create no tensors in the parent.
"""

import dataclasses
import json
import os
import re
import subprocess
import sys
import tempfile

# The runfiles (or source) root, where recipes/ and its Gin files live.
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# The flagship shrunk for tests (two epochs at 16px): a test-only recipe, not in recipes/.
TINY_GIN = "tests/recipes/configs/nfnet_long_tail_tiny.gin"
TINY = f"--gin_file={TINY_GIN}"
# Stochastic depth and dropout draw per replica; without them runs on different
# replica counts do the same arithmetic, summed in a different order.
DETERMINISTIC_MODEL = ("--gin_bindings=zoo.build.stochdepth_rate = 0.0",
                       "--gin_bindings=zoo.build.dropout = 0.0")
# Log records (TF's C++ "2026-01-01 ..." lines and absl's "I1122 ..." / "W1122 ...").
# absl's C++ logging announces itself with one line before its first record.
LOG_RECORD = re.compile(r"(\d{4}-\d\d-\d\d \d\d:\d\d|[IWEF]\d{4} \d\d:\d\d|"
                        r"WARNING: All log messages before absl::InitializeLog\(\))")


@dataclasses.dataclass
class Result:
  returncode: int
  stdout: str
  stderr: str

  @property
  def said(self):
    """The lines of stderr meant for the user (log records left out)."""
    return [line for line in self.stderr.splitlines()
            if line.strip() and not LOG_RECORD.match(line)]


def run(*args, env=None):
  """`recipes.train ARGS` in a forked child; its Result."""
  from recipes import train  # pylint: disable=g-import-not-at-top
  with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the child: the command line, then exit with its status
      code = 1
      try:
        os.dup2(out.fileno(), 1)
        os.dup2(err.fileno(), 2)
        os.environ.update(env or {})
        train.cli(["train", *args])
        code = 0
      except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
      except BaseException:  # pylint: disable=broad-except
        import traceback  # pylint: disable=g-import-not-at-top
        traceback.print_exc()
      finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)  # pylint: disable=protected-access
    _, status = os.waitpid(pid, 0)
    out.seek(0)
    err.seek(0)
    return Result(os.waitstatus_to_exitcode(status), out.read().decode(errors="replace"),
                  err.read().decode(errors="replace"))


def final_weights(model_dir):
  """({name: value} of the model variables in the run's latest checkpoint, its path)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top  (run() forks untouched)
  path = tf.train.latest_checkpoint(os.path.join(model_dir, "checkpoints"))
  reader = tf.train.load_checkpoint(path)
  return {n: reader.get_tensor(n) for n in reader.get_variable_to_shape_map()
          if n.startswith("model/") and n.endswith(".ATTRIBUTES/VARIABLE_VALUE")}, path


def metrics(model_dir):
  """The run's metrics.json."""
  with open(os.path.join(model_dir, "metrics.json")) as f:
    return json.load(f)


def environment(extra=None):
  env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
             TF_CPP_MIN_LOG_LEVEL="2")
  env.pop("BUILD_WORKING_DIRECTORY", None)
  env.update(extra or {})
  return env


def spawn(*args, module="recipes.train", env=None, **kwargs):
  """`python -m recipes.train ARGS` started in a new process (a Popen)."""
  return subprocess.Popen([sys.executable, "-m", module, *args], cwd=ROOT,
                          env=environment(env), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, **kwargs)


def finish(process, timeout=600):
  stdout, stderr = process.communicate(timeout=timeout)
  return Result(process.returncode, stdout, stderr)


def snapshot(path):
  """{relative path: (size, mtime)} of everything under `path` (None when absent)."""
  if not os.path.exists(path):
    return None
  if os.path.isfile(path):
    stat = os.stat(path)
    return {".": (stat.st_size, stat.st_mtime_ns)}
  found = {}
  for directory, _, files in os.walk(path):
    for name in files:
      full = os.path.join(directory, name)
      stat = os.stat(full)
      found[os.path.relpath(full, path)] = (stat.st_size, stat.st_mtime_ns)
  return found
