"""Writes a Docker build context for one flavour of the project's image, and its tag.

    build_context.py --flavour=gpu --lock=third_party/py/requirements_gpu_lock.txt \
        --base=python:3.11.7-slim-bookworm --context=gpu_context.tar.gz \
        --tag_file=gpu_image.txt recipes/train.py recipes/nfnet_long_tail.gin ...

The context (a gzipped tar, for `docker build - < gpu_context.tar.gz`) holds a
Dockerfile, the flavour's lock and the given sources at their workspace paths. The
Dockerfile installs the lock as the Bazel environment does (`pip install
--require-hashes --no-deps`) into the base image's Python, then copies the sources to
launch.job.IMAGE_WORKDIR, so `python3 -m recipes.train --gin_file=...` runs there.

Reproducible: entries (files 0644, their directories 0755) sorted by path, mtime 0,
uid/gid 0, gzip mtime 0 and no file name, so equal inputs give equal bytes. The tag is
`model-zoo:<flavour>-<first 12 hex digits of the sha256 of the uncompressed tar>`.
Bad input: one line on stderr, exit status 2.
"""

import argparse
import gzip
import hashlib
import io
import os
import sys
import tarfile

# launch.job.IMAGE_WORKDIR and IMAGE_PYTHON (this tool runs alone, so they are repeated;
# //tests/launch:image_test checks they agree).
WORKDIR = "/opt/zoo"
PYTHON = "python3"
REPOSITORY = "model-zoo"
FLAVOURS = ("cpu", "gpu")
# The workspace's top-level directories an image holds; never tests/.
SOURCE_ROOTS = ("launch", "recipes", "tricks", "zoo")
EXIT_BAD_INPUT = 2

# The base image is a build argument: `docker build --build-arg BASE_IMAGE=...` swaps it
# (any Debian-like image with python3 and its venv module; the default is the Python the
# lock is made for). The lock goes into a virtual environment, first on PATH, so
# `python3` is its interpreter on any base (Debian's own python3 refuses pip installs).
BASE_ARG = "BASE_IMAGE"
VENV = "/opt/venv"
_PATH = f"{VENV}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# What each flavour's environment holds beyond Python's settings. GPU: the NVIDIA
# container toolkit's hooks (Docker, enroot under Slurm's pyxis) mount the driver only
# when NVIDIA_VISIBLE_DEVICES is set, its compute and utility (nvidia-smi) parts only as
# NVIDIA_DRIVER_CAPABILITIES says; GKE mounts the driver at /usr/local/nvidia, where the
# loader finds libcuda only through LD_LIBRARY_PATH (TensorFlow would run on the CPU).
ENVIRONMENT = {
    "cpu": (("PATH", _PATH),),
    "gpu": (("PATH", _PATH),
            ("LD_LIBRARY_PATH", "/usr/local/nvidia/lib64:/usr/local/nvidia/lib"),
            ("NVIDIA_VISIBLE_DEVICES", "all"),
            ("NVIDIA_DRIVER_CAPABILITIES", "compute,utility")),
}
_BASE_NOTE = ("# Another base: docker build --build-arg BASE_IMAGE=<image with python3 and "
              "venv> ...\n")

_NOTES = {
    "cpu": "# CPU: TensorFlow runs on the CPU.\n",
    "gpu": ("# GPU: CUDA and cuDNN come from the lock's nvidia-* wheels\n"
            "# (tensorflow[and-cuda]); the host gives only the NVIDIA driver (docker run\n"
            "# --gpus all; on Kubernetes, the NVIDIA device plugin).\n"),
}


class ContextError(ValueError):
  """Bad input: the message is the line printed."""


def dockerfile(flavour, base, lock_name, roots):
  """The Dockerfile's text: the base (a build argument, `base` its default), a virtual
  environment holding the lock installed by hash, the flavour's environment, the
  sources."""
  copies = "".join(f"COPY {root}/ {root}/\n" for root in sorted(roots))
  environment = "".join(f" \\\n    {name}={value}" for name, value in ENVIRONMENT[flavour])
  return (f"# model-zoo:{flavour}, written by //launch/image (launch/image/build_context.py).\n"
          f"{_NOTES[flavour]}"
          f"{_BASE_NOTE}"
          f"ARG {BASE_ARG}={base}\n"
          f"FROM ${{{BASE_ARG}}}\n"
          f"ENV PYTHONUNBUFFERED=1 PYTHONPATH={WORKDIR} VIRTUAL_ENV={VENV}{environment}\n"
          f"WORKDIR {WORKDIR}\n"
          f"COPY {lock_name} ./\n"
          f"RUN {PYTHON} -m venv {VENV} && \\\n"
          f"    {VENV}/bin/{PYTHON} -m pip install --disable-pip-version-check --no-input \\\n"
          "      --no-cache-dir --root-user-action=ignore \\\n"
          f"      --require-hashes --no-deps -r {lock_name}\n"
          f"{copies}")


