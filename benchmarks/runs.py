"""Benchmark runs keyed on what was run, so a resumed benchmark never reports a stale run.

A benchmark run is a recipe run as a user runs it (`python -m recipes.train`, one
process), in its own directory. Before it starts, its key is written there
(run_key.json): the text of every Gin file it reads (the recipe, the files it adds and
everything they `include`), its bindings, the run it starts from (a stage 2's stage 1,
by key) and a digest of the code (every .py file under recipes/, zoo/ and tricks/, and
the Python lock). These fix the run's operative configuration. A directory whose key
matches is reused: its report if finished, its checkpoints if interrupted. A directory
holding anything else (another key, or a run from before keys) is stale: `train` stops
with one line (StaleRun) unless told to delete and rerun it.
"""

import dataclasses
import hashlib
import json
import os
import platform
import re
import shlex
import shutil
import subprocess
import sys
import threading
import time

from absl import flags

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CODE_DIRS = ("recipes", "zoo", "tricks")
LOCK = "third_party/py/requirements_lock.txt"
KEY_FILE = "run_key.json"
_INCLUDE = re.compile(r"^\s*include\s+['\"]([^'\"]+)['\"]", re.M)


class StaleRun(Exception):
  """A run directory that holds another configuration's or another code's run."""


def define_flags(default_out_dir, what):
  """The flags of a benchmark that trains recipe runs: --gin_bindings (before each
  `what`'s own), --out_dir (default `default_out_dir` under the working directory) and
  --rerun_stale."""
  flags.DEFINE_multi_string("gin_bindings", [], "Bindings added to every run (before the "
                            f"{what}'s own), e.g. a data directory.")
  flags.DEFINE_string("out_dir", None, "Where the runs, table and plots go (default: "
                      f"{default_out_dir} under the working directory); rerun with the same "
                      "one to skip what is done.")
  flags.DEFINE_boolean("rerun_stale", False, "Delete and rerun every run directory that "
                       "holds another configuration's or another code's run.")


def write_results(root, name, results, text):
  """`results` to root/<name>.json (the raw record the tables are made from) and the
  printed `text` to root/<name>.md."""
  with open(os.path.join(root, f"{name}.json"), "w") as f:
    json.dump(results, f, indent=1)
  with open(os.path.join(root, f"{name}.md"), "w") as f:
    f.write(text + "\n")


def code_digest(root=ROOT):
  """SHA-256 over the path and bytes of every .py file under recipes/, zoo/ and tricks/
  and of the lock file: any change of code or locked packages changes it."""
  paths = [LOCK]
  for top in CODE_DIRS:
    for folder, dirs, files in os.walk(os.path.join(root, top)):
      dirs[:] = sorted(d for d in dirs if not d.startswith((".", "__pycache__")))
      paths += [os.path.relpath(os.path.join(folder, f), root)
                for f in files if f.endswith(".py")]
  digest = hashlib.sha256()
  for path in sorted(paths):
    with open(os.path.join(root, path), "rb") as f:
      digest.update(path.encode() + b"\0" + f.read() + b"\0")
  return digest.hexdigest()


def gin_texts(gin_files, root=ROOT):
  """{path: text} of `gin_files` and every file they include (Gin resolves includes
  against the workspace root)."""
  texts, todo = {}, list(gin_files)
  while todo:
    path = todo.pop(0)
    if path in texts:
      continue
    full = path if os.path.isabs(path) else os.path.join(root, path)
    with open(full) as f:
      texts[path] = f.read()
    todo += _INCLUDE.findall(texts[path])
  return texts


@dataclasses.dataclass(frozen=True)
class Run:
  """One recipe run: Gin files in order, bindings, where it goes, and the run whose
  final checkpoint it starts from (bound to `decoupled.stage1_checkpoint`)."""
  gin_files: tuple
  bindings: tuple
  model_dir: str
  stage1: "Run" = None

  def key(self, digest):
    """What fixes this run's operative configuration (JSON-ready)."""
    return {"gin": gin_texts(self.gin_files), "gin_files": list(self.gin_files),
            "bindings": list(self.bindings), "code": digest,
            "stage1": self.stage1.key(digest) if self.stage1 else None}

  @property
  def report_path(self):
    return os.path.join(self.model_dir, "stage2" if self.stage1 else "", "metrics.json")

  def command(self, python=sys.executable):
    args = [python, "-m", "recipes.train", f"--model_dir={self.model_dir}"]
    args += [f"--gin_file={f}" for f in self.gin_files]
    if self.stage1:
      # A Python string literal, which Gin reads back as the one string (a quote or a
      # newline in the path cannot add statements).
      args.append("--gin_bindings=decoupled.stage1_checkpoint = "
                  f"{final_checkpoint(self.stage1.model_dir)!r}")
    return args + [f"--gin_bindings={b}" for b in self.bindings]


def final_checkpoint(model_dir):
  """The newest checkpoint prefix of a finished run."""
  folder = os.path.join(model_dir, "checkpoints")
  steps = [int(m.group(1)) for m in map(re.compile(r"^ckpt-(\d+)\.index$").match,
                                        os.listdir(folder)) if m]
  return os.path.join(folder, f"ckpt-{max(steps)}")


def changed(old, new):
  """The parts of two keys that differ, in words."""
  names = {"gin": "Gin files' text", "gin_files": "Gin files", "bindings": "bindings",
           "code": "code", "stage1": "stage 1"}
  return [names[k] for k in names if old.get(k) != new.get(k)]


