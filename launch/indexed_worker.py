"""`python3 -m launch.indexed_worker -- COMMAND...`: one worker of a Kubernetes Indexed
Job (launch/kubernetes.py, kind "indexed_job"): sets TF_CONFIG, then execs COMMAND.

TF_CONFIG comes from the environment the manifest gives the pod:
  JOB_COMPLETION_INDEX  this pod's index (set by Kubernetes for Indexed Jobs)
  ZOO_JOB_NAME          the Job's name: pod i's hostname is <name>-<i>
  ZOO_JOB_SERVICE       the headless Service the pods are the subdomain of
  ZOO_JOB_WORKERS       the Job's completions (workers)
  ZOO_JOB_PORT          the port every worker listens on (default 2222)
as {"cluster": {"worker": ["<name>-0.<service>:<port>", ...]},
    "task": {"type": "worker", "index": <index>}}; worker 0 is the chief.
A missing or bad variable: one line on stderr, exit status 2.
"""

import json
import os
import re
import sys

EXIT_BAD_INPUT = 2
DEFAULT_PORT = 2222
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")


class WorkerError(ValueError):
  """A missing or malformed variable: the message is the line printed."""


def _text(env, name):
  value = env.get(name, "")
  if not _DNS_LABEL.fullmatch(value):
    raise WorkerError(f"{name}={value!r} is not a DNS label; the Indexed Job manifest "
                      "sets it (launch/kubernetes.py)")
  return value


def _number(env, name, default=None, low=0, high=None):
  value = env.get(name)
  if value is None and default is not None:
    return default
  if value is None or not re.fullmatch(r"[0-9]+", value) or int(value) < low or \
      (high is not None and int(value) > high):
    bounds = f">= {low}" if high is None else f"in [{low}, {high}]"
    raise WorkerError(f"{name}={value!r} must be a whole number {bounds}; run this in a "
                      "pod of the Indexed Job launch/kubernetes.py writes")
  return int(value)


def tf_config(env):
  """TF_CONFIG (a dict) for the pod whose environment is `env`."""
  name = _text(env, "ZOO_JOB_NAME")
  service = _text(env, "ZOO_JOB_SERVICE")
  workers = _number(env, "ZOO_JOB_WORKERS", low=1)
  port = _number(env, "ZOO_JOB_PORT", default=DEFAULT_PORT, low=1, high=65535)
  index = _number(env, "JOB_COMPLETION_INDEX", high=workers - 1)
  hosts = [f"{name}-{i}.{service}:{port}" for i in range(workers)]
  return {"cluster": {"worker": hosts}, "task": {"type": "worker", "index": index}}


def command(argv):
  """COMMAND, the arguments after `--`."""
  if len(argv) < 3 or argv[1] != "--":
    raise WorkerError("no command; usage: python3 -m launch.indexed_worker -- "
                      "python3 -m recipes.train ...")
  return argv[2:]


def main(argv):
  try:
    args = command(argv)
    config = tf_config(os.environ)
  except WorkerError as e:
    print(f"error: {e}", file=sys.stderr)
    return EXIT_BAD_INPUT
  os.environ["TF_CONFIG"] = json.dumps(config)
  sys.stdout.flush()
  sys.stderr.flush()
  try:
    os.execvp(args[0], args)
  except OSError as e:
    print(f"error: cannot run {args[0]!r} ({e.strerror}); check the command after --",
          file=sys.stderr)
    return EXIT_BAD_INPUT


if __name__ == "__main__":
  sys.exit(main(sys.argv))
