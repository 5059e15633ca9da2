"""Vertex AI: a CustomJob, created with `gcloud ai custom-jobs create --config=<file>`.

The file is a CustomJobSpec (aiplatform v1; `gcloud ai custom-jobs create --help`:
"a YAML document containing a CustomJobSpec", camelCase keys): worker pool 0 is the
chief (one replica), pool 1 the other workers-1; every replica runs the image's
`python3 -m recipes.train` from the image's working directory (//launch/image sets it
to launch.job.IMAGE_WORKDIR). Vertex writes TF_CONFIG ({"chief": ..., "worker": ...})
itself. Vertex replicas share no disk: model_dir is in Cloud Storage, given as
gs://BUCKET/PATH or as /gcs/BUCKET/PATH. Vertex mounts the project's buckets at
/gcs/BUCKET (Cloud Storage FUSE), and the trainer, which writes with local file APIs, is
given that path; the job's baseOutputDirectory is the gs:// URL. The job's service
account (Vertex's own unless the project sets one) needs access to the bucket.

Restarts (Vertex's "Understand the custom training service"): Vertex restarts a
worker whose VM is taken or maintained, and any worker that exits non-zero, at once
and on the same VM, unless the failure is one of Vertex's listed common errors (those
end the whole job); with several workers, scheduling.restartJobOnWorkerRestart
restarts them all, as multi-worker training needs, and every worker resumes from
model_dir. So 143 (SIGTERM, checkpoint saved), 137 and 200 (a lost peer) resume, but
so do 2 (bad input) and 3 (diverged): they restart until scheduling.timeout
(--vertex_timeout_hours, written always; Vertex's own default is 7 days) ends the job,
or you cancel it (`gcloud ai custom-jobs cancel`, printed after the submission).
The launcher checks the recipe and its flags before submitting to make that rare.

--spot: scheduling.strategy SPOT (Spot VMs: cheaper, preemptible; preemption restarts
as above). --service_account: the job's serviceAccount (it needs access to the bucket).
--vertex_tensorboard=projects/P/locations/L/tensorboards/ID: Vertex uploads the event
files under <baseOutputDirectory>/logs (AIP_TENSORBOARD_LOG_DIR) to that Vertex AI
TensorBoard; it needs --service_account, and --model_dir=gs://BUCKET/PATH/logs, so the
run's summaries are there (baseOutputDirectory is then gs://BUCKET/PATH).

Machine types: A100, H100, H200 and L4 GPUs attach only to their own machine families
(a2-highgpu, a2-ultragpu, a3-highgpu, a3-megagpu, a3-ultragpu, g2-standard), sized by
the GPU count; without --machine_type the launcher picks that type, and refuses one of
another family in one line. Other GPUs (T4, V100, P100, P4) and the CPU run on
n1-standard-8 unless --machine_type says otherwise.
"""

import dataclasses
import re

from launch import yaml_text
from launch.job import GCS_ROOT
from launch.job import LaunchError
from launch.job import Step
from launch.job import bucket_and_path
from launch.job import mounted

DEFAULT_MACHINE_TYPE = "n1-standard-8"
CONFIG = "custom_job.yaml"
DEFAULT_TIMEOUT_HOURS = 7 * 24
# GPUs that attach only to one machine family: the type for each GPU count.
GPU_MACHINES = {
    "NVIDIA_TESLA_A100": {1: "a2-highgpu-1g", 2: "a2-highgpu-2g", 4: "a2-highgpu-4g",
                          8: "a2-highgpu-8g", 16: "a2-megagpu-16g"},
    "NVIDIA_A100_80GB": {1: "a2-ultragpu-1g", 2: "a2-ultragpu-2g", 4: "a2-ultragpu-4g",
                         8: "a2-ultragpu-8g"},
    "NVIDIA_H100_80GB": {1: "a3-highgpu-1g", 2: "a3-highgpu-2g", 4: "a3-highgpu-4g",
                         8: "a3-highgpu-8g"},
    "NVIDIA_H100_MEGA_80GB": {8: "a3-megagpu-8g"},
    "NVIDIA_H200_141GB": {8: "a3-ultragpu-8g"},
    "NVIDIA_L4": {1: "g2-standard-4", 2: "g2-standard-24", 4: "g2-standard-48",
                  8: "g2-standard-96"},
}
_TENSORBOARD = re.compile(r"projects/[-a-z0-9]+/locations/[-a-z0-9]+/tensorboards/[0-9]+")
_REGION = re.compile(r"[a-z]+-[a-z]+[0-9]+")
_PROJECT = re.compile(r"([a-z][-a-z0-9.]*[a-z0-9]:)?[a-z][-a-z0-9]{4,28}[a-z0-9]")
_SERVICE_ACCOUNT = re.compile(r"[a-z][-a-z0-9]{4,61}[a-z0-9]@[-a-z0-9.]+")


@dataclasses.dataclass(frozen=True)
class Options:
  """project: gcloud's (its configuration's when ""). region: e.g. us-central1.
  spot: Spot VMs. timeout_hours: scheduling.timeout. service_account: the job's.
  tensorboard: a Vertex AI TensorBoard's resource name (see the module docstring)."""
  region: str = ""
  project: str = ""
  spot: bool = False
  timeout_hours: int = DEFAULT_TIMEOUT_HOURS
  service_account: str = ""
  tensorboard: str = ""


