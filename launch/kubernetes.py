"""Kubernetes: a Kubeflow TFJob, or a plain Service + Indexed Job, applied with kubectl.

kind "tfjob": a Kubeflow Training Operator TFJob (kubeflow.org/v1), one Chief and
workers-1 Workers. The operator requires the container to be named `tensorflow`, gives
it port 2222 and writes TF_CONFIG ({"chief": ..., "worker": ...}) itself.

kind "indexed_job": no operator: a headless Service and a batch/v1 Job with
completionMode Indexed, one pod a worker; each pod's hostname is `<name>-<index>` under
the Service's subdomain, and `python3 -m launch.indexed_worker` turns the pod's
JOB_COMPLETION_INDEX into TF_CONFIG before exec'ing the trainer. Needs Kubernetes >= 1.29
(backoffLimitPerIndex; podFailurePolicy).

Preemption and the trainer's exit statuses (recipes/errors.py):
  143  SIGTERM: a checkpoint was saved -> retried; the new pod resumes from model_dir.
  130  Ctrl-C (by hand, not seen in a pod) -> retried like 143.
  137  SIGKILL (out of memory, or the grace period ran out) -> retried.
  2    bad input, 3 diverged, 1 a crash -> the job fails; rerunning will not help.
TFJob restartPolicy ExitCode: the operator (training-operator v1.9.0,
pkg/util/train/train_util.go IsRetryableExitCode) retries exit codes >= 128 and fails
the job on 1-127; it deletes and recreates the pod (pod restartPolicy Never). Its
runPolicy.backoffLimit counts container restarts of running pods, so it bounds
`OnFailure` restarts, not these recreations.
Indexed Job podFailurePolicy: exit 2 or 3 fails the job at once; a pod taken by a
disruption (preemption, eviction, node drain: the DisruptionTarget condition) is
replaced without counting; any other failure counts against backoffLimitPerIndex,
and one index past its limit fails the job (maxFailedIndexes 0).

Where the run is written: a PersistentVolumeClaim (ReadWriteMany, so every worker
mounts it) at `volume_mount`, model_dir defaulting to <volume_mount>/<name>; or a
gs://BUCKET/PATH model_dir, whose bucket every pod mounts at /gcs/BUCKET with GKE's
Cloud Storage FUSE CSI driver (an ephemeral `csi` volume, driver
gcsfuse.csi.storage.gke.io, and the pod annotation gke-gcsfuse/volumes: "true" that has
GKE inject the gcsfuse sidecar); the trainer, which writes with local file APIs, gets
--model_dir=/gcs/BUCKET/PATH. That needs a GKE cluster with the CSI driver add-on and
Workload Identity Federation for GKE, and the pods' Kubernetes service account (the
namespace's `default`: the manifests set none) granted access to the bucket, e.g.
roles/storage.objectUser for the principal
`principal://iam.googleapis.com/projects/PROJECT_NUMBER/locations/global/
workloadIdentityPools/PROJECT_ID.svc.id.goog/subject/ns/NAMESPACE/sa/default` (one line).
After a SIGTERM the trainer writes its checkpoint through the mount: that relies on the
sidecar outliving it, as a native sidecar (an init container Kubernetes stops after the
trainer) does where GKE injects it so; not verified here for every GKE version.
"""

import dataclasses
import posixpath

from launch import yaml_text
from launch.job import IMAGE_PYTHON
from launch.job import IMAGE_WORKDIR
from launch.job import GCS_ROOT
from launch.job import LaunchError
from launch.job import Step
from launch.job import bucket_and_path
from launch.job import mounted

KINDS = ("tfjob", "indexed_job")
CONTAINER = "tensorflow"  # TFJobDefaultContainerName: the operator reads its exit code
# TFJobDefaultPort and TFJobDefaultPortName (the operator finds the port by this name);
# the Indexed Job's workers use the same.
PORT, PORT_NAME = 2222, "tfjob-port"
GPU_RESOURCE = "nvidia.com/gpu"
GKE_ACCELERATOR_LABEL = "cloud.google.com/gke-accelerator"
# SIGTERM to SIGKILL: time for the trainer to write its checkpoint.
GRACE_SECONDS = 120
EXIT_BAD_INPUT, EXIT_DIVERGED = 2, 3  # recipes/errors.py
VOLUME = "runs"
# GKE's Cloud Storage FUSE CSI driver: the volume of a gs:// model_dir's bucket.
GCS_VOLUME = "gcs"
GCSFUSE_DRIVER = "gcsfuse.csi.storage.gke.io"
GCSFUSE_ANNOTATION = "gke-gcsfuse/volumes"
# Folders that exist only as object name prefixes are listed (gcsfuse --implicit-dirs).
GCSFUSE_MOUNT_OPTIONS = "implicit-dirs"


