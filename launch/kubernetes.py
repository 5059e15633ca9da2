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
  200  a peer worker stopped (its collectives failed; recipes/errors.py
       EXIT_PEER_LOST, measured in tests/launch/peer_exit_test.py) -> retried.
  4    the worker's retry budget is spent (launch/retry_budget.py) -> the job fails.
TFJob restartPolicy ExitCode: the operator (training-operator v1.9.0,
pkg/util/train/train_util.go IsRetryableExitCode) retries exit codes >= 128 and fails
the job on 1-127; it deletes and re-creates only the failed pod (pod restartPolicy
Never), so the job survives a lost worker only because every other worker then exits
>= 128 too (200 above). The operator's runPolicy.backoffLimit (PastBackoffLimit) sums
the container restart counts of running pods, which a re-created pod has none of, and
older releases skip ExitCode replicas outright: it never stops an out-of-memory loop. The bound is therefore the worker's own: every container runs
`python3 -m launch.retry_budget --limit=<backoff_limit>` first, which counts the
worker's starts in model_dir and exits 4 past that many restarts in a row without a
new checkpoint. (restartPolicy OnFailure would make backoffLimit count, but it fails
the job when a preempted or evicted pod ends Failed, and retries bad input.)
Indexed Job podFailurePolicy: exit 2, 3 or 4 fails the job at once; a pod taken by a
disruption (preemption, eviction, node drain: the DisruptionTarget condition) is
replaced without counting. Only the disrupted pod gets that condition: its peers save
with it and exit 143, and 143 (a checkpoint was saved) is also replaced without
counting, else every preemption would use up one retry of each other index; a loop
of 143 without progress is bounded by launch/retry_budget.py as above. Any other
failure (137, 200, 1) counts against backoffLimitPerIndex, and one index past its limit
fails the job (maxFailedIndexes 0).

