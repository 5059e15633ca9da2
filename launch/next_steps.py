"""What a user does after a submission: the job's name, and how to see its status and
logs, cancel it (each with the engine's own command line) and watch it in TensorBoard.

`text(backend, job, options)` is printed by launch/cli.py after the submission commands
succeeded. Every command is quoted word by word (shlex), so it can be pasted as is.
The trainer writes its TensorBoard summaries under model_dir (train/, eval/), so
`tensorboard --logdir=<model_dir>` shows them; TensorBoard reads gs:// itself.
"""

import shlex

from launch import kubernetes
from launch import vertex


def _lines(name, status, logs, cancel, logdir, note=""):
  join = lambda argv: "  $ " + shlex.join(argv)
  text = [f"Submitted {name}.", "Status:"] + [join(a) for a in status]
  text += ["Logs:"] + [join(a) for a in logs]
  text += ["Cancel:"] + [join(a) for a in cancel]
  text += ["TensorBoard:", join(["tensorboard", f"--logdir={logdir}"])]
  if note:
    text.append(note)
  return "\n".join(text) + "\n"


def _kubernetes(job, options):
  name = job.submitted_name
  ns = [f"--namespace={options.namespace}"] if options.namespace else []
  logdir = kubernetes.model_dir(job, options)
  note = ""
  if not job.model_dir.startswith("gs://"):
    note = (f"({logdir} is on the claim {options.volume_claim}: run TensorBoard where it "
            "is mounted.)")
  else:
    logdir = job.model_dir
  if options.kind == "indexed_job":
    chief = f"job-name={name},batch.kubernetes.io/job-completion-index=0"
    return _lines(f"Kubernetes Job {name} (and Service {name})",
                  [["kubectl", "get", f"job/{name}"] + ns,
                   ["kubectl", "get", "pods", f"--selector=job-name={name}"] + ns],
                  [["kubectl", "logs", "--follow", f"--selector={chief}"] + ns],
                  [["kubectl", "delete", f"job/{name}", f"service/{name}"] + ns],
                  logdir, note)
  return _lines(f"TFJob {name}",
                [["kubectl", "get", f"tfjob/{name}"] + ns,
                 ["kubectl", "get", "pods",
                  f"--selector=training.kubeflow.org/job-name={name}"] + ns],
                [["kubectl", "logs", "--follow", f"{name}-chief-0"] + ns],
                [["kubectl", "delete", f"tfjob/{name}"] + ns], logdir, note)


def _vertex(job, options):
  where = [f"--region={options.region}"] + (
      [f"--project={options.project}"] if options.project else [])
  found = ["gcloud", "ai", "custom-jobs", "list", *where,
           f"--filter=displayName={job.submitted_name}", "--format=value(name)"]
  verb = lambda v: ["gcloud", "ai", "custom-jobs", v, "JOB_ID", *where]
  note = ("JOB_ID: the number at the end of the CustomJob name gcloud printed above "
          "(or that the list command prints).")
  if options.tensorboard:
    note += f" Vertex AI TensorBoard: {options.tensorboard}."
  return _lines(f"Vertex AI CustomJob {job.submitted_name} (display name)",
                [found, verb("describe")], [verb("stream-logs")], [verb("cancel")],
                vertex.output_url(job), note)


def _tpu_vm(job, options):
  where = [f"--zone={options.zone}"] + (
      [f"--project={options.project}"] if options.project else [])
  ssh = lambda command: ["gcloud", "compute", "tpus", "tpu-vm", "ssh", options.tpu_name,
                         *where, "--worker=0", f"--command={command}"]
  name = job.submitted_name
  return _lines(f"container {name} on TPU VM {options.tpu_name}",
                [ssh(f"sudo docker ps --all --filter name={name}")],
                [ssh(f"sudo docker logs --follow {name}")],
                [ssh(f"sudo docker stop --time={kubernetes.GRACE_SECONDS} {name}"),
                 ["gcloud", "compute", "tpus", "tpu-vm", "delete", options.tpu_name,
                  *where]],
                job.model_dir,
                "(docker stop sends SIGTERM: the trainer saves a checkpoint; deleting "
                "the TPU VM stops its billing.)")


def _slurm(job, unused_options):
  name = job.name  # slurm.py's --job-name: the run's name
  return _lines(f"Slurm job {name}", [["squeue", f"--name={name}"],
                                      ["sacct", f"--name={name}"]],
                [["tail", "--follow", f"{name}-JOBID.out"]],
                [["scancel", f"--name={name}"]], job.model_dir,
                "JOBID: the number sbatch printed above; `bazel run //launch -- "
                "--backend=slurm --status=JOBID` (or --cancel=JOBID) does the same.")


ENGINES = {"kubernetes": _kubernetes, "vertex": _vertex, "tpu_vm": _tpu_vm,
           "slurm": _slurm}


def text(backend, job, options):
  """The lines printed after submitting `job` to `backend`."""
  return ENGINES[backend](job, options)
