"""What a launch is: one recipe, run by N workers, on one engine.

Every backend (local processes, Kubernetes, Vertex AI, Cloud TPU VMs, Slurm) turns a
`Job` into what it submits; each worker runs the same command line, the recipe's entry
(`python3 -m recipes.train`) with the recipe's Gin file, the strategy and model_dir,
and the user's recipe flags. Nothing here imports the recipes: a worker is a process.
"""

import dataclasses
import posixpath
import re
import secrets
import string
from typing import Tuple


# Where the image keeps the workspace (its sources and Gin files) and its interpreter:
# //launch/image builds it so; every cluster backend runs the recipe from here.
IMAGE_WORKDIR = "/opt/zoo"


def check_not_over_code(path, flag):
  """Refuses a path in the container that is the image's code directory, holds it (a
  mount there hides the code) or lies inside it (shadows part of it)."""
  path = posixpath.normpath(path)
  if posixpath.commonpath([path, IMAGE_WORKDIR]) in (path, IMAGE_WORKDIR):
    raise LaunchError(f"{flag}={path!r} is over the image's code ({IMAGE_WORKDIR}); give "
                      "a path outside it, e.g. /runs")
IMAGE_PYTHON = "python3"

# Where a gs://BUCKET is mounted with Cloud Storage FUSE: /gcs/BUCKET. Vertex AI mounts
# every bucket there itself; the kubernetes and tpu_vm backends mount there too. The
# trainer writes model_dir with local file APIs (the locked TensorFlow has no gs:// file
# system), so it is given the mounted path, never the URL.
GCS_ROOT = "/gcs"

# Kubernetes object names (RFC 1123 labels): lower case, digits and '-', at most 63.


class LaunchError(ValueError):
  """Bad launch input: the launcher prints its one line and exits with status 2.
  (Its own type: nothing imports recipes/, a worker is a process.)"""


_NAME = re.compile(r"[a-z]([-a-z0-9]{0,46}[a-z0-9])?")
_SUBMISSION = re.compile(r"[a-z0-9]{6}")
# A submitted name keeps the first 41 characters of the run's name: with "-" and the
# 6-character submission id it stays within the 48 of `Job.name`.
_KEPT = 41


def new_submission():
  """A fresh submission id: 6 random lower-case letters and digits (36**6 of them)."""
  return "".join(secrets.choice(string.ascii_lowercase + string.digits) for _ in range(6))


# A bucket name's characters (its length is Cloud Storage's to check).
_BUCKET = re.compile(r"[a-z0-9]([-_.a-z0-9]*[a-z0-9])?")


def bucket_and_path(model_dir):
  """(BUCKET, PATH) of a gs://BUCKET/PATH model_dir (PATH "" for the bucket's root,
  without surrounding or repeated '/'); None when model_dir is not a gs:// URL.
  LaunchError when it is one the mount cannot stand for."""
  if not model_dir.startswith("gs://"):
    return None
  bucket, _, path = model_dir[len("gs://"):].partition("/")
  if not _BUCKET.fullmatch(bucket):
    raise LaunchError(f"--model_dir={model_dir!r}: {bucket!r} is not a Cloud Storage "
                      "bucket name; give gs://BUCKET/PATH, e.g. "
                      "--model_dir=gs://my-bucket/runs/x")
  parts = [p for p in path.split("/") if p]
  if any(p in (".", "..") for p in parts):
    raise LaunchError(f"--model_dir={model_dir!r}: '.' and '..' are not folders in a "
                      "bucket; give the path without them")
  return bucket, "/".join(parts)


def mounted(model_dir, root=GCS_ROOT):
  """The path the trainer is given for model_dir: gs://BUCKET/PATH is root/BUCKET/PATH,
  where the backend mounts the bucket with Cloud Storage FUSE; a path is itself."""
  found = bucket_and_path(model_dir)
  if found is None:
    return model_dir
  return posixpath.join(root, *[p for p in found if p])


# An image reference, as the OCI distribution grammar (distribution/reference) has it:
# [DOMAIN/]PATH[:TAG][@DIGEST]; PATH's components lower case; a digest sha256 and 64
# lower-case hex digits, as registries write it. Nothing else (no spaces, no shell
# characters) can pass, so the reference is safe in a manifest or a remote shell.
_DOMAIN = r"(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*(?::[0-9]+)?)"
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_IMAGE = re.compile(rf"(?P<name>(?:{_DOMAIN}/)?{_COMPONENT}(?:/{_COMPONENT})*)"
                    r"(?::(?P<tag>[\w][\w.-]{0,127}))?(?:@(?P<digest>sha256:[0-9a-f]{64}))?")
_MAX_NAME = 255  # the grammar's limit on the repository name


@dataclasses.dataclass(frozen=True)
class ImageReference:
  """A parsed --image: repository name, tag ("" when none), digest ("" when none)."""
  name: str
  tag: str
  digest: str

  @property
  def pinned(self):
    """The reference that names this content for good: NAME@DIGEST ("" without one)."""
    return f"{self.name}@{self.digest}" if self.digest else ""


def parse_image(image):
  """The ImageReference of `image`; LaunchError, naming the fix, when it is not one."""
  found = _IMAGE.fullmatch(image) if isinstance(image, str) else None
  if not found or len(found.group("name")) > _MAX_NAME:
    why = ("a digest is sha256: and 64 lower-case hex digits" if "@" in str(image) else
           "a repository path is lower case letters, digits and . _ - separated by /")
    raise LaunchError(f"--image={image!r} is not an image reference ({why}); give "
                      "[HOST/]PATH[:TAG] or PATH@sha256:<64 hex>, e.g. "
                      "--image=us-docker.pkg.dev/my-project/zoo/model-zoo@sha256:<digest>")
  return ImageReference(found.group("name"), found.group("tag") or "",
                        found.group("digest") or "")