def check(job, options):
  if not options.region:
    raise LaunchError("the vertex backend needs --region (e.g. --region=us-central1)")
  if not _REGION.fullmatch(options.region):
    raise LaunchError(f"--region={options.region!r} is not a Google Cloud region, e.g. "
                      "--region=us-central1")
  if options.project and not _PROJECT.fullmatch(options.project):
    raise LaunchError(f"--project={options.project!r} is not a Google Cloud project ID")
  if job.machine_type and not re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", job.machine_type):
    raise LaunchError(f"--machine_type={job.machine_type!r} is not a machine type, e.g. "
                      f"{DEFAULT_MACHINE_TYPE}")
  if not job.image:
    raise LaunchError("the vertex backend needs an image: give --image or --registry")
  if bucket_and_path(output_url(job)) is None:
    given = f"--model_dir={job.model_dir!r} is not reachable from every Vertex replica" \
        if job.model_dir else "the vertex backend needs --model_dir"
    raise LaunchError(f"{given}; give a gs:// path (e.g. --model_dir=gs://bucket/runs/x)")
  if job.accelerators_per_worker and not re.fullmatch(r"[A-Z][A-Z0-9_]*", job.accelerator):
    raise LaunchError(f"--accelerator={job.accelerator!r}: with --accelerators_per_worker "
                      "Vertex needs its accelerator type, e.g. --accelerator=NVIDIA_TESLA_T4")
  if job.accelerator and not job.accelerators_per_worker:
    raise LaunchError(f"--accelerator={job.accelerator!r} needs --accelerators_per_worker "
                      ">= 1 (GPUs a replica uses)")
  machine_type(job)
  if isinstance(options.timeout_hours, bool) or not isinstance(options.timeout_hours, int) \
      or options.timeout_hours < 1:
    raise LaunchError(f"--vertex_timeout_hours={options.timeout_hours!r} must be a whole "
                      f"number >= 1 (Vertex's default is {DEFAULT_TIMEOUT_HOURS})")
  if options.service_account and not _SERVICE_ACCOUNT.fullmatch(options.service_account):
    raise LaunchError(f"--service_account={options.service_account!r} is not a service "
                      "account e-mail, e.g. trainer@my-project.iam.gserviceaccount.com")
  check_tensorboard(job, options)


def check_tensorboard(job, options):
  if not options.tensorboard:
    return
  if not _TENSORBOARD.fullmatch(options.tensorboard):
    raise LaunchError(f"--vertex_tensorboard={options.tensorboard!r} is not a TensorBoard "
                      "resource name, e.g. projects/my-project/locations/us-central1/"
                      "tensorboards/123")
  if not options.service_account:
    raise LaunchError("--vertex_tensorboard needs --service_account (Vertex uploads the "
                      "logs as the job's service account)")
  if output_url(job).rstrip("/").rsplit("/", 1)[-1] != "logs":
    logs = output_url(job).rstrip("/") + "/logs"
    raise LaunchError(f"--vertex_tensorboard uploads <baseOutputDirectory>/logs: give "
                      f"--model_dir={logs!r}, the run written there")


def machine_type(job):
  """The machine type: --machine_type, else the one the GPU needs, else the default.
  LaunchError for a GPU count or machine family the GPU cannot have."""
  sizes = GPU_MACHINES.get(job.accelerator) if job.accelerators_per_worker else None
  if sizes is None:
    return job.machine_type or DEFAULT_MACHINE_TYPE
  needed = sizes.get(job.accelerators_per_worker)
  if needed is None:
    raise LaunchError(f"--accelerators_per_worker={job.accelerators_per_worker}: "
                      f"{job.accelerator} comes {', '.join(map(str, sizes))} to a machine")
  families = {m.rsplit("-", 1)[0] + "-" for m in sizes.values()}
  if job.machine_type and not job.machine_type.startswith(tuple(families)):
    raise LaunchError(f"--machine_type={job.machine_type} cannot host {job.accelerator}; "
                      f"drop it, or give --machine_type={needed}")
  return job.machine_type or needed


def output_url(job):
  """model_dir as a gs:// URL: a /gcs/BUCKET/PATH mount path read back."""
  if job.model_dir.startswith(GCS_ROOT + "/"):
    return "gs://" + job.model_dir[len(GCS_ROOT) + 1:]
  return job.model_dir


def worker_pool(job, replicas):
  machine = {"machineType": machine_type(job)}
  if job.accelerators_per_worker:
    machine["acceleratorType"] = job.accelerator
    machine["acceleratorCount"] = job.accelerators_per_worker
  command = job.command()
  return {"machineSpec": machine, "replicaCount": replicas,
          "containerSpec": {"imageUri": job.image, "command": command[:3],
                            "args": command[3:]}}


def custom_job_spec(job, options):
  """The CustomJobSpec (a dict)."""
  check(job, options)
  url = output_url(job)
  run = dataclasses.replace(job, model_dir=mounted(url))
  spec = {"workerPoolSpecs": [worker_pool(run, 1)]}
  scheduling = {"timeout": f"{options.timeout_hours * 3600}s"}
  if job.workers > 1:
    spec["workerPoolSpecs"].append(worker_pool(run, job.workers - 1))
    scheduling["restartJobOnWorkerRestart"] = True
  if options.spot:
    scheduling["strategy"] = "SPOT"
  spec["scheduling"] = scheduling
  base = url
  if options.tensorboard:  # Vertex uploads <base>/logs, where the run is
    base = url.rstrip("/")[:-len("/logs")]
    spec["tensorboard"] = options.tensorboard
  spec["baseOutputDirectory"] = {"outputUriPrefix": base}
  if options.service_account:
    spec["serviceAccount"] = options.service_account
  return spec


def steps(job, options):
  text = yaml_text.dump(custom_job_spec(job, options))
  argv = ["gcloud", "ai", "custom-jobs", "create", f"--region={options.region}",
          f"--display-name={job.submitted_name}", f"--config={{dir}}/{CONFIG}"]
  if options.project:
    argv.append(f"--project={options.project}")
  return (Step(argv=tuple(argv), files=((CONFIG, text),)),)