def check(run, digest, rerun_stale=False):
  """Makes `run.model_dir` fit for `run`: leaves a matching one, deletes a stale one
  when `rerun_stale`, else raises StaleRun naming what changed."""
  key = run.key(digest)
  path = os.path.join(run.model_dir, KEY_FILE)
  if os.path.isdir(run.model_dir) and os.listdir(run.model_dir):
    try:
      with open(path) as f:
        old = json.load(f)
    except (OSError, ValueError):
      old = None
    if old == key:
      return key
    what = ", ".join(changed(old, key)) if old else "a run from before run keys"
    if not rerun_stale:
      raise StaleRun(f"{run.model_dir} holds a run of another configuration ({what} "
                     "differ); pass --rerun_stale to delete and rerun it, or choose "
                     "another --out_dir")
    shutil.rmtree(run.model_dir)
  os.makedirs(run.model_dir, exist_ok=True)
  tmp = path + ".tmp"
  with open(tmp, "w") as f:
    json.dump(key, f, indent=1, sort_keys=True)
  os.replace(tmp, path)
  return key


def train(run, digest=None, rerun_stale=False, python=sys.executable):
  """`run`'s metrics.json: read when the directory holds this very run finished, else
  trained (resuming this very run's checkpoints). `digest`: the code's (default:
  computed now); if the code changes while the run trains, its report is not that
  code's: the key is spoiled (a rerun sees a stale run) and RuntimeError says so."""
  digest = digest or code_digest()
  check(run, digest, rerun_stale)
  if os.path.exists(run.report_path):
    with open(run.report_path) as f:
      return json.load(f)
  env = dict(os.environ, PYTHONPATH=ROOT)
  env.pop("BUILD_WORKING_DIRECTORY", None)
  done = subprocess.run(run.command(python), cwd=ROOT, env=env, capture_output=True,
                        text=True, check=False)
  if done.returncode != 0:
    raise RuntimeError(f"run failed ({done.returncode}): {' '.join(run.command(python))}"
                       f"\n{done.stderr[-2000:]}")
  if code_digest() != digest:
    with open(os.path.join(run.model_dir, KEY_FILE), "w") as f:
      json.dump({"code": "changed while the run trained"}, f)
    raise RuntimeError(f"the code under {', '.join(CODE_DIRS)} changed while {run.model_dir} "
                       "trained: its report is not one code's; rerun with --rerun_stale")
  with open(run.report_path) as f:
    return json.load(f)


def train_timed(run, digest=None, rerun_stale=False, python=sys.executable):
  """(metrics, wall seconds) of `run` (runs.train); the wall time of the sitting that
  finished it is kept beside it."""
  timing = os.path.join(run.model_dir, "benchmark_wall_seconds.json")
  digest = digest or code_digest()
  check(run, digest, rerun_stale)  # a stale run deleted first: it is not finished
  began = time.time()
  finished = os.path.exists(run.report_path)
  metrics = train(run, digest, rerun_stale, python)
  if not finished or not os.path.exists(timing):
    with open(timing, "w") as f:
      json.dump(None if finished else round(time.time() - began, 1), f)
  with open(timing) as f:
    return metrics, json.load(f)


class LoadSampler:
  """The 1-minute load average every `every` seconds while entered (what a record says
  of the load during a run)."""

  def __init__(self, every=30):
    self.every, self.samples = every, []
    self._stop = threading.Event()
    self._thread = threading.Thread(target=self._sample, daemon=True)

  def _sample(self):
    while True:
      self.samples.append(round(os.getloadavg()[0], 2))
      if self._stop.wait(self.every):
        return

  def __enter__(self):
    self._thread.start()
    return self

  def __exit__(self, *exc):
    self._stop.set()
    self._thread.join()

  def summary(self):
    s = self.samples
    return {
        "samples": len(s),
        "every_seconds": self.every,
        "mean": round(sum(s) / len(s), 2) if s else None,
        "max": max(s) if s else None,
        "min": min(s) if s else None
    }


def machine():
  """The machine in words: processor model and logical cores."""
  model = platform.processor() or platform.machine()
  try:
    with open("/proc/cpuinfo") as f:
      found = re.search(r"^model name\s*:\s*(.+)$", f.read(), flags=re.M)
    model = found.group(1).strip() if found else model
  except OSError:
    pass
  return f"{model}, {os.cpu_count()} logical cores"


def command(argv=None):
  """The command line as a user types it: under `bazel run`, the target
  (`./bazelw run //benchmarks:nfnet_bf16 -- ...`, read from the runfiles path), else
  the program and its arguments; each argument quoted for a shell."""
  argv = sys.argv if argv is None else argv
  args = " ".join(shlex.quote(a) for a in argv[1:])
  target = re.search(r"/bin/(.+)/([^/]+)\.runfiles/", argv[0])
  if target:
    run = f"./bazelw run //{target.group(1)}:{target.group(2)}"
    return f"{run} -- {args}" if args else run
  return " ".join(shlex.quote(a) for a in argv)


def provenance():
  """What every benchmark's JSON says of where its figures come from: the command, the
  date, the machine and the code's revision."""
  return {"command": command(), "date": time.strftime("%Y-%m-%d"),
          "machine": machine(), "revision": revision()}


def revision():
  """The workspace's git commit (with '+changes' when the tree differs from it), or
  None outside a git checkout (a benchmark keeps it beside its figures)."""
  where = os.environ.get("BUILD_WORKSPACE_DIRECTORY", ROOT)
  try:
    head = subprocess.run(["git", "-C", where, "rev-parse", "HEAD"], capture_output=True,
                          text=True, check=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", where, "status", "--porcelain", "--",
                            *CODE_DIRS], capture_output=True, text=True,
                           check=True).stdout.strip()
  except (OSError, subprocess.CalledProcessError):
    return None
  return head + ("+changes" if dirty else "")


def fail(message):
  """Bad input of a benchmark's command line: one line on stderr, exit status 2."""
  print(f"error: {message}", file=sys.stderr)
  sys.exit(2)