@dataclasses.dataclass(frozen=True)
class Options:
  """kind: "tfjob" or "indexed_job". namespace: kubectl's (its context's when "").
  volume_claim: a PersistentVolumeClaim for model_dir, mounted at volume_mount.
  backoff_limit: TFJob runPolicy.backoffLimit; the Indexed Job's backoffLimitPerIndex.
  accelerator_label: the node label whose value is Job.accelerator."""
  kind: str = "tfjob"
  namespace: str = ""
  volume_claim: str = ""
  volume_mount: str = "/runs"
  backoff_limit: int = 3
  accelerator_label: str = GKE_ACCELERATOR_LABEL


def bucket_mount(job):
  """(bucket, where the pods mount it) for a gs:// model_dir; None otherwise."""
  found = bucket_and_path(job.model_dir)
  return None if found is None else (found[0], posixpath.join(GCS_ROOT, found[0]))


def _overlap(a, b):
  return a == b or a == "/" or b == "/" or a.startswith(b + "/") or b.startswith(a + "/")


def model_dir(job, options):
  """The trainer's model_dir: Job.model_dir checked against where workers can write, its
  default on a volume, a gs:// URL's path on the mounted bucket."""
  gcs = bucket_mount(job)
  if options.volume_claim:
    mount = posixpath.normpath(options.volume_mount)
    if not posixpath.isabs(mount):
      raise LaunchError(f"--volume_mount={options.volume_mount!r} must be an absolute "
                        "path, e.g. --volume_mount=/runs")
    if gcs and _overlap(mount, gcs[1]):
      raise LaunchError(f"--volume_mount={mount} overlaps {gcs[1]}, where the pods mount "
                        f"the bucket of --model_dir={job.model_dir}; mount the claim "
                        "elsewhere, e.g. --volume_mount=/runs")
    if not job.model_dir:
      return posixpath.join(mount, job.name)
    if gcs:
      return mounted(job.model_dir)
    if posixpath.normpath(job.model_dir).startswith(mount + "/"):
      return job.model_dir
    raise LaunchError(f"--model_dir={job.model_dir!r} is not on the volume "
                      f"--volume_claim={options.volume_claim} mounts at {mount}; give a "
                      f"path under it (e.g. {mount}/{job.name}) or a gs:// path")
  if not gcs:
    given = f"--model_dir={job.model_dir!r} is not reachable from every pod" \
        if job.model_dir else "the kubernetes backend needs --model_dir"
    raise LaunchError(f"{given}; give a gs:// path, or --volume_claim=<ReadWriteMany PVC>")
  return mounted(job.model_dir)


def check(job, options):
  if options.kind not in KINDS:
    raise LaunchError(f"--k8s_kind={options.kind!r} is not one of {', '.join(KINDS)}")
  if not job.image:
    raise LaunchError("the kubernetes backend needs an image: give --image or --registry")
  if job.accelerator and not job.accelerators_per_worker:
    raise LaunchError(f"--accelerator={job.accelerator} needs --accelerators_per_worker "
                      ">= 1 (GPUs a worker uses)")
  if isinstance(options.backoff_limit, bool) or not isinstance(options.backoff_limit, int) \
      or options.backoff_limit < 0:
    raise LaunchError(f"--backoff_limit={options.backoff_limit!r} must be a whole number "
                      ">= 0")


def container(job, options, command, env=()):
  """The `tensorflow` container every worker runs."""
  spec = {"name": CONTAINER, "image": job.image, "workingDir": IMAGE_WORKDIR,
          "command": list(command)}
  if env:
    spec["env"] = [{"name": k, "value": v} for k, v in env]
  spec["ports"] = [{"name": PORT_NAME, "containerPort": PORT}]
  if job.accelerators_per_worker:
    spec["resources"] = {"limits": {GPU_RESOURCE: job.accelerators_per_worker}}
  mounts = []
  if options.volume_claim:
    mounts.append({"name": VOLUME, "mountPath": posixpath.normpath(options.volume_mount)})
  gcs = bucket_mount(job)
  if gcs:
    mounts.append({"name": GCS_VOLUME, "mountPath": gcs[1]})
  if mounts:
    spec["volumeMounts"] = mounts
  return spec


