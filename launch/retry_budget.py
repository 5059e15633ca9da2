"""`python3 -m launch.retry_budget --limit=N --model_dir=DIR --ledger=NAME -- COMMAND...`:
bounds the restarts of one Kubernetes worker that make no progress, then execs COMMAND.

Why: Kubeflow's TFJob `restartPolicy: ExitCode` re-creates a pod whose trainer exited
>= 128 (143 SIGTERM, 137 SIGKILL or out of memory, 200 a lost peer) without limit: the
operator's runPolicy.backoffLimit (training-operator PastBackoffLimit) skips ExitCode
replicas in older releases, and in newer ones sums the container restart counts of
running pods, which pods re-created with restartPolicy Never do not have: an
out-of-memory loop never ends.

How: each start of this worker (TF_CONFIG's task type and index) is counted in
DIR/.launch/NAME/<type>-<index>.json (NAME: the submission, so a new submission starts
afresh). A start that finds a newer checkpoint in DIR/checkpoints than the previous
start did resets the count: preemptions that saved progress cost nothing. Past N
restarts in a row without progress it prints one line and exits EXIT_RETRIES_SPENT (4),
a status below 128, which ExitCode (and the Indexed Job's podFailurePolicy) treats as a
failure of the whole job. These ledgers are the launcher's bookkeeping, not the run's
outputs (a worker writes only its own).
"""

import json
import os
import re
import sys

EXIT_BAD_INPUT = 2
EXIT_RETRIES_SPENT = 4
_CHECKPOINT = re.compile(r"ckpt-(\d+)\.index")  # recipes/checkpoints.py NUMBERED


class BudgetError(ValueError):
  """Bad arguments or environment: the message is the line printed."""


def newest_checkpoint(model_dir):
  """The highest step among model_dir/checkpoints/ckpt-<step>.index, -1 for none."""
  try:
    names = os.listdir(os.path.join(model_dir, "checkpoints"))
  except OSError:
    return -1
  steps = [int(m.group(1)) for m in map(_CHECKPOINT.fullmatch, names) if m]
  return max(steps, default=-1)


def task(environ):
  """`<type>-<index>` of this worker from TF_CONFIG ("chief-0" without one)."""
  try:
    config = json.loads(environ.get("TF_CONFIG") or "{}")
    kind, index = config.get("task", {}).get("type", "chief"), config.get("task", {}).get(
        "index", 0)
  except (ValueError, AttributeError) as e:
    raise BudgetError(f"TF_CONFIG is not JSON with a task: {e}") from None
  if not re.fullmatch(r"[a-z]+", str(kind)) or not isinstance(index, int) or index < 0:
    raise BudgetError(f"TF_CONFIG's task {kind!r} {index!r} is not a type and index")
  return f"{kind}-{index}"


def count_start(path, checkpoint):
  """Records one start in the ledger at `path`; the restarts in a row without a newer
  checkpoint, this one included (0 on the first start or after progress)."""
  try:
    with open(path) as f:
      ledger = json.load(f)
  except (OSError, ValueError):
    ledger = None
  if ledger is None:
    restarts = 0
  elif checkpoint > ledger.get("checkpoint", -1):
    restarts = 0
  else:
    restarts = int(ledger.get("restarts", 0)) + 1
  os.makedirs(os.path.dirname(path), exist_ok=True)
  temporary = f"{path}.tmp"
  with open(temporary, "w") as f:
    json.dump({"restarts": restarts, "checkpoint": checkpoint}, f)
  os.replace(temporary, path)
  return restarts


def parse(argv):
  """(limit, model_dir, ledger name, command) from argv."""
  if "--" not in argv:
    raise BudgetError("no command; usage: python3 -m launch.retry_budget --limit=N "
                      "--model_dir=DIR --ledger=NAME -- python3 -m recipes.train ...")
  at = argv.index("--")
  own = dict(a[2:].split("=", 1) for a in argv[1:at] if a.startswith("--") and "=" in a)
  command = argv[at + 1:]
  if set(own) != {"limit", "model_dir", "ledger"} or not command:
    raise BudgetError("give --limit, --model_dir, --ledger and a command after --")
  if not re.fullmatch(r"[0-9]+", own["limit"]):
    raise BudgetError(f"--limit={own['limit']!r} must be a whole number >= 0")
  if not re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", own["ledger"]):
    raise BudgetError(f"--ledger={own['ledger']!r} must be a job name")
  return int(own["limit"]), own["model_dir"], own["ledger"], command


def main(argv, environ=os.environ):
  try:
    limit, model_dir, ledger, command = parse(argv)
    path = os.path.join(model_dir, ".launch", ledger, task(environ) + ".json")
  except BudgetError as e:
    print(f"error: {e}", file=sys.stderr)
    return EXIT_BAD_INPUT
  restarts = count_start(path, newest_checkpoint(model_dir))
  if restarts > limit:
    print(f"error: this worker restarted {restarts} times in a row without a new "
          f"checkpoint (--backoff_limit={limit}); the job fails. Look at the previous "
          "pods' logs; relaunch to try again", file=sys.stderr)
    return EXIT_RETRIES_SPENT
  sys.stdout.flush()
  sys.stderr.flush()
  try:
    os.execvp(command[0], command)
  except OSError as e:
    print(f"error: cannot run {command[0]!r} ({e.strerror})", file=sys.stderr)
    return EXIT_BAD_INPUT


if __name__ == "__main__":
  sys.exit(main(sys.argv))
