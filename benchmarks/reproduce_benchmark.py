"""Published rows re-run, each seed a keyed, resumable run that records where it ran:

    ./bazelw run //benchmarks:reproduce -- \
        --rows=cao2019_cifar10_lt_r100_ce,cao2019_cifar10_lt_r100_ldam_drw --seeds=0,1,2

Each (row, seed) is the row's recipe (recipes/reproduce/<row>.gin) with `SEED = <seed>`,
run as a user runs it (`python -m recipes.train`, one process, one run at a time), in
its own directory under --out_dir (<row>/seed<k>), keyed on its whole configuration
and code (benchmarks/runs.py): rerun the same command to resume an interrupted run
where it stopped (the trainer's exact resume) or to skip a finished one. A directory
keyed on other code stops with one line naming the revision its runs ran at, to
resume it from a worktree of that revision (`git worktree add DIR REVISION`).

A run is one or more segments (one process each: a run killed at a session's end and
resumed later has two). Each segment is recorded in the run's `segments.json` as it
starts and when it ends: its start and end, the CPU and host it ran on, the revision
and code digest, the epochs it reached, how it ended, and the 1-minute load average
sampled every 30 s while it ran. The trainer's output goes to the run's `train.log`
(epoch, images/s and time left after every epoch); the epoch lines are echoed here.

A finished run writes one JSON to --record_dir (default docs/data/reproduce/ of this
workspace), named `<row>_seed<k>_<revision>.json` and never overwritten: the command,
revision, dates, machines (`mixed_cpus` true when its segments ran on different CPUs),
the load, its segments and its whole metrics.json (final weights' top-1, balanced and
per-class accuracy; for rows whose paper selects on the test split, the best test
epoch as `best_on_test_protocol`). `//recipes/reproduce:report` reads those files.
"""

import datetime
import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time

from absl import app
from absl import flags

from benchmarks import runs as runs_lib

PUBLISHED = os.path.join(runs_lib.ROOT, "recipes", "reproduce", "published.json")
DEFAULT_ROWS = ("cao2019_cifar10_lt_r100_ce", "cao2019_cifar10_lt_r100_ldam_drw")
SEGMENTS = "segments.json"
LOG = "train.log"
_EPOCH_LINE = re.compile(r"^Epoch (\d+)/(\d+) done")

runs_lib.define_flags("runs/reproduce", "row")
flags.DEFINE_list(
    "rows", list(DEFAULT_ROWS), "Published rows to run (recipes in "
    "recipes/reproduce/published.json).")
flags.DEFINE_list(
    "seeds", ["0", "1", "2"], "Seeds (SEED) of every row; runs go seed by "
    "seed, every row of a seed before the next seed.")
flags.DEFINE_string(
    "record_dir", None, "Where finished runs' JSON goes (default: "
    "docs/data/reproduce/ of the workspace).")


def published_rows():
  with open(PUBLISHED) as f:
    return {row["recipe"]: row for row in json.load(f)["rows"]}


def plan(rows, seeds, root, extra_bindings=()):
  """{(row, seed): runs.Run}, seed by seed."""
  return {
      (row, seed):
          runs_lib.Run(gin_files=(f"recipes/reproduce/{row}.gin",),
                       bindings=tuple(extra_bindings) + (f"SEED = {seed}",),
                       model_dir=os.path.join(root, row, f"seed{seed}")) for seed in seeds
      for row in rows
  }


def _alive(pid):
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return False
  except PermissionError:
    return True
  return True


def read_segments(model_dir):
  try:
    with open(os.path.join(model_dir, SEGMENTS)) as f:
      return json.load(f)
  except FileNotFoundError:
    return []


def write_segments(model_dir, segments):
  """segments.json, replaced atomically and durably."""
  path = os.path.join(model_dir, SEGMENTS)
  tmp = f"{path}.tmp{os.getpid()}"
  with open(tmp, "w") as f:
    json.dump(segments, f, indent=1)
    f.flush()
    os.fsync(f.fileno())
  os.replace(tmp, path)


def stale_revisions(model_dir):
  """The revisions a directory's segments ran at (for a stale run's message)."""
  return sorted({s["revision"] for s in read_segments(model_dir) if s.get("revision")})


