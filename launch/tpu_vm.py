"""Cloud TPU VM: the project's image, run with Docker on every host of a TPU VM.

The sequence (`gcloud compute tpus tpu-vm ...`; every host at once, --worker=all):
  1. create the TPU VM (only with `create`; otherwise it must exist already);
  2. scp a Dockerfile to every host;
  3. ssh: build the TPU image from it on each host (docker is part of the TPU VM
     software versions);
  4. ssh: mount model_dir's bucket on each host with Cloud Storage FUSE, as root:
     `gcsfuse --implicit-dirs BUCKET /gcs/BUCKET` (after `mkdir -p`; skipped where it is
     mounted already, so a rerun on the same VM works). gcsfuse is not assumed to be on
     the TPU VM image: where `gcsfuse` is not on PATH it is installed first from
     Google's apt repository, as the Cloud Storage FUSE install guide does for
     Debian/Ubuntu (packages.cloud.google.com/apt, suite gcsfuse-<lsb_release -c -s>,
     its key in /usr/share/keyrings/cloud.google.asc); that is fetched at launch, like
     the TPU packages, and not hash-locked. It authenticates as the VM's service
     account, which needs access to the bucket;
  5. ssh: start the recipe in that image, detached (`docker logs -f <name>` follows it),
     with `--strategy=tpu --tpu=local`, the mount bind-mounted at the same path
     (`--volume=/gcs/BUCKET:/gcs/BUCKET`, docker's -v) and
     `--model_dir=/gcs/BUCKET/PATH`: the trainer writes with local file APIs (the
     locked TensorFlow has no gs:// file system).

What is hash-locked and what is not: the project's image carries the workspace and the
hash-locked CPU environment (third_party/py/requirements_lock.txt), whose plain
`tensorflow` wheel cannot drive a TPU. The Dockerfile replaces it with
`tensorflow-tpu==2.20.0` (the same TensorFlow built with TPU support) and the `libtpu`
that pip picks from Google's libtpu-tf-releases index (tensorflow-tpu 2.20.0 asks for
libtpu~=0.0.14): these two are pinned by version only, not by hash, and are fetched
when each host builds the image. `packages` overrides them (e.g. to pin libtpu).

Hosts: a single-host TPU VM (types up to 8 cores or chips, e.g. v4-8, v5litepod-8) runs
the recipe once. On a multi-host slice (e.g. v4-16) the same command starts on every
host; TensorFlow's multi-host TPU setups have been Google's `tpu-vm-tf-*-pod` software
versions, so a TF 2.20 pod slice this way is untested. model_dir is a gs:// path:
the hosts of a slice share no disk but the bucket, and the VM's disk goes with a
preemption. Preemption takes the VM: rerun the launch (with `create` for a
spot/preemptible VM) and the recipe resumes from model_dir.
"""

import dataclasses
import posixpath
import re
import shlex

from launch.job import GCS_ROOT
from launch.job import IMAGE_PYTHON
from launch.job import IMAGE_WORKDIR
from launch.job import LaunchError
from launch.job import Step
from launch.job import bucket_and_path
from launch.job import mounted

DEFAULT_RUNTIME_VERSION = "tpu-ubuntu2204-base"
TPU_PACKAGES = "tensorflow-tpu==2.20.0"
LIBTPU_INDEX = "https://storage.googleapis.com/libtpu-tf-releases/index.html"
DOCKERFILE = "Dockerfile.tpu"
# Cloud Storage FUSE's apt repository and signing key (its install guide, Debian/Ubuntu).
GCSFUSE_APT = "https://packages.cloud.google.com/apt"
GCSFUSE_KEY = "https://packages.cloud.google.com/apt/doc/apt-key.gpg"
GCSFUSE_KEYRING = "/usr/share/keyrings/cloud.google.asc"
_TPU_TYPE = re.compile(r"^v[0-9]+[a-z]*-[0-9]+$")


@dataclasses.dataclass(frozen=True)
class Options:
  """tpu_name: the TPU VM. zone: its zone. project: gcloud's when "". create: create
  it first (type Job.accelerator, software version runtime_version). packages: pip
  requirements that replace the image's tensorflow."""
  tpu_name: str = ""
  zone: str = ""
  project: str = ""
  create: bool = False
  runtime_version: str = DEFAULT_RUNTIME_VERSION
  packages: str = TPU_PACKAGES