def tar_bytes(files):
  """An uncompressed tar of `files` ({archive path: bytes}) and their directories, sorted
  by path, owned by root (uid/gid 0), mtime 0, files 0644 and directories 0755."""
  directories = {os.path.dirname(name) for name in files}
  for directory in list(directories):
    while directory:
      directories.add(directory)
      directory = os.path.dirname(directory)
  directories.discard("")
  out = io.BytesIO()
  with tarfile.open(fileobj=out, mode="w", format=tarfile.USTAR_FORMAT) as tar:
    for name in sorted(directories | set(files)):
      info = tarfile.TarInfo(name)
      info.mtime = 0
      info.uid = info.gid = 0
      info.uname = info.gname = ""
      if name in files:
        info.size = len(files[name])
        info.mode = 0o644
        tar.addfile(info, io.BytesIO(files[name]))
      else:
        info.type = tarfile.DIRTYPE
        info.mode = 0o755
        tar.addfile(info)
  return out.getvalue()


def gzip_bytes(data):
  """`data` gzipped with no file name and mtime 0."""
  return gzip.compress(data, compresslevel=9, mtime=0)


def image_tag(flavour, tar):
  return f"{REPOSITORY}:{flavour}-{hashlib.sha256(tar).hexdigest()[:12]}"


def archive_name(path):
  """The workspace path `path` (as Bazel gives a source file) as a context entry."""
  name = os.path.normpath(path)
  if os.path.isabs(path) or name.startswith("..") or name.startswith("bazel-out"):
    raise ContextError(f"source {path!r} is not a workspace source file; pass files of "
                       f"{', '.join(SOURCE_ROOTS)} by their workspace paths")
  if name.split(os.sep, 1)[0] not in SOURCE_ROOTS or os.sep not in name:
    roots = ", ".join(r + "/" for r in SOURCE_ROOTS)
    raise ContextError(f"source {path!r} is outside {roots}; the image holds those alone "
                       "(no tests/)")
  return name


def context_files(flavour, lock, base, sources):
  """{archive path: bytes}: the Dockerfile, the lock and every source."""
  if flavour not in FLAVOURS:
    raise ContextError(f"--flavour={flavour!r} is not one of {', '.join(FLAVOURS)}")
  if not base or any(c.isspace() for c in base):
    raise ContextError(f"--base={base!r} is not an image reference; give one without "
                       "spaces, e.g. --base=python:3.11.7-slim-bookworm")
  if not sources:
    raise ContextError("no sources given; pass the files of recipes/, zoo/, tricks/, launch/")
  lock_name = os.path.basename(lock)
  files = {}
  for path in sources:
    name = archive_name(path)
    if name in files:
      raise ContextError(f"source {path!r} is given twice; pass each file once")
    with open(path, "rb") as f:
      files[name] = f.read()
  roots = {name.split(os.sep, 1)[0] for name in files}
  with open(lock, "rb") as f:
    files[lock_name] = f.read()
  files["Dockerfile"] = dockerfile(flavour, base, lock_name, roots).encode()
  return files


def build(flavour, lock, base, sources):
  """(gzipped context, tag) for the flavour."""
  tar = tar_bytes(context_files(flavour, lock, base, sources))
  return gzip_bytes(tar), image_tag(flavour, tar)


def main(argv):
  parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
  parser.add_argument("--flavour", required=True, help="cpu or gpu")
  parser.add_argument("--lock", required=True, help="the flavour's hash-locked requirements")
  parser.add_argument("--base", required=True, help="the base image (Python 3.11.7)")
  parser.add_argument("--context", required=True, help="where the .tar.gz goes")
  parser.add_argument("--tag_file", required=True, help="where the image tag goes")
  parser.add_argument("sources", nargs="*", help="workspace source files")
  args = parser.parse_args(argv)
  try:
    context, tag = build(args.flavour, args.lock, args.base, args.sources)
  except ContextError as e:
    print(f"build_context: {e}", file=sys.stderr)
    return EXIT_BAD_INPUT
  except OSError as e:
    print(f"build_context: cannot read {e.filename}: {e.strerror}; pass files that exist",
          file=sys.stderr)
    return EXIT_BAD_INPUT
  with open(args.context, "wb") as f:
    f.write(context)
  with open(args.tag_file, "w") as f:
    f.write(tag + "\n")
  return 0


if __name__ == "__main__":
  sys.exit(main(sys.argv[1:]))