def run_segment(run, digest, python=sys.executable, echo=print):
  """Trains `run` in one process until it finishes or stops; returns its exit status.
  The segment is in segments.json from its start; its log lines in train.log."""
  segments = read_segments(run.model_dir)
  for seg in segments:  # a segment whose process is gone without its end: killed
    if seg.get("status") == "running" and not _alive(seg.get("pid", -1)):
      seg["status"] = "killed (no end recorded)"
  seg = {
      "began": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
      "ended": None,
      "cpu": runs_lib.machine(),
      "host": socket.gethostname(),
      "revision": runs_lib.revision(),
      "code": digest,
      "pid": os.getpid(),
      "status": "running",
      "first_epoch": None,
      "last_epoch": None
  }
  segments.append(seg)
  write_segments(run.model_dir, segments)
  env = dict(os.environ, PYTHONPATH=runs_lib.ROOT, PYTHONUNBUFFERED="1")
  env.pop("BUILD_WORKING_DIRECTORY", None)
  command = run.command(python)
  with open(os.path.join(run.model_dir, LOG), "a") as log, runs_lib.LoadSampler() as load:
    log.write(f"\n== segment {len(segments)} at {seg['began']} on {seg['cpu']}: "
              f"{shlex.join(command)}\n")
    log.flush()
    child = subprocess.Popen(command,
                             cwd=runs_lib.ROOT,
                             env=env,
                             stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT,
                             text=True,
                             bufsize=1)
    forward = lambda signum, frame: child.send_signal(signum)
    previous = {s: signal.signal(s, forward) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
      for line in child.stdout:
        log.write(line)
        log.flush()
        epoch = _EPOCH_LINE.match(line)
        if epoch:
          seg["first_epoch"] = seg["first_epoch"] or int(epoch.group(1))
          seg["last_epoch"] = int(epoch.group(1))
          echo(f"{run.model_dir}: {line.strip()}")
      status = child.wait()
    finally:
      for s, handler in previous.items():
        signal.signal(s, handler)
  seg.update(ended=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
             load_average=load.summary(),
             status="finished" if status == 0 else f"exit status {status}")
  write_segments(run.model_dir, segments)
  return status


def record(run, row, seed, metrics, command):
  """The finished run's JSON (see the module)."""
  segments = read_segments(run.model_dir)
  cpus = sorted({s["cpu"] for s in segments if s.get("cpu")})
  last = segments[-1] if segments else {}
  return {
      "benchmark": "reproduce",
      "row": row,
      "seed": int(seed),
      "command": command,
      "revision": last.get("revision", runs_lib.revision()),
      "revisions": sorted({s["revision"] for s in segments if s.get("revision")}),
      "code": last.get("code"),
      "date": datetime.date.today().isoformat(),
      "began": segments[0].get("began") if segments else None,
      "ended": last.get("ended"),
      "machine": cpus[0] if len(cpus) == 1 else cpus,
      "mixed_cpus": len(cpus) > 1,
      "load_average": [s.get("load_average") for s in segments],
      "bindings": list(run.bindings),
      "segments": segments,
      "metrics": metrics
  }


def write_record(record_dir, rec):
  """`rec` to record_dir/<row>_seed<k>_<revision>.json unless that file exists (a new
  file per run, never overwritten); the path."""
  os.makedirs(record_dir, exist_ok=True)
  revision = (rec["revision"] or "unknown").replace("+changes", "-changes")[:20]
  path = os.path.join(record_dir, f"{rec['row']}_seed{rec['seed']}_{revision}.json")
  if os.path.exists(path):
    return path
  tmp = f"{path}.tmp{os.getpid()}"
  with open(tmp, "w") as f:
    json.dump(rec, f, indent=1)
  os.replace(tmp, path)
  return path


def command_line(argv=None):
  argv = sys.argv if argv is None else argv
  return "./bazelw run //benchmarks:reproduce -- " + " ".join(
      shlex.quote(a) for a in argv[1:])


def main(argv):
  del argv
  FLAGS = flags.FLAGS  # pylint: disable=invalid-name
  known = published_rows()
  unknown = [r for r in FLAGS.rows if r not in known]
  if not FLAGS.rows or unknown:
    runs_lib.fail(
        f"--rows: {', '.join(unknown) or 'none given'} not in {PUBLISHED}; give "
        f"recipes such as {','.join(DEFAULT_ROWS)}")
  if not FLAGS.seeds or any(not re.fullmatch(r"\d+", s) for s in FLAGS.seeds):
    runs_lib.fail(f"--seeds={','.join(FLAGS.seeds)}: give non-negative integers, e.g. "
                  "--seeds=0,1,2")
  root = os.path.abspath(
      FLAGS.out_dir or
      os.path.join(os.environ.get("BUILD_WORKING_DIRECTORY", "."), "runs", "reproduce"))
  record_dir = os.path.abspath(
      FLAGS.record_dir or
      os.path.join(os.environ.get("BUILD_WORKSPACE_DIRECTORY", runs_lib.ROOT), "docs",
                   "data", "reproduce"))
  digest = runs_lib.code_digest()
  command = command_line()
  for (row, seed), run in plan(FLAGS.rows, FLAGS.seeds, root, FLAGS.gin_bindings).items():
    try:
      runs_lib.check(run, digest, FLAGS.rerun_stale)
    except runs_lib.StaleRun as e:
      ran_at = stale_revisions(run.model_dir)
      where = (f"; its segments ran at {', '.join(ran_at)}: resume it from a worktree of "
               f"that revision (git worktree add DIR {ran_at[-1].split('+')[0]})"
               if ran_at else "")
      runs_lib.fail(f"{e}{where}")
    if not os.path.exists(run.report_path):
      print(
          f"{row}, seed {seed}: training in {run.model_dir} (log: "
          f"{os.path.join(run.model_dir, LOG)})",
          flush=True)
      status = run_segment(run, digest)
      if runs_lib.code_digest() != digest:
        runs_lib.fail(f"the code under {', '.join(runs_lib.CODE_DIRS)} changed while "
                      f"{run.model_dir} trained: run from a fixed worktree")
      if status != 0:
        print(
            f"{row}, seed {seed}: stopped (exit status {status}); rerun the same "
            "command to resume",
            file=sys.stderr)
        sys.exit(status)
    with open(run.report_path) as f:
      metrics = json.load(f)
    path = write_record(record_dir, record(run, row, seed, metrics, command))
    print(
        f"{row}, seed {seed}: top-1 {100 * metrics['top1']:.2f} (published "
        f"{known[row]['top1']:.2f}); {path}",
        flush=True)


if __name__ == "__main__":
  app.run(main)
