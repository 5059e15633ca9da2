"""launch/image/build_context.py: a reproducible tar (sorted, root-owned, dated 0, with
its directories), gzip without a date, the tag as the sha256 of the tar, and the
one-line errors for sources the image must not hold."""

import gzip
import hashlib
import io
import os
import tarfile

from absl.testing import absltest

from launch.image import build_context


class BuildContextTest(absltest.TestCase):

  def test_tar_is_sorted_root_owned_and_dated_zero(self):
    files = {"zoo/nfnet.py": b"nfnet\n", "Dockerfile": b"FROM x\n", "recipes/data/a.py": b""}
    data = build_context.tar_bytes(files)
    self.assertEqual(build_context.tar_bytes(dict(reversed(list(files.items())))), data)
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
      members = tar.getmembers()
      self.assertEqual([m.name for m in members],
                       ["Dockerfile", "recipes", "recipes/data", "recipes/data/a.py", "zoo",
                        "zoo/nfnet.py"])
      for m in members:
        self.assertEqual((m.mtime, m.uid, m.gid, m.uname, m.gname), (0, 0, 0, "", ""))
        self.assertEqual(m.mode, 0o755 if m.isdir() else 0o644)
      self.assertEqual(tar.extractfile("zoo/nfnet.py").read(), b"nfnet\n")

  def test_gzip_and_tag(self):
    tar = build_context.tar_bytes({"zoo/a.py": b"a"})
    packed = build_context.gzip_bytes(tar)
    self.assertEqual(packed, build_context.gzip_bytes(tar))
    self.assertEqual(packed[4:8], b"\0\0\0\0")  # gzip's MTIME field
    self.assertEqual(gzip.decompress(packed), tar)
    self.assertEqual(build_context.image_tag("gpu", tar),
                     "model-zoo:gpu-" + hashlib.sha256(tar).hexdigest()[:12])

  def test_context_files(self):
    root = self.create_tempdir().full_path
    lock = os.path.join(root, "requirements_lock.txt")
    with open(lock, "w") as f:
      f.write("six==1.16.0 --hash=sha256:00\n")
    cwd = os.getcwd()
    os.chdir(root)
    try:
      os.makedirs("zoo")
      with open("zoo/a.py", "w") as f:
        f.write("x = 1\n")
      files = build_context.context_files("cpu", lock, "python:3.11.7-slim", ["zoo/a.py"])
    finally:
      os.chdir(cwd)
    self.assertEqual(sorted(files), ["Dockerfile", "requirements_lock.txt", "zoo/a.py"])
    dockerfile = files["Dockerfile"].decode()
    self.assertIn("ARG BASE_IMAGE=python:3.11.7-slim\nFROM ${BASE_IMAGE}\n", dockerfile)
    self.assertIn("--require-hashes --no-deps -r requirements_lock.txt\n", dockerfile)
    self.assertIn("COPY zoo/ zoo/\n", dockerfile)

  def test_bad_sources(self):
    for path, message in (("/etc/passwd", "is not a workspace source file"),
                          ("../x.py", "is not a workspace source file"),
                          ("tests/launch/job_test.py", "is outside launch/, recipes/"),
                          ("README.md", "is outside")):
      with self.assertRaisesRegex(build_context.ContextError, message):
        build_context.archive_name(path)
    with self.assertRaisesRegex(build_context.ContextError, "--flavour='tpu' is not one of"):
      build_context.context_files("tpu", "lock", "base", ["zoo/a.py"])
    with self.assertRaisesRegex(build_context.ContextError, "--base='a b' is not an image"):
      build_context.context_files("cpu", "lock", "a b", ["zoo/a.py"])
    with self.assertRaisesRegex(build_context.ContextError, "no sources given"):
      build_context.context_files("cpu", "lock", "base", [])


if __name__ == "__main__":
  absltest.main()
