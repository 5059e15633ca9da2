"""The entry point of every recipe: `bazel run //recipes:<recipe> -- [flags]`.

    --gin_file       Gin files, in order; later ones override earlier (repeatable).
    --gin_bindings   single bindings applied after the files (repeatable).
    --model_dir      where the run is written; rerunning on it resumes.
    --strategy       auto | one_device | mirrored | multi_worker_mirrored | tpu
    --tpu            the TPU for --strategy=tpu.
    --cpu_replicas   with --strategy=mirrored on a machine without GPUs: split the CPU
                     into this many replicas (the multi-replica code path on a laptop).
    --cluster        with --strategy=multi_worker_mirrored: where the workers are
                     described: tf_config (TF_CONFIG) or slurm (the srun job step).

Bad input (a flag or Gin mistake, a wrong type, a zero or negative size or rate, a
missing data set, a mismatched model, an unwritable or busy model_dir) ends the run
before training with one line on stderr and exit status 2; nothing is written to
model_dir. A run that diverges past its retries exits 3; SIGTERM while training saves a
checkpoint and exits 143 (Ctrl-C: 130), at any other time exits 143 at once; rerunning
the same command resumes.
"""

import os
import re
import sys
import tokenize

from recipes import preemption
from recipes import startup

# First of all, as the program: SIGTERM during start-up (importing TensorFlow, building,
# restoring) ends the run at once with 143, also as a container's PID 1 (preemption.py).
if __name__ == "__main__":
  preemption.exit_on_sigterm()

# Before TensorFlow is imported: its C++ start-up noise hidden on a machine without
# GPUs, its warnings and errors kept where a GPU is expected (startup's docstring).
startup.quiet_tensorflow()

import gin  # pylint: disable=g-import-not-at-top,wrong-import-position
from absl import app  # pylint: disable=g-import-not-at-top,wrong-import-position
from absl import flags  # pylint: disable=g-import-not-at-top,wrong-import-position
from absl import logging  # pylint: disable=g-import-not-at-top,wrong-import-position
import tensorflow as tf  # pylint: disable=g-import-not-at-top,wrong-import-position

from recipes import baselines
from recipes import configurables  # pylint: disable=unused-import
from recipes import errors
from recipes import evaluation
from recipes import experiment
from recipes import renamed
from recipes import run_report
from recipes import strategies
from recipes import trainer
from recipes.errors import ConfigError
from recipes.errors import Diverged
from recipes.errors import EXIT_DIVERGED
from recipes.errors import EXIT_INTERRUPTED
from recipes.errors import EXIT_PEER_LOST
from recipes.errors import EXIT_PREEMPTED
from recipes.errors import Preempted
from recipes.methods import decoupled  # pylint: disable=unused-import  (registers decoupled)
from recipes.methods import lr_range  # pylint: disable=unused-import  (registers lr_range_test)

FLAGS = flags.FLAGS
flags.DEFINE_multi_string("gin_file", [], "Gin config files, later ones override earlier.")
flags.DEFINE_multi_string("gin_bindings", [], "Gin bindings, e.g. 'LongTail.rho = 50'.")
flags.DEFINE_string("model_dir", None,
                    "Output directory; default runs/<first gin file's name>.")
flags.DEFINE_enum("strategy", "auto", strategies.NAMES, "tf.distribute strategy.")
flags.DEFINE_string("tpu", "", "TPU name or address for --strategy=tpu.")
flags.DEFINE_enum("cluster", "tf_config", strategies.CLUSTERS,
                  "--strategy=multi_worker_mirrored: TF_CONFIG, or the Slurm job step.")
flags.DEFINE_integer("cpu_replicas", 1, "--strategy=mirrored without GPUs: logical CPU "
                     "devices to mirror over.", lower_bound=1)

# Where relative paths given by a user are looked for: `bazel run` starts in the
# runfiles tree, but a user means their own working directory.
_USER_DIR = os.environ.get("BUILD_WORKING_DIRECTORY", os.getcwd())
_RUNFILES_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def resolve_gin_file(path):
  """A relative path that names a workspace file is the workspace's (a same-named file
  under the directory the command starts in is never read in its place: a Gin file is a
  program); any other is looked for where the user is."""
  for base in (_RUNFILES_ROOT, _USER_DIR, os.getcwd()):
    candidate = os.path.join(base, path)
    if os.path.isfile(candidate):
      return candidate
  raise ConfigError(f"gin file {path!r} not found; give a path relative to your "
                    "working directory or the workspace (e.g. recipes/nfnet_long_tail.gin)")


