"""Slurm: an sbatch script, one task a worker, submitted with `sbatch <file>`.

One node and one task a worker (--nodes, --ntasks, --ntasks-per-node=1; its GPUs by
--gpus-per-task=<count> or <type>:<count>), and one `srun` step that starts
`python3 -m recipes.train --strategy=multi_worker_mirrored --cluster=slurm` in every
task: the trainer finds its peers through Slurm's environment (SlurmClusterResolver).
With an image the step runs in it (pyxis: --container-image, working directory
launch.job.IMAGE_WORKDIR, model_dir mounted); without one, in `workdir`, a checkout of
this workspace on the cluster whose Python environment `setup` lines (e.g.
`source ~/zoo-venv/bin/activate`) make ready.

model_dir is a path on a filesystem every node shares; a gs:// URL is refused (the
trainer writes with local file APIs: mount the bucket with gcsfuse on every node and
give the mounted path). Preemption and time limits: Slurm sends SIGTERM two minutes
before the time limit (--signal), the trainer saves a checkpoint and exits 143; a
preempted job is requeued (--requeue) and resumes from model_dir. --kill-on-bad-exit
ends every worker when one fails (2 bad input, 3 diverged), so a broken run does not
hang in its collectives.
"""

import dataclasses
import posixpath
import shlex

from launch.job import IMAGE_WORKDIR
from launch.job import LaunchError
from launch.job import Step

SCRIPT = "job.sbatch"
SIGNAL_SECONDS = 120


@dataclasses.dataclass(frozen=True)
class Options:
  """partition, time ("HH:MM:SS" or "D-HH:MM:SS"), account: sbatch's (the cluster's
  defaults when ""). workdir: the workspace on the cluster (without an image).
  setup: shell lines run before srun. container_mounts: pyxis --container-mounts
  beyond model_dir (e.g. the data set: /data:/data)."""
  partition: str = ""
  time: str = ""
  account: str = ""
  workdir: str = ""
  setup: tuple = ()
  container_mounts: str = ""


def check(job, options):
  if "://" in job.model_dir:
    raise LaunchError(f"--model_dir={job.model_dir} is a URL; Slurm workers write to a "
                      "shared file system: give its path (e.g. --model_dir=/shared/runs/"
                      f"{job.name}), or mount the bucket with gcsfuse on every node and "
                      "give the mounted path")
  if not posixpath.isabs(job.model_dir):
    given = f"--model_dir={job.model_dir!r}" if job.model_dir else "no --model_dir"
    raise LaunchError(f"{given}: give an absolute path on a filesystem every node shares")
  if not job.image and not posixpath.isabs(options.workdir):
    raise LaunchError("the slurm backend runs in --image (pyxis) or in --slurm_workdir, "
                      "the workspace's absolute path on the cluster; give one")
  if job.accelerator and not job.accelerators_per_worker:
    raise LaunchError(f"--accelerator={job.accelerator} needs --accelerators_per_worker "
                      ">= 1 (GPUs a task uses)")
  if options.container_mounts and not job.image:
    raise LaunchError("--slurm_container_mounts needs --image (pyxis mounts into a "
                      "container)")


def srun(job, options):
  """The srun command line."""
  argv = ["srun", "--kill-on-bad-exit=1"]
  if job.image:
    mounts = [f"{job.model_dir}:{job.model_dir}"]
    mounts += [m for m in options.container_mounts.split(",") if m]
    argv += [f"--container-image={job.image}", f"--container-workdir={IMAGE_WORKDIR}",
             f"--container-mounts={','.join(mounts)}"]
  return argv + job.command(extra=["--cluster=slurm"])


def script(job, options):
  """The sbatch script's text."""
  check(job, options)
  directives = [f"--job-name={job.name}", f"--nodes={job.workers}",
                f"--ntasks={job.workers}", "--ntasks-per-node=1"]
  if job.accelerators_per_worker:
    gpus = str(job.accelerators_per_worker)
    directives.append(f"--gpus-per-task={job.accelerator + ':' if job.accelerator else ''}"
                      f"{gpus}")
  for name in ("partition", "time", "account"):
    if getattr(options, name):
      directives.append(f"--{name}={getattr(options, name)}")
  directives += [f"--output={job.name}-%j.out", "--open-mode=append", "--requeue",
                 f"--signal=TERM@{SIGNAL_SECONDS}"]
  lines = ["#!/bin/bash"] + [f"#SBATCH {d}" for d in directives] + ["set -euo pipefail"]
  if not job.image:
    lines.append(f"cd {shlex.quote(options.workdir)}")
  lines += list(options.setup)
  lines.append(f"mkdir -p {shlex.quote(job.model_dir)}")
  lines.append(shlex.join(srun(job, options)))
  return "\n".join(lines) + "\n"


def steps(job, options):
  return (Step(argv=("sbatch", f"{{dir}}/{SCRIPT}"), files=((SCRIPT, script(job, options)),)),)
