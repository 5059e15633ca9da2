"""`--backend=local`: the job's workers as processes on this machine.

Each worker is `python -m recipes.train ... --strategy=multi_worker_mirrored` with its
own `TF_CONFIG` (the cluster on free localhost ports, its task index); worker 0 is the
chief, the one that writes model_dir. A real multi-process job: the same code path as
a cluster's, and the one the tests run.

When a worker fails, TensorFlow's coordination service makes the others fail too (a
collective with a missing peer errors out); the launcher gives them `GRACE_SECONDS` to
do so, then stops them, and exits with the first failure's status. Rerunning the same
command resumes from the chief's last checkpoint.

A running launch is a job with an id (the launcher's process id), recorded with its
workers' process ids and their start times in `jobs_dir()` while it runs:
`--status=<id>` says whether it runs, `--cancel=<id>` sends its workers SIGTERM (they
save a checkpoint and exit 143; the same launch rerun resumes); a process id whose
start time is not the recorded one is another process's now, and is left alone. A
record whose launcher is gone (killed) is removed.
"""

import contextlib
import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time

from launch.job import LaunchError

# The workspace root (runfiles root under `bazel run`): where `recipes` is importable.
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GRACE_SECONDS = 60


def free_ports(count):
  """`count` localhost ports free now (bound, then released; a port taken in between
  makes a worker fail to start, and the launcher then exits non-zero)."""
  sockets = []
  try:
    for _ in range(count):
      s = socket.socket()
      s.bind(("localhost", 0))
      sockets.append(s)
    return [s.getsockname()[1] for s in sockets]
  finally:
    for s in sockets:
      s.close()


def tf_configs(ports):
  """One TF_CONFIG a worker: the cluster of `ports` on localhost and its own index."""
  cluster = {"worker": [f"localhost:{p}" for p in ports]}
  return [json.dumps({"cluster": cluster, "task": {"type": "worker", "index": i}})
          for i in range(len(ports))]


def worker_commands(job, python=sys.executable):
  """[(TF_CONFIG, argv)] of the job's workers."""
  argv = job.command(python=python)
  return [(config, argv) for config in tf_configs(free_ports(job.workers))]


def _relay(stream, prefix, out):
  for line in stream:
    out.write(prefix + line)
    out.flush()


def launch(job, dry_run=False, out=None, python=sys.executable):
  """Runs the job's workers here (or prints their commands); returns the exit status:
  0 when every worker finished, else the first failing worker's."""
  out = out or sys.stdout
  commands = worker_commands(job, python)
  if dry_run:
    for config, argv in commands:
      out.write(f"TF_CONFIG={shlex.quote(config)} {shlex.join(argv)}\n")
    return 0
  env = dict(os.environ)
  env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
  processes, relays = [], []
  with recorded(job, processes, out) as record:
    for index, (config, argv) in enumerate(commands):
      process = subprocess.Popen(argv, cwd=ROOT, env=dict(env, TF_CONFIG=config),
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                 text=True)
      prefix = "" if index == 0 else f"[worker {index}] "
      relay = threading.Thread(target=_relay, args=(process.stdout, prefix, out),
                               daemon=True)
      relay.start()
      processes.append(process)
      relays.append(relay)
    record()
    return finish(processes, relays, out)


def finish(processes, relays, out):
  """Waits for the workers (see `wait`), then for their output; the exit status."""
  try:
    status = wait(processes, out)
  except KeyboardInterrupt:  # Ctrl-C reached the workers too: they save and exit
    status = wait(processes, out)
  for relay, process in zip(relays, processes):
    relay.join(timeout=5)
    process.stdout.close()
  return status


def wait(processes, out):
  """Waits for every process; after the first failure, the rest get GRACE_SECONDS to
  exit, then SIGTERM, then SIGKILL. Returns 0 or the first failure's status."""
  failed, failed_at = None, None
  while any(p.poll() is None for p in processes):
    if failed is None:
      failed = next((p for p in processes if p.poll() not in (None, 0)), None)
      failed_at = time.monotonic() if failed is not None else None
      if failed is not None:
        out.write(f"worker {processes.index(failed)} exited with status "
                  f"{failed.returncode}; waiting up to {GRACE_SECONDS} s for the others\n")
    elif time.monotonic() - failed_at > GRACE_SECONDS:
      for p in processes:
        if p.poll() is None:
          p.terminate()
      try:
        for p in processes:
          p.wait(timeout=30)
      except subprocess.TimeoutExpired:
        for p in processes:
          p.kill()
    time.sleep(0.2)
  if failed is None:
    failed = next((p for p in processes if p.returncode != 0), None)
  return 0 if failed is None else failed.returncode