def parse_config(gin_files, gin_bindings):
  """Parses files then bindings; unknown names are errors, not skipped."""
  # Includes as the files themselves: the workspace's first. Gin tries its prefixes in
  # order, the working directory ('') first, and only appends (add_config_file_search_path).
  prefixes = gin.config._LOCATION_PREFIXES  # pylint: disable=protected-access
  if _RUNFILES_ROOT not in prefixes[:1]:
    prefixes.insert(0, _RUNFILES_ROOT)
  if _USER_DIR not in prefixes:
    gin.add_config_file_search_path(_USER_DIR)  # a user's own pieces, under bazel run too
  files = [resolve_gin_file(f) for f in gin_files]
  try:
    gin.parse_config_files_and_bindings(files, gin_bindings, skip_unknown=False)
  except (SyntaxError, tokenize.TokenError) as e:
    raise syntax_error(files, gin_bindings, e) from None
  except (ValueError, KeyError, IOError) as e:
    raise renamed.parameter_error(str(e)) or gin_error(e) from None
  renamed.check()  # an old macro name (TAU, WEIGHT_DECAY, ...) is an error
  if files and not renamed.bound("Task.name"):
    with gin.unlock_config():
      gin.bind_parameter("Task.name", recipe_name(files))


def recipe_name(files):
  """What a run is named when no Gin file names it (Task.name): the first recipe file
  (recipes/<name>.gin, recipes/reproduce/<name>.gin) among `files` and, depth first,
  what they include, so a file of one's own that includes a recipe keeps the recipe's
  name (the reproduction report groups runs by it); else the first file's name."""
  seen = set()

  def first_recipe(path):
    parts = os.path.normpath(path).split(os.sep)
    if parts[-2:-1] == ["recipes"] or parts[-3:-1] == ["recipes", "reproduce"]:
      return os.path.splitext(parts[-1])[0]
    if path in seen or not os.path.isfile(path):
      return None
    seen.add(path)
    with open(path) as f:
      included = re.findall(r"^include\s+'([^']+)'", f.read(), re.M)
    for name in included:
      found = first_recipe(next((os.path.join(base, name) for base in (
          _RUNFILES_ROOT, _USER_DIR, os.getcwd()) if os.path.isfile(os.path.join(base, name))),
                                name))
      if found:
        return found
    return None

  for path in files:
    found = first_recipe(path)
    if found:
      return found
  return os.path.splitext(os.path.basename(files[0]))[0]


def syntax_error(files, bindings, error):
  """A one-line ConfigError naming the Gin file or binding whose syntax is broken."""
  def broken(text):
    try:
      list(gin.config_parser.ConfigParser(text, gin.config.ParserDelegate(skip_unknown=True)))
    except (SyntaxError, tokenize.TokenError) as e:
      return " ".join(str(e.args[0] if isinstance(e, tokenize.TokenError) else e).split())
    return None

  for binding in bindings:
    problem = broken(binding)
    if problem:
      return ConfigError(f"bad Gin config: --gin_bindings={binding!r} is not valid Gin "
                         f"({problem}); write NAME = value, strings in quotes, e.g. "
                         "--gin_bindings=\"EPOCHS = 3\"")
  for path in files:
    with open(path) as f:
      problem = broken(f.read())
    if problem:
      return ConfigError(f"bad Gin config: {path} is not valid Gin ({problem}); fix that "
                         "file's syntax")
  message = " ".join(str(error).split())
  return ConfigError(f"bad Gin config: {message}; check the Gin syntax of the files and "
                     "bindings")


def gin_error(e):
  """A one-line ConfigError for Gin's exception `e`, with the fix."""
  lines = [line for line in str(e).splitlines()
           if not line.strip().startswith("In call to configurable")]
  message = " ".join(" ".join(lines).split())
  if "REQUIRED" in message or "Required bindings" in message:
    fix = "set it with --gin_bindings, e.g. " + required_example(message)
  else:
    fix = "check the name against the recipe's Gin files and the configurable's docstring"
  return ConfigError(f"bad Gin config: {message}; {fix}")


def required_example(message):
  """A --gin_bindings example for Gin's "required binding" message."""
  macro = re.search(r"%?\b([A-Z][A-Z0-9_]+)\b", message)
  if macro and macro.group(1) == "DATA_DIR":
    return "--gin_bindings=\"DATA_DIR = '/data/tfds'\""
  parameter = re.search(r"Required bindings for `([\w.]+)` not provided in config: \['(\w+)'",
                        message)
  if parameter:
    return f"--gin_bindings=\"{parameter.group(1)}.{parameter.group(2)} = ...\""
  if macro:
    return f"--gin_bindings=\"{macro.group(1)} = ...\""
  return "--gin_bindings=\"NAME = value\""