def check(job, options):
  if not options.zone or not options.tpu_name:
    raise LaunchError("the tpu_vm backend needs --zone and --tpu_name (the TPU VM's), "
                      "e.g. --zone=us-central2-b --tpu_name=my-tpu")
  if job.workers != 1:
    raise LaunchError(f"--workers={job.workers}: a TPU VM's hosts come from its type "
                      "(--accelerator); drop --workers")
  if job.accelerators_per_worker:
    raise LaunchError("--accelerators_per_worker is for GPUs; a TPU VM uses all its "
                      "TPU cores: drop it")
  if options.create and not _TPU_TYPE.match(job.accelerator):
    raise LaunchError(f"--accelerator={job.accelerator!r}: --tpu_create needs the TPU "
                      "type, e.g. --accelerator=v4-8")
  if not job.image:
    raise LaunchError("the tpu_vm backend needs an image: give --image or --registry")
  if bucket_and_path(job.model_dir) is None:
    given = f"--model_dir={job.model_dir!r}" if job.model_dir else "no --model_dir"
    raise LaunchError(f"{given}: a TPU VM run writes to Cloud Storage (every host mounts "
                      "the bucket); give a gs:// path, e.g. --model_dir=gs://bucket/runs/x")
  if not options.packages.strip():
    raise LaunchError("--tpu_packages is empty; give the TPU TensorFlow to install, e.g. "
                      f"--tpu_packages={TPU_PACKAGES}")


def dockerfile(job, options):
  """The TPU image: the project's, its CPU tensorflow replaced by TPU packages."""
  return (f"FROM {job.image}\n"
          "# Replaces the lock's CPU tensorflow; pinned by version, not by hash.\n"
          f"RUN {IMAGE_PYTHON} -m pip uninstall --yes tensorflow && \\\n"
          f"    {IMAGE_PYTHON} -m pip install --no-cache-dir {options.packages} \\\n"
          f"      --find-links={LIBTPU_INDEX}\n"
          f"WORKDIR {IMAGE_WORKDIR}\n")


def mount_command(bucket):
  """Shell for each host: gcsfuse (installed where missing) mounts `bucket` at
  /gcs/<bucket>, unless something is mounted there already."""
  where = shlex.quote(posixpath.join(GCS_ROOT, bucket))
  source = (f"deb [signed-by={GCSFUSE_KEYRING}] {GCSFUSE_APT} "
            "gcsfuse-$(lsb_release -c -s) main")
  install = (f'echo "{source}" | sudo tee /etc/apt/sources.list.d/gcsfuse.list && '
             f"curl -fsSL {GCSFUSE_KEY} | sudo tee {GCSFUSE_KEYRING} > /dev/null && "
             "sudo apt-get update && sudo apt-get install --yes gcsfuse")
  return (f"{{ command -v gcsfuse > /dev/null || {{ {install}; }}; }} && "
          f"sudo mkdir -p {where} && "
          f"{{ mountpoint -q {where} || "
          f"sudo gcsfuse --implicit-dirs {shlex.quote(bucket)} {where}; }}")


def _registry_login(image):
  """`gcloud auth configure-docker HOST` for Google's registries, so docker can pull."""
  host = image.split("/", 1)[0]
  if host.endswith("-docker.pkg.dev") or host == "gcr.io" or host.endswith(".gcr.io"):
    return f"sudo gcloud auth configure-docker {host} --quiet && "
  return ""


def steps(job, options):
  check(job, options)
  where = [f"--zone={options.zone}"]
  if options.project:
    where.append(f"--project={options.project}")
  tpu = ["gcloud", "compute", "tpus", "tpu-vm"]
  local_image = f"{job.name}:tpu"
  result = []
  if options.create:
    result.append(Step(argv=tuple(tpu + ["create", options.tpu_name] + where + [
        f"--accelerator-type={job.accelerator}",
        f"--version={options.runtime_version}"])))
  result.append(Step(
      argv=tuple(tpu + ["scp", f"{{dir}}/{DOCKERFILE}", f"{options.tpu_name}:{DOCKERFILE}"]
                 + where + ["--worker=all"]),
      files=((DOCKERFILE, dockerfile(job, options)),)))
  build = (_registry_login(job.image) +
           f"sudo docker build --tag={local_image} - < {DOCKERFILE}")
  result.append(Step(argv=tuple(tpu + ["ssh", options.tpu_name] + where +
                                ["--worker=all", f"--command={build}"])))
  bucket, _ = bucket_and_path(job.model_dir)
  result.append(Step(argv=tuple(tpu + ["ssh", options.tpu_name] + where + [
      "--worker=all", f"--command={mount_command(bucket)}"])))
  mount = posixpath.join(GCS_ROOT, bucket)
  train = dataclasses.replace(job, model_dir=mounted(job.model_dir)).command(
      strategy="tpu", extra=["--tpu=local"])
  run = shlex.join(["sudo", "docker", "run", "--detach", f"--name={job.name}",
                    "--privileged", "--net=host", f"--volume={mount}:{mount}",
                    local_image] + train)
  result.append(Step(argv=tuple(tpu + ["ssh", options.tpu_name] + where +
                                ["--worker=all", f"--command={run}"])))
  return tuple(result)
