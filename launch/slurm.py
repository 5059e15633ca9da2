"""Slurm: an sbatch script, one task a worker, submitted with `sbatch <file>`.

One task a worker, `tasks_per_node` of them a node (1: one node a worker; the
workers' count: all on one big node or a laptop), each with `cpus_per_task` CPUs, `mem`
memory a node (the cluster's default when "") and its GPUs (--gpus-per-task=<count> or
<type>:<count>); `exclusive` takes whole nodes. One `srun --distribution=block` step
starts `python3 -m recipes.train --strategy=multi_worker_mirrored --cluster=slurm` in
every task: the trainer finds its peers through Slurm's environment
(recipes.strategies.slurm_resolver; its ports come from the job id, so two jobs
sharing a node do not collide).
With an image the step runs in it (pyxis: --container-image, working directory
launch.job.IMAGE_WORKDIR, model_dir mounted at its own path, so it holds no ',' or ':',
--container-mounts' separators); without one, in `workdir`, a checkout of
this workspace on the cluster whose Python environment `setup` lines (e.g.
`source ~/zoo-venv/bin/activate`) make ready.

model_dir is a path on a filesystem every node shares; a gs:// URL is refused (the
trainer writes with local file APIs: mount the bucket with gcsfuse on every node and
give the mounted path). Preemption and time limits: --signal=TERM@<signal_seconds>
has Slurm send SIGTERM to the step's tasks that long before the time limit (up to 60 s
earlier: Slurm checks once a minute); the trainer saves a checkpoint and exits 143.
`--requeue` alone requeues only a preempted job or a failed node, not one that reached
its time limit; so the batch shell, which runs on (the signal is for the step only),
sees the step end with 143 and requeues the job itself (`scontrol requeue`): the job
is pending again under the same id and resumes from model_dir. The same holds for
`scancel --signal=TERM <job>`; a plain `scancel <job>` ends it for good.
--kill-on-bad-exit ends every worker when one fails (2 bad input, 3 diverged), so a
broken run does not hang in its collectives.
A step that cannot start on every node (srun's status 233, Slurm's error 1001
"Communication connection failure" modulo 256: a node's slurmd could not be connected
to, as once after a node's return) is requeued the same way, at most LAUNCH_REQUEUES
times in a row: the count, of the job's launches that failed so since one that started,
is kept in model_dir/.launch/slurm-<job id>-unreached (the launcher's bookkeeping, as
launch.retry_budget's ledgers are); past it, or where it cannot be written, the job ends
with the status. A requeue that scontrol refuses is said in one line.
"""

import dataclasses
import posixpath
import re
import shlex

from launch.job import IMAGE_WORKDIR
from launch.job import check_not_over_code
from launch.job import LaunchError
from launch.job import parse_image
from launch.job import Step

SCRIPT = "job.sbatch"
SIGNAL_SECONDS = 120
EXIT_PREEMPTED = 143  # recipes.errors.EXIT_PREEMPTED: the trainer saved and stopped
# srun's status when a task launch cannot reach a node's slurmd (Slurm 22.05's
# SLURM_COMMUNICATIONS_CONNECTION_ERROR, 1001, modulo 256; seen with a slurmd down).
EXIT_LAUNCH_UNREACHED = 233
LAUNCH_REQUEUES = 3
# sbatch's --time and --mem forms (minutes, [D-]HH:MM[:SS], ...; a size with a unit).
_TIME = re.compile(r"(\d+-)?\d+(:\d\d){0,2}")
_MEM = re.compile(r"\d+[KMGT]?")
# partition and account names: no spaces, no shell syntax.
_NAME = re.compile(r"[A-Za-z0-9][-A-Za-z0-9_.]*")


@dataclasses.dataclass(frozen=True)
class Options:
  """partition, time ("HH:MM:SS" or "D-HH:MM:SS"), account: sbatch's (the cluster's
  defaults when ""). workdir: the workspace on the cluster (without an image).
  setup: shell lines run before srun. container_mounts: pyxis --container-mounts
  beyond model_dir (e.g. the data set: /data:/data). tasks_per_node: workers a node.
  cpus_per_task, mem (e.g. "64G", a node's; "" the cluster's default), exclusive
  (whole nodes): what a job holds. signal_seconds: SIGTERM this long before --time."""
  partition: str = ""
  time: str = ""
  account: str = ""
  workdir: str = ""
  setup: tuple = ()
  container_mounts: str = ""
  tasks_per_node: int = 1
  cpus_per_task: int = 8
  mem: str = ""
  exclusive: bool = False
  signal_seconds: int = SIGNAL_SECONDS