Names: each launch is a new Kubernetes job, `<name>-<submission id>` (Job.submitted_name),
so `kubectl create` always makes one instead of leaving a finished job as it is or
rejecting a changed one; model_dir (default <volume_mount>/<name>) stays the run's, so
a relaunch resumes it.
Kubernetes expands `$(VAR)` and turns `$$` into `$` in command and args: every `$` is
written `$$`, so a Gin binding with a `$` reaches the trainer unchanged.
--spot: the pods select GKE Spot nodes (node label cloud.google.com/gke-spot=true);
their preemption is a disruption as above.
Resources: every container requests --k8s_cpu and --k8s_memory (memory also its limit),
so its pod is Burstable, not BestEffort (evicted first under node pressure).

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
Who reaches a worker: TensorFlow's gRPC server, which every multi-worker run starts,
listens on all interfaces without authentication (its SECURITY.md: trusted networks
only). Each manifest therefore carries a NetworkPolicy that admits connections to the
job's pods from the job's own pods alone (every port: the workers' and a tf.data
service's); it takes effect where the cluster's network plugin enforces NetworkPolicy
(GKE Dataplane V2 or Calico, for example), and nothing else is changed where it does
not. Every container runs without privilege escalation, with all Linux capabilities
dropped and the runtime's default seccomp profile.
"""

import dataclasses
import posixpath
import re

from launch import retry_budget
from launch import yaml_text
from launch.job import IMAGE_PYTHON
from launch.job import IMAGE_WORKDIR
from launch.job import GCS_ROOT
from launch.job import LaunchError
from launch.job import Step
from launch.job import bucket_and_path
from launch.job import check_not_over_code
from launch.job import mounted

KINDS = ("tfjob", "indexed_job")
CONTAINER = "tensorflow"  # TFJobDefaultContainerName: the operator reads its exit code
# TFJobDefaultPort and TFJobDefaultPortName (the operator finds the port by this name);
# the Indexed Job's workers use the same.
PORT, PORT_NAME = 2222, "tfjob-port"
GPU_RESOURCE = "nvidia.com/gpu"
GKE_ACCELERATOR_LABEL = "cloud.google.com/gke-accelerator"
GKE_SPOT_LABEL = "cloud.google.com/gke-spot"  # GKE's label on its Spot VM nodes
# SIGTERM to SIGKILL: time for the trainer to write its checkpoint.
GRACE_SECONDS = 120
EXIT_BAD_INPUT, EXIT_DIVERGED = 2, 3  # recipes/errors.py
EXIT_PREEMPTED = 143  # recipes/errors.py: SIGTERM, a checkpoint was saved
EXIT_RETRIES_SPENT = retry_budget.EXIT_RETRIES_SPENT
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
_LABEL_VALUE = re.compile(r"[A-Za-z0-9]([-_.A-Za-z0-9]{0,61}[A-Za-z0-9])?")
_LABEL_KEY = re.compile(r"([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/)?"
                        r"[A-Za-z0-9]([-_.A-Za-z0-9]{0,61}[A-Za-z0-9])?")
# Kubernetes resource quantities (a number, then an SI or binary suffix).
_QUANTITY = re.compile(r"[0-9]+(\.[0-9]+)?(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?")
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
  accelerator_label: the node label whose value is Job.accelerator.
  cpu, memory: what each worker's container requests (memory is also its limit).
  spot: run on GKE Spot VM nodes."""
  kind: str = "tfjob"
  namespace: str = ""
  volume_claim: str = ""
  volume_mount: str = "/runs"
  backoff_limit: int = 3
  accelerator_label: str = GKE_ACCELERATOR_LABEL
  cpu: str = "4"
  memory: str = "16Gi"
  spot: bool = False


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
      raise LaunchError(f"--volume_mount={mount!r} overlaps {gcs[1]}, where the pods mount "
                        f"the bucket of --model_dir={job.model_dir!r}; mount the claim "
                        "elsewhere, e.g. --volume_mount=/runs")
    check_not_over_code(mount, "--volume_mount")
    if not job.model_dir:
      return posixpath.join(mount, job.name)
    if gcs:
      return mounted(job.model_dir)
    if posixpath.normpath(job.model_dir).startswith(mount + "/"):
      return job.model_dir
    raise LaunchError(f"--model_dir={job.model_dir!r} is not on the volume "
                      f"--volume_claim={options.volume_claim} mounts at {mount!r}; give a "
                      f"path under it (e.g. {posixpath.join(mount, job.name)!r}) or a "
                      "gs:// path")
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
    raise LaunchError(f"--accelerator={job.accelerator!r} needs --accelerators_per_worker "
                      ">= 1 (GPUs a worker uses)")
  if isinstance(options.backoff_limit, bool) or not isinstance(options.backoff_limit, int) \
      or options.backoff_limit < 0:
    raise LaunchError(f"--backoff_limit={options.backoff_limit!r} must be a whole number "
                      ">= 0")
  for flag, value in (("--namespace", options.namespace),
                      ("--volume_claim", options.volume_claim)):
    if value and not _DNS_LABEL.fullmatch(value):
      raise LaunchError(f"{flag}={value!r} is not a Kubernetes name (lower case, digits "
                        "and '-', at most 63)")
  if not _LABEL_KEY.fullmatch(options.accelerator_label):
    raise LaunchError(f"--accelerator_label={options.accelerator_label!r} is not a node "
                      f"label key, e.g. {GKE_ACCELERATOR_LABEL}")
  if job.accelerator and not _LABEL_VALUE.fullmatch(job.accelerator):
    raise LaunchError(f"--accelerator={job.accelerator!r} is not a node label value, e.g. "
                      "nvidia-tesla-a100")
  for flag, value, example in (("--k8s_cpu", options.cpu, "4 or 500m"),
                               ("--k8s_memory", options.memory, "16Gi")):
    if not _QUANTITY.fullmatch(value) or not re.search(r"[1-9]", value):
      raise LaunchError(f"{flag}={value!r} is not a positive Kubernetes quantity, e.g. "
                        f"{flag}={example.split()[0]} ({example})")


def security_context():
  """No privilege escalation, no capabilities, the runtime's default system-call filter."""
  return {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]},
          "seccompProfile": {"type": "RuntimeDefault"}}


def escape(argv):
  """argv with every `$` written `$$`: Kubernetes expands `$(VAR)` and `$$` in a
  container's command and args, and `$$` comes back as one `$`."""
  return [arg.replace("$", "$$") for arg in argv]


def budgeted(job, options, command):
  """`command` run under launch.retry_budget, its ledger this submission's."""
  model = next(a.split("=", 1)[1] for a in command if a.startswith("--model_dir="))
  return [IMAGE_PYTHON, "-m", "launch.retry_budget", f"--limit={options.backoff_limit}",
          f"--model_dir={model}", f"--ledger={job.submitted_name}", "--"] + list(command)


def container(job, options, command, env=()):
  """The `tensorflow` container every worker runs."""
  spec = {"name": CONTAINER, "image": job.image, "workingDir": IMAGE_WORKDIR,
          "command": escape(command), "securityContext": security_context()}
  if env:
    spec["env"] = [{"name": k, "value": v} for k, v in env]
  spec["ports"] = [{"name": PORT_NAME, "containerPort": PORT}]
  resources = {"requests": {"cpu": options.cpu, "memory": options.memory},
               "limits": {"memory": options.memory}}
  if job.accelerators_per_worker:
    resources["limits"][GPU_RESOURCE] = job.accelerators_per_worker
  spec["resources"] = resources
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
  selector = {options.accelerator_label: job.accelerator} if job.accelerator else {}
  if options.spot:
    selector[GKE_SPOT_LABEL] = "true"
  if selector:
    spec["nodeSelector"] = selector
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
  return {"app.kubernetes.io/name": "zoo", "app.kubernetes.io/instance": job.submitted_name}


