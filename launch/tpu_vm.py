"""Cloud TPU VM: the project's image, run with Docker on every host of a TPU VM.

The sequence (`gcloud compute tpus tpu-vm ...`; every host at once, --worker=all):
  1. create the TPU VM (only with `create`, and only unless `describe` finds it, so a
     rerun works; `--spot` makes it a Spot VM); otherwise it must exist already;
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
  5. ssh: remove this run's earlier containers (label zoo-run=<name>: a rerun's
     container would find the TPU taken), then start the recipe in that image, detached,
     named Job.submitted_name (new on every launch; `docker logs -f <it>` follows it),
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

Hosts: only single-host TPU VMs (types whose number is at most 8, cores or chips:
v2-8, v3-8, v4-8, v5litepod-8, v6e-8, ...), so --accelerator (the type) is required.
A multi-host slice (e.g. v4-16) is refused in one line: `--tpu=local` on each of its
hosts would start independent trainings, each believing it is the chief, all writing
one model_dir; a slice needs one job across its hosts with a resolver for the pod
(TPUClusterResolver naming the TPU, and TF 2.20 with the pod's runtime), which this
backend does not build. model_dir is a gs:// path: the VM's disk goes with a
preemption. Preemption takes the VM: rerun the launch (with `--tpu_create`, which
creates it again where it is gone) and the recipe resumes from model_dir.

Values that reach a shell on the hosts (as root): the image is checked against the OCI
reference grammar; the packages are checked as pip requirements and quoted, so
`tensorflow-tpu>=2.20` stays one argument; the bucket is checked as a bucket name;
names are checked; the recipe's command is quoted word by word.
"""

import dataclasses
import posixpath
import re
import shlex

from launch.job import GCS_ROOT
from launch.job import IMAGE_PYTHON
from launch.job import IMAGE_WORKDIR
from launch.job import LaunchError
from launch.job import parse_image
from launch.job import Step
from launch.job import bucket_and_path
from launch.job import mounted

DEFAULT_RUNTIME_VERSION = "tpu-ubuntu2204-base"
TPU_PACKAGES = "tensorflow-tpu==2.20.0"
LIBTPU_INDEX = "https://storage.googleapis.com/libtpu-tf-releases/index.html"
DOCKERFILE = "Dockerfile.tpu"
RUN_LABEL = "zoo-run"  # the containers of one run, Job.name
# Cloud Storage FUSE's apt repository and signing key (its install guide, Debian/Ubuntu).
GCSFUSE_APT = "https://packages.cloud.google.com/apt"
GCSFUSE_KEY = "https://packages.cloud.google.com/apt/doc/apt-key.gpg"
GCSFUSE_KEYRING = "/usr/share/keyrings/cloud.google.asc"
_TPU_TYPE = re.compile(r"v[0-9]+[a-z]*-([0-9]+)")
SINGLE_HOST_LIMIT = 8  # the largest type number one host has (cores or chips)
# One pip requirement: a name, extras, version clauses (no spaces, quotes or shell).
_REQUIREMENT = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*(\[[A-Za-z0-9,._-]+\])?"
                          r"([<>=!~]=?[A-Za-z0-9.*+!_-]+(,[<>=!~]=?[A-Za-z0-9.*+!_-]+)*)?")
_GCLOUD_NAME = re.compile(r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?")


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
  spot: bool = False


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
  for flag, value in (("--tpu_name", options.tpu_name), ("--zone", options.zone)) + (
      (("--project", options.project),) if options.project else ()):
    if not _GCLOUD_NAME.fullmatch(value):
      raise LaunchError(f"{flag}={value!r} is not a Google Cloud name (lower case, digits "
                        "and '-')")
  if not re.fullmatch(r"[a-z0-9][-a-z0-9._]*", options.runtime_version):
    raise LaunchError(f"--tpu_runtime_version={options.runtime_version!r} is not a TPU "
                      f"software version, e.g. {DEFAULT_RUNTIME_VERSION}")
  found = _TPU_TYPE.fullmatch(job.accelerator)
  if not found:
    raise LaunchError(f"--accelerator={job.accelerator!r}: the tpu_vm backend needs the "
                      "TPU VM's type, e.g. --accelerator=v4-8")
  if int(found.group(1)) > SINGLE_HOST_LIMIT:
    raise LaunchError(f"--accelerator={job.accelerator} is a multi-host slice; the tpu_vm "
                      f"backend runs single-host TPU VMs only (at most -{SINGLE_HOST_LIMIT},"
                      " e.g. v4-8)")
  if not job.image:
    raise LaunchError("the tpu_vm backend needs an image: give --image or --registry")
  parse_image(job.image)  # the OCI grammar: nothing a root shell on the hosts reads
  if bucket_and_path(job.model_dir) is None:
    given = f"--model_dir={job.model_dir!r}" if job.model_dir else "no --model_dir"
    raise LaunchError(f"{given}: a TPU VM run writes to Cloud Storage (every host mounts "
                      "the bucket); give a gs:// path, e.g. --model_dir=gs://bucket/runs/x")
  if not options.packages.strip():
    raise LaunchError("--tpu_packages is empty; give the TPU TensorFlow to install, e.g. "
                      f"--tpu_packages={TPU_PACKAGES}")
  for requirement in options.packages.split():
    if not _REQUIREMENT.fullmatch(requirement):
      raise LaunchError(f"--tpu_packages: {requirement!r} is not a pip requirement "
                        "(NAME[EXTRAS][OP VERSION,...], space-separated), e.g. "
                        "--tpu_packages='tensorflow-tpu>=2.20 libtpu==0.0.14'")


def dockerfile(job, options):
  """The TPU image: the project's, its CPU tensorflow replaced by TPU packages."""
  return (f"FROM {job.image}\n"
          "# Replaces the lock's CPU tensorflow; pinned by version, not by hash.\n"
          f"RUN {IMAGE_PYTHON} -m pip uninstall --yes tensorflow && \\\n"
          f"    {IMAGE_PYTHON} -m pip install --no-cache-dir "
          f"{' '.join(shlex.quote(p) for p in options.packages.split())} \\\n"
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
    return f"sudo gcloud auth configure-docker {shlex.quote(host)} --quiet && "
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
    create = tpu + ["create", options.tpu_name] + where + [
        f"--accelerator-type={job.accelerator}", f"--version={options.runtime_version}"]
    result.append(Step(argv=tuple(create + (["--spot"] if options.spot else [])),
                       unless=tuple(tpu + ["describe", options.tpu_name] + where)))
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
  label = f"{RUN_LABEL}={job.name}"
  earlier = (f"sudo docker ps --all --quiet --filter label={label} | "
             "xargs --no-run-if-empty sudo docker rm --force && ")
  run = earlier + shlex.join(["sudo", "docker", "run", "--detach",
                              f"--name={job.submitted_name}", f"--label={label}",
                              "--privileged", "--net=host", f"--volume={mount}:{mount}",
                              local_image] + train)
  result.append(Step(argv=tuple(tpu + ["ssh", options.tpu_name] + where +
                                ["--worker=all", f"--command={run}"])))
  return tuple(result)