def image_line(image):
  """What the launcher says about the image it submits: its digest when the reference
  holds one; else a warning that the tag is mutable and how to pin it."""
  reference = parse_image(image)
  if reference.digest:
    return f"image: {reference.pinned} (digest {reference.digest})"
  tag = reference.tag or "latest"
  return (f"warning: --image={image} is the tag {tag!r}, which can be moved to other "
          f"content; pin it: `docker buildx imagetools inspect {reference.name}:{tag}` "
          f"prints its Digest, then pass --image={reference.name}@sha256:<that digest>")


@dataclasses.dataclass(frozen=True)
class Job:
  """One launch.

  name: the job's name on the engine (lower case, digits, '-'; at most 48 characters,
    so derived names such as `<name>-worker-0` stay valid Kubernetes names).
  recipe: the recipe's name, e.g. "nfnet_long_tail" (its Gin file is
    recipes/<recipe>.gin).
  recipe_args: further flags for recipes.train (--gin_bindings=..., ...).
  workers: processes that train together (multi_worker_mirrored); the first is the
    chief, the one that writes the run's outputs.
  model_dir: where the run is written: a path every worker reaches (a shared volume), or
    on Google Cloud a gs://BUCKET/PATH URL, which the backend mounts so that the trainer
    writes to GCS_ROOT/BUCKET/PATH (see `mounted`).
  image: the container image (cluster backends): an OCI reference, [HOST/]PATH[:TAG]
    or with @sha256:<digest> (`parse_image`).
  accelerator: the engine's accelerator type ("" for CPU only): Kubernetes node
    selector value (e.g. nvidia-tesla-a100), Vertex enum (NVIDIA_TESLA_A100), TPU type
    (v4-8), or Slurm GPU type.
  accelerators_per_worker: GPUs each worker uses (0: CPU).
  machine_type: the engine's machine type (Vertex: n1-standard-8, ...).
  submission: this submission's id (`new_submission`), "" for none: the engine's job
    is `submitted_name`, new on every launch (an engine never mistakes a relaunch for
    the finished or changed job of the same name), while the run itself (model_dir,
    its default path) keeps `name`, so a relaunch resumes it.
  """
  name: str
  recipe: str
  workers: int = 1
  model_dir: str = ""
  recipe_args: Tuple[str, ...] = ()
  image: str = ""
  accelerator: str = ""
  accelerators_per_worker: int = 0
  machine_type: str = ""
  submission: str = ""

  def __post_init__(self):
    if not re.fullmatch(r"[a-z][a-z0-9_]*", self.recipe):
      raise LaunchError(f"--recipe={self.recipe!r} is not a recipe name; give a target "
                        "name of //recipes, e.g. --recipe=nfnet_long_tail")
    if not _NAME.fullmatch(self.name):
      raise LaunchError(f"--name={self.name!r} is not a valid job name; use lower case "
                        "letters, digits and '-', starting with a letter, at most 48 "
                        "characters (e.g. --name=nfnet-long-tail)")
    if isinstance(self.workers, bool) or not isinstance(self.workers, int) or \
        self.workers < 1:
      raise LaunchError(f"--workers={self.workers!r} must be a whole number >= 1")
    if self.image:
      parse_image(self.image)
    if isinstance(self.accelerators_per_worker, bool) or \
        not isinstance(self.accelerators_per_worker, int) or \
        self.accelerators_per_worker < 0:
      raise LaunchError(f"--accelerators_per_worker={self.accelerators_per_worker!r} must "
                        "be a whole number >= 0")
    if self.submission and not _SUBMISSION.fullmatch(self.submission):
      raise LaunchError(f"--submission_id={self.submission!r} is not 6 lower-case "
                        "letters or digits")

  @property
  def submitted_name(self):
    """The engine's name for this submission: `<name>-<submission>` (the name cut to 41
    characters), or `name` without a submission id."""
    if not self.submission:
      return self.name
    return f"{self.name[:_KEPT].rstrip('-')}-{self.submission}"

  @property
  def gin_file(self):
    return f"recipes/{self.recipe}.gin"

  def train_args(self, strategy="multi_worker_mirrored", extra=()):
    """The flags of recipes.train every worker runs with."""
    args = [f"--gin_file={self.gin_file}", f"--strategy={strategy}"]
    if self.model_dir:
      args.append(f"--model_dir={self.model_dir}")
    return args + list(extra) + list(self.recipe_args)

  def command(self, strategy="multi_worker_mirrored", extra=(), python=IMAGE_PYTHON):
    """argv of one worker: `python3 -m recipes.train <train_args>`."""
    return [python, "-m", "recipes.train"] + self.train_args(strategy, extra)


@dataclasses.dataclass(frozen=True)
class Step:
  """One thing a cluster backend does to submit: write `files` ((name, text) pairs)
  into a fresh directory, then run `argv` there (`{dir}` in an argument is replaced by
  that directory), feeding it `stdin`; with `unless` (an argv), only where that
  command fails (e.g. create a VM unless describing it succeeds). `--dry_run` prints
  the files and the command instead of running them."""
  argv: Tuple[str, ...]
  files: Tuple[Tuple[str, str], ...] = ()
  stdin: str = ""
  unless: Tuple[str, ...] = ()
