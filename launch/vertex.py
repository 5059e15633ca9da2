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

Preemption: Vertex restarts a replica whose VM was taken; with several workers,
scheduling.restartJobOnWorkerRestart restarts them all, as multi-worker training
needs, and every worker resumes from model_dir. A replica's non-zero exit (2 bad
input, 3 diverged, 143 SIGTERM) fails the job.
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


@dataclasses.dataclass(frozen=True)
class Options:
  """project: gcloud's (its configuration's when ""). region: e.g. us-central1."""
  region: str = ""
  project: str = ""


def check(job, options):
  if not options.region:
    raise LaunchError("the vertex backend needs --region (e.g. --region=us-central1)")
  if not job.image:
    raise LaunchError("the vertex backend needs an image: give --image or --registry")
  if bucket_and_path(output_url(job)) is None:
    given = f"--model_dir={job.model_dir!r} is not reachable from every Vertex replica" \
        if job.model_dir else "the vertex backend needs --model_dir"
    raise LaunchError(f"{given}; give a gs:// path (e.g. --model_dir=gs://bucket/runs/x)")
  if job.accelerators_per_worker and not re.match(r"^[A-Z][A-Z0-9_]*$", job.accelerator):
    raise LaunchError(f"--accelerator={job.accelerator!r}: with --accelerators_per_worker "
                      "Vertex needs its accelerator type, e.g. --accelerator=NVIDIA_TESLA_T4")
  if job.accelerator and not job.accelerators_per_worker:
    raise LaunchError(f"--accelerator={job.accelerator} needs --accelerators_per_worker "
                      ">= 1 (GPUs a replica uses)")


def output_url(job):
  """model_dir as a gs:// URL: a /gcs/BUCKET/PATH mount path read back."""
  if job.model_dir.startswith(GCS_ROOT + "/"):
    return "gs://" + job.model_dir[len(GCS_ROOT) + 1:]
  return job.model_dir


def worker_pool(job, replicas):
  machine = {"machineType": job.machine_type or DEFAULT_MACHINE_TYPE}
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
  if job.workers > 1:
    spec["workerPoolSpecs"].append(worker_pool(run, job.workers - 1))
    spec["scheduling"] = {"restartJobOnWorkerRestart": True}
  spec["baseOutputDirectory"] = {"outputUriPrefix": url}
  return spec


def steps(job, options):
  text = yaml_text.dump(custom_job_spec(job, options))
  argv = ["gcloud", "ai", "custom-jobs", "create", f"--region={options.region}",
          f"--display-name={job.name}", f"--config={{dir}}/{CONFIG}"]
  if options.project:
    argv.append(f"--project={options.project}")
  return (Step(argv=tuple(argv), files=((CONFIG, text),)),)