def jobs_dir():
  """Where running local jobs are recorded: $XDG_CACHE_HOME (or ~/.cache)/model_zoo/
  local_jobs."""
  cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"),
                                                           ".cache")
  return os.path.join(cache, "model_zoo", "local_jobs")


def started_at(pid):
  """The process's start time (clock ticks since boot, /proc/<pid>/stat), None when it
  is gone: a process id with its start time names one process, never a reused id."""
  try:
    with open(f"/proc/{pid}/stat") as f:
      return int(f.read().rsplit(")", 1)[1].split()[19])
  except (OSError, IndexError, ValueError):
    return None


@contextlib.contextmanager
def recorded(job, processes, out):
  """The launch recorded under its id while it runs; yields the function that writes
  the record (call it once `processes` have started). A directory that cannot be
  written costs --status/--cancel only, said in one line, never the run."""
  job_id = str(os.getpid())
  path = os.path.join(jobs_dir(), f"{job_id}.json")

  def write():
    record = {"name": job.name, "model_dir": job.model_dir, "launcher": int(job_id),
              "started": started_at(os.getpid()),
              "workers": [{"pid": p.pid, "started": started_at(p.pid)} for p in processes]}
    try:
      os.makedirs(jobs_dir(), exist_ok=True)
      with open(path + ".tmp", "w") as f:
        json.dump(record, f)
      os.replace(path + ".tmp", path)
    except OSError as e:
      out.write(f"warning: job {job_id} is not recorded ({e.strerror}: {e.filename}); "
                "--status and --cancel will not find it (set XDG_CACHE_HOME to a "
                "writable directory)\n")
      return
    out.write(f"job {job_id}: see it with `bazel run //launch -- --backend=local "
              f"--status={job_id}`, stop it (its workers save) with --cancel={job_id}\n")

  try:
    yield write
  finally:
    with contextlib.suppress(OSError):
      os.remove(path)


def read_record(job_id):
  """The running job's record; LaunchError when there is none."""
  if not re.fullmatch(r"\d+", job_id):
    raise LaunchError(f"--status/--cancel={job_id!r} is not a local job id; give the "
                      "number its launch printed (job <id>: ...)")
  path = os.path.join(jobs_dir(), f"{job_id}.json")
  if not os.path.exists(path):
    raise LaunchError(f"--status/--cancel={job_id}: no local job {job_id} runs here "
                      f"({jobs_dir()}); give the id its launch printed (job <id>: ...)")
  with open(path) as f:
    record = json.load(f)
  if started_at(record["launcher"]) != record["started"]:
    os.remove(path)
    raise LaunchError(f"--status/--cancel={job_id}: local job {job_id} is gone (its "
                      "launcher was killed); rerun its launch to resume")
  return record


def running_workers(record):
  """The process ids of the record's workers that still run: each id with the start
  time recorded for it (an id the system gave to another process since is not one)."""
  return [w["pid"] for w in record["workers"]
          if w["started"] is not None and started_at(w["pid"]) == w["started"]]


def status(job_id, out=None):
  out = out or sys.stdout
  record = read_record(job_id)
  alive = running_workers(record)
  out.write(f"job {job_id} ({record['name']}): running, {len(alive)} of "
            f"{len(record['workers'])} workers alive (pids {' '.join(map(str, alive))}); "
            f"model_dir {record['model_dir']}\n")
  return 0


def cancel(job_id, out=None):
  out = out or sys.stdout
  record = read_record(job_id)
  for pid in running_workers(record):
    with contextlib.suppress(ProcessLookupError):
      os.kill(pid, signal.SIGTERM)
  out.write(f"job {job_id} ({record['name']}): SIGTERM sent to its workers; they save a "
            "checkpoint and exit 143 (rerun its launch to resume)\n")
  return 0