@gin.configurable(denylist=["model_dir", "strategy"])
def run(model_dir, strategy, procedure=trainer.train_and_evaluate):
  """What a recipe runs: `procedure(model_dir, strategy)`: training and evaluation, the
  LR range test (@lr_range_test) or decoupled training's two stages (@decoupled)."""
  return procedure(model_dir, strategy)


def default_model_dir(gin_files):
  name = os.path.splitext(os.path.basename(gin_files[0]))[0] if gin_files else "run"
  return os.path.join("runs", name)




def main(argv):
  if len(argv) > 1:
    errors.fail(f"unexpected arguments {' '.join(argv[1:])!r}; every flag starts with --, and "
         "settings are passed as --gin_bindings='NAME = value'")
  if not FLAGS["verbosity"].present:  # TF logs every checkpoint write at INFO
    logging.set_verbosity(logging.WARNING)
  if not FLAGS.gin_file:
    errors.fail("no --gin_file given; run a recipe (./bazelw run //recipes:nfnet_long_tail) or "
         "pass its Gin file, e.g. --gin_file=recipes/nfnet_long_tail.gin")
  try:
    parse_config(FLAGS.gin_file, FLAGS.gin_bindings)
    if FLAGS.model_dir and "://" in FLAGS.model_dir:
      raise ConfigError(
          f"--model_dir={FLAGS.model_dir} is a URL; the trainer writes to a path: mount "
          "the bucket (Vertex AI mounts gs://BUCKET at /gcs/BUCKET; GKE has the Cloud "
          "Storage FUSE CSI driver; elsewhere gcsfuse) and give the mounted path")
    model_dir = os.path.join(_USER_DIR, FLAGS.model_dir or default_model_dir(FLAGS.gin_file))
    try:
      # Device settings go first: nothing may touch the devices before them.
      strategies.configure_devices(gpu_memory_growth=experiment.Runtime().gpu_memory_growth)
      strategy = strategies.make_strategy(FLAGS.strategy, FLAGS.tpu, FLAGS.cpu_replicas,
                                          FLAGS.cluster)
      print(strategies.describe_devices(strategy, startup.gpu_expected()), flush=True)
      metrics = run(model_dir, strategy)
    except (ValueError, RuntimeError) as e:
      if isinstance(e, ConfigError) or "Required bindings" not in str(e):
        raise
      raise gin_error(e) from None
  except ConfigError as e:
    # Gin appends "In call to configurable ..." lines; the first line says it all.
    errors.fail(str(e).splitlines()[0])
  except Diverged as e:
    print(flush=True)  # end the progress bar's line
    print(f"error: {str(e).splitlines()[0]}", file=sys.stderr)
    sys.exit(EXIT_DIVERGED)
  except Preempted as e:
    print(flush=True)
    print(f"stopped: {str(e).splitlines()[0]}", file=sys.stderr)
    sys.exit(EXIT_INTERRUPTED if e.by_hand else EXIT_PREEMPTED)
  # A peer worker is gone: retryable, not a crash. Unavailable: its connections refused,
  # or its heartbeats stopped (seen by the coordination service's leader, the chief);
  # DeadlineExceeded: this worker's heartbeats to a leader that went silent timed out
  # (the chief's machine died: tests/launch/peer_exit_test.py, slurm_multinode_real_test).
  except (tf.errors.UnavailableError, tf.errors.DeadlineExceededError) as e:
    print(flush=True)
    print(f"stopped: a peer worker stopped ({str(e).splitlines()[0][:200]}); rerun to "
          "resume from the last checkpoint", file=sys.stderr)
    sys.exit(EXIT_PEER_LOST)
  headline = evaluation.METRICS + ("base_lr", "max_lr")
  summary = ", ".join(f"{k} {metrics[k]:.4g}" for k in headline
                      if metrics.get(k) is not None)
  if not strategies.is_chief(strategy):
    print(f"\n{summary}\nThis worker is done; the chief writes the report in {model_dir}")
    return
  written = sorted(n for n in os.listdir(model_dir) if not n.startswith("."))
  result = run_report.result_lines(metrics, baselines.readme_baselines(metrics))
  print("\n".join(["", summary, *result, f"Report in {model_dir}: {', '.join(written)}"]))


def cli(argv=None):
  """The command line: `python -m recipes.train [flags]` (argv: sys.argv)."""
  preemption.exit_on_sigterm()
  app.run(main, argv=argv, flags_parser=errors.parse_flags)


if __name__ == "__main__":
  cli()