def check(job, options):
  if "://" in job.model_dir:
    raise LaunchError(f"--model_dir={job.model_dir!r} is a URL; Slurm workers write to a "
                      "shared file system: give its path (e.g. --model_dir=/shared/runs/"
                      f"{job.name}), or mount the bucket with gcsfuse on every node and "
                      "give the mounted path")
  if not posixpath.isabs(job.model_dir):
    given = f"--model_dir={job.model_dir!r}" if job.model_dir else "no --model_dir"
    raise LaunchError(f"{given}: give an absolute path on a filesystem every node shares")
  if not job.image and not posixpath.isabs(options.workdir):
    raise LaunchError("the slurm backend runs in --image (pyxis) or in --slurm_workdir, "
                      "the workspace's absolute path on the cluster; give one")
  if job.accelerator and not _NAME.fullmatch(job.accelerator):
    raise LaunchError(f"--accelerator={job.accelerator!r} is not a Slurm GPU type; give "
                      "the type --gpus-per-task takes, e.g. a100")
  if job.accelerator and not job.accelerators_per_worker:
    raise LaunchError(f"--accelerator={job.accelerator!r} needs --accelerators_per_worker "
                      ">= 1 (GPUs a task uses)")
  if options.container_mounts and not job.image:
    raise LaunchError("--slurm_container_mounts needs --image (pyxis mounts into a "
                      "container)")
  if job.image:  # mounted at its own path into the container, as each extra mount is
    check_not_over_code(job.model_dir, "--model_dir")
    for mount in filter(None, options.container_mounts.split(",")):
      parts = mount.split(":")
      check_not_over_code(parts[1] if len(parts) > 1 else parts[0],
                          "--slurm_container_mounts")
  if job.image and ("," in job.model_dir or ":" in job.model_dir):
    raise LaunchError(f"--model_dir={job.model_dir!r} holds ',' or ':', which pyxis's "
                      "--container-mounts reads as separators; give a path without them")
  check_resources(options)


def whole(value, least):
  return not isinstance(value, bool) and isinstance(value, int) and value >= least


def check_resources(options):
  """LaunchError unless every sbatch value is one sbatch reads as meant."""
  for name, least in (("tasks_per_node", 1), ("cpus_per_task", 1), ("signal_seconds", 1)):
    if not whole(getattr(options, name), least):
      raise LaunchError(f"--slurm_{name}={getattr(options, name)!r} must be a whole "
                        f"number >= {least}")
  patterns = (("time", _TIME, "e.g. 24:00:00, 2-00:00:00 or 90 (minutes)"),
              ("mem", _MEM, "e.g. 64G or 16000 (MB)"),
              ("partition", _NAME, "a partition's name"), ("account", _NAME, "an account"))
  for name, pattern, example in patterns:
    value = getattr(options, name)
    if value and not pattern.fullmatch(value):
      raise LaunchError(f"--slurm_{name}={value!r} is not an sbatch --{name}; give "
                        f"{example}")


def enroot_image(image):
  """`image` as pyxis's --container-image takes it: enroot's URI form
  [REGISTRY#]IMAGE[:TAG] (enroot's `import` usage). Before enroot 4.0 a plain
  REGISTRY/IMAGE is read as a Docker Hub path, so us-docker.pkg.dev/p/r/zoo:1 would be
  pulled from Docker Hub; the '#' names the registry in every version. As Docker's
  reference rule, the first component is a registry when it has a '.' or a ':' or is
  'localhost'."""
  reference = parse_image(image)
  first, _, rest = reference.name.partition("/")
  name = reference.name
  if rest and ("." in first or ":" in first or first == "localhost"):
    name = f"{first}#{rest}"
  return name + (f":{reference.tag}" if reference.tag else "") + (
      f"@{reference.digest}" if reference.digest else "")


def srun(job, options):
  """The srun command line."""
  argv = ["srun", "--kill-on-bad-exit=1", "--distribution=block"]
  if job.image:
    mounts = [f"{job.model_dir}:{job.model_dir}"]
    mounts += [m for m in options.container_mounts.split(",") if m]
    argv += [f"--container-image={enroot_image(job.image)}", f"--container-workdir={IMAGE_WORKDIR}",
             f"--container-mounts={','.join(mounts)}"]
  return argv + job.command(extra=["--cluster=slurm"])