def pod_metadata(job):
  """The pod template's metadata: its labels, and with a gs:// model_dir the annotation
  that has GKE inject the Cloud Storage FUSE sidecar."""
  metadata = {"labels": labels(job)}
  if bucket_mount(job):
    metadata["annotations"] = {GCSFUSE_ANNOTATION: "true"}
  return metadata


def network_policy(job):
  """The NetworkPolicy that admits to the job's pods only the job's own pods."""
  own = {"matchLabels": labels(job)}
  return {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
          "metadata": {"name": job.submitted_name, "labels": labels(job)},
          "spec": {"podSelector": own, "policyTypes": ["Ingress"],
                   "ingress": [{"from": [{"podSelector": own}]}]}}


def tfjob(job, options=Options()):
  """The TFJob manifest (a dict)."""
  check(job, options)
  run = dataclasses.replace(job, model_dir=model_dir(job, options))
  command = budgeted(job, options, run.command())

  def replica(count):
    return {"replicas": count, "restartPolicy": "ExitCode",
            "template": {"metadata": pod_metadata(job),
                         "spec": pod_spec(job, options, command)}}

  replicas = {"Chief": replica(1)}
  if job.workers > 1:
    replicas["Worker"] = replica(job.workers - 1)
  return {"apiVersion": "kubeflow.org/v1", "kind": "TFJob",
          "metadata": {"name": job.submitted_name, "labels": labels(job)},
          "spec": {"runPolicy": {"backoffLimit": options.backoff_limit,
                                 "cleanPodPolicy": "Running"},
                   "tfReplicaSpecs": replicas}}


def indexed_job(job, options=Options()):
  """The headless Service and the Indexed Job (two dicts)."""
  check(job, options)
  run = dataclasses.replace(job, model_dir=model_dir(job, options))
  command = [IMAGE_PYTHON, "-m", "launch.indexed_worker", "--"] + budgeted(
      job, options, run.command())
  name = job.submitted_name
  env = (("ZOO_JOB_NAME", name), ("ZOO_JOB_SERVICE", name),
         ("ZOO_JOB_WORKERS", str(job.workers)), ("ZOO_JOB_PORT", str(PORT)))
  service = {"apiVersion": "v1", "kind": "Service",
             "metadata": {"name": name, "labels": labels(job)},
             "spec": {"clusterIP": "None", "publishNotReadyAddresses": True,
                      "selector": labels(job),
                      "ports": [{"name": PORT_NAME, "port": PORT}]}}
  pod = dict(pod_spec(job, options, command, env), subdomain=name,
             restartPolicy="Never")
  batch_job = {
      "apiVersion": "batch/v1", "kind": "Job",
      "metadata": {"name": name, "labels": labels(job)},
      "spec": {
          "completionMode": "Indexed",
          "completions": job.workers,
          "parallelism": job.workers,
          "backoffLimitPerIndex": options.backoff_limit,
          "maxFailedIndexes": 0,
          "podFailurePolicy": {"rules": [
              {"action": "FailJob",
               "onExitCodes": {"containerName": CONTAINER, "operator": "In",
                               "values": [EXIT_BAD_INPUT, EXIT_DIVERGED,
                                          EXIT_RETRIES_SPENT]}},
              {"action": "Ignore",
               "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
              {"action": "Ignore",
               "onExitCodes": {"containerName": CONTAINER, "operator": "In",
                               "values": [EXIT_PREEMPTED]}},
          ]},
          "template": {"metadata": pod_metadata(job), "spec": pod},
      }}
  return service, batch_job


def manifest(job, options=Options()):
  """(file name, YAML text) of what `kubectl create` gets."""
  if options.kind == "indexed_job":
    return "indexed_job.yaml", yaml_text.dump(*indexed_job(job, options),
                                              network_policy(job))
  return "tfjob.yaml", yaml_text.dump(tfjob(job, options), network_policy(job))


def steps(job, options=Options()):
  name, text = manifest(job, options)
  argv = ["kubectl", "create"]
  if options.namespace:
    argv.append(f"--namespace={options.namespace}")
  return (Step(argv=tuple(argv + ["-f", f"{{dir}}/{name}"]), files=((name, text),)),)