def pod_spec(job, options, command, env=()):
  spec = {"terminationGracePeriodSeconds": GRACE_SECONDS,
          "containers": [container(job, options, command, env)]}
  if job.accelerator:
    spec["nodeSelector"] = {options.accelerator_label: job.accelerator}
  volumes = []
  if options.volume_claim:
    volumes.append({"name": VOLUME,
                    "persistentVolumeClaim": {"claimName": options.volume_claim}})
  gcs = bucket_mount(job)
  if gcs:
    volumes.append({"name": GCS_VOLUME, "csi": {
        "driver": GCSFUSE_DRIVER,
        "volumeAttributes": {"bucketName": gcs[0],
                             "mountOptions": GCSFUSE_MOUNT_OPTIONS}}})
  if volumes:
    spec["volumes"] = volumes
  return spec


def labels(job):
  """The job's pods: the Indexed Job's Service selects them by these."""
  return {"app.kubernetes.io/name": "zoo", "app.kubernetes.io/instance": job.name}


def pod_metadata(job):
  """The pod template's metadata: its labels, and with a gs:// model_dir the annotation
  that has GKE inject the Cloud Storage FUSE sidecar."""
  metadata = {"labels": labels(job)}
  if bucket_mount(job):
    metadata["annotations"] = {GCSFUSE_ANNOTATION: "true"}
  return metadata


def tfjob(job, options=Options()):
  """The TFJob manifest (a dict)."""
  check(job, options)
  run = dataclasses.replace(job, model_dir=model_dir(job, options))

  def replica(count):
    return {"replicas": count, "restartPolicy": "ExitCode",
            "template": {"metadata": pod_metadata(job),
                         "spec": pod_spec(job, options, run.command())}}

  replicas = {"Chief": replica(1)}
  if job.workers > 1:
    replicas["Worker"] = replica(job.workers - 1)
  return {"apiVersion": "kubeflow.org/v1", "kind": "TFJob",
          "metadata": {"name": job.name, "labels": labels(job)},
          "spec": {"runPolicy": {"backoffLimit": options.backoff_limit,
                                 "cleanPodPolicy": "Running"},
                   "tfReplicaSpecs": replicas}}


def indexed_job(job, options=Options()):
  """The headless Service and the Indexed Job (two dicts)."""
  check(job, options)
  run = dataclasses.replace(job, model_dir=model_dir(job, options))
  command = [IMAGE_PYTHON, "-m", "launch.indexed_worker", "--"] + run.command()
  env = (("ZOO_JOB_NAME", job.name), ("ZOO_JOB_SERVICE", job.name),
         ("ZOO_JOB_WORKERS", str(job.workers)), ("ZOO_JOB_PORT", str(PORT)))
  service = {"apiVersion": "v1", "kind": "Service",
             "metadata": {"name": job.name, "labels": labels(job)},
             "spec": {"clusterIP": "None", "publishNotReadyAddresses": True,
                      "selector": labels(job),
                      "ports": [{"name": PORT_NAME, "port": PORT}]}}
  pod = dict(pod_spec(job, options, command, env), subdomain=job.name,
             restartPolicy="Never")
  batch_job = {
      "apiVersion": "batch/v1", "kind": "Job",
      "metadata": {"name": job.name, "labels": labels(job)},
      "spec": {
          "completionMode": "Indexed",
          "completions": job.workers,
          "parallelism": job.workers,
          "backoffLimitPerIndex": options.backoff_limit,
          "maxFailedIndexes": 0,
          "podFailurePolicy": {"rules": [
              {"action": "FailJob",
               "onExitCodes": {"containerName": CONTAINER, "operator": "In",
                               "values": [EXIT_BAD_INPUT, EXIT_DIVERGED]}},
              {"action": "Ignore",
               "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
          ]},
          "template": {"metadata": pod_metadata(job), "spec": pod},
      }}
  return service, batch_job


def manifest(job, options=Options()):
  """(file name, YAML text) of what `kubectl apply` gets."""
  if options.kind == "indexed_job":
    return "indexed_job.yaml", yaml_text.dump(*indexed_job(job, options))
  return "tfjob.yaml", yaml_text.dump(tfjob(job, options))


def steps(job, options=Options()):
  name, text = manifest(job, options)
  argv = ["kubectl", "apply"]
  if options.namespace:
    argv.append(f"--namespace={options.namespace}")
  return (Step(argv=tuple(argv + ["-f", f"{{dir}}/{name}"]), files=((name, text),)),)