def script(job, options):
  """The sbatch script's text."""
  check(job, options)
  per_node = min(options.tasks_per_node, job.workers)
  directives = [f"--job-name={job.name}", f"--nodes={-(-job.workers // per_node)}",
                f"--ntasks={job.workers}", f"--ntasks-per-node={per_node}",
                f"--cpus-per-task={options.cpus_per_task}"]
  if options.mem:
    directives.append(f"--mem={options.mem}")
  if options.exclusive:
    directives.append("--exclusive")
  if job.accelerators_per_worker:
    gpus = str(job.accelerators_per_worker)
    directives.append(f"--gpus-per-task={job.accelerator + ':' if job.accelerator else ''}"
                      f"{gpus}")
  for name in ("partition", "time", "account"):
    if getattr(options, name):
      directives.append(f"--{name}={getattr(options, name)}")
  directives += [f"--output={job.name}-%j.out", "--open-mode=append", "--requeue",
                 f"--signal=TERM@{options.signal_seconds}"]
  lines = ["#!/bin/bash"] + [f"#SBATCH {d}" for d in directives] + ["set -euo pipefail"]
  if not job.image:
    lines.append(f"cd {shlex.quote(options.workdir)}")
  lines += list(options.setup)
  lines.append(f"mkdir -p {shlex.quote(job.model_dir)}")
  ledger = shlex.quote(posixpath.join(job.model_dir, ".launch"))
  requeue = ("  scontrol requeue \"$SLURM_JOB_ID\" || echo \"scontrol could not requeue job "
             "$SLURM_JOB_ID; it ends with status $status\" >&2")
  lines += [f"unreached={ledger}/\"slurm-$SLURM_JOB_ID-unreached\"",
            f"{shlex.join(srun(job, options))} && status=0 || status=$?",
            f"if [ \"$status\" -ne {EXIT_LAUNCH_UNREACHED} ]; then",
            "  rm -f \"$unreached\" 2>/dev/null || true  # launched: the count is of those in a row",
            "fi",
            f"if [ \"$status\" -eq {EXIT_PREEMPTED} ]; then",
            "  echo \"the step saved and stopped ($status): requeueing job $SLURM_JOB_ID "
            "to resume\"",
            requeue,
            f"elif [ \"$status\" -eq {EXIT_LAUNCH_UNREACHED} ]; then",
            f"  tries=$({{ mkdir -p {ledger} && echo \"$status\" >> \"$unreached\" && "
            "wc -l < \"$unreached\"; } 2>/dev/null) || tries=",
            f"  if [ -z \"$tries\" ]; then",
            "    echo \"the step could not start on every node ($status) and $unreached "
            "could not be written: not requeued\" >&2",
            f"  elif [ \"$tries\" -le {LAUNCH_REQUEUES} ]; then",
            "    echo \"the step could not start on every node ($status: a slurmd could not "
            "be reached): requeueing job $SLURM_JOB_ID to resume ($tries in a row, of at "
            f"most {LAUNCH_REQUEUES})\"",
            "  " + requeue,
            "  else",
            "    echo \"the step could not start on every node ($status), $tries times in a "
            f"row: not requeued again (at most {LAUNCH_REQUEUES}); see the nodes' slurmd "
            "logs\" >&2",
            "  fi",
            "fi",
            "exit \"$status\""]
  return "\n".join(lines) + "\n"


def steps(job, options):
  return (Step(argv=("sbatch", f"{{dir}}/{SCRIPT}"), files=((SCRIPT, script(job, options)),)),)


_JOB_ID = re.compile(r"\d+")


def check_job_id(job_id):
  if not _JOB_ID.fullmatch(job_id):
    raise LaunchError(f"--status/--cancel={job_id!r} is not a Slurm job id; give the "
                      "number sbatch printed (Submitted batch job <id>)")


def status_commands(job_id):
  """The job's state while Slurm keeps it (squeue: pending, running, requeued), then
  from accounting (sacct, where the cluster keeps it)."""
  check_job_id(job_id)
  return (["squeue", f"--jobs={job_id}", "--states=all",
           "--format=%.10i %.24j %.10T %.10M %.12l %R"],
          ["sacct", f"--jobs={job_id}", "--format=JobID,JobName,State,ExitCode,Elapsed"])


def cancel_command(job_id):
  """Ends the job for good: Slurm sends SIGTERM (the trainer saves) and SIGKILL after
  KillWait; the batch shell ends too, so nothing requeues it."""
  check_job_id(job_id)
  return ["scancel", job_id]
