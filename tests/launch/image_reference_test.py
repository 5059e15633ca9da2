"""--image: an OCI image reference ([HOST/]PATH[:TAG][@sha256:<64 hex>]) or one line and
exit status 2; the launcher says the digest it submits, or warns that a tag is mutable
and how to pin it. Real `python -m launch.cli` processes, a stand-in kubectl."""

import os
import shutil
import subprocess
import sys
import tempfile

from absl.testing import absltest
from absl.testing import parameterized

from launch import job

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DIGEST = "sha256:" + "0123456789abcdef" * 4
REPO = "us-docker.pkg.dev/my-project/zoo/model-zoo"

GOOD = {
    f"{REPO}@{DIGEST}": (REPO, "", DIGEST),
    f"{REPO}:cpu-0123abcd@{DIGEST}": (REPO, "cpu-0123abcd", DIGEST),
    f"{REPO}:cpu-0123abcd": (REPO, "cpu-0123abcd", ""),
    "localhost:5000/zoo/model_zoo.x": ("localhost:5000/zoo/model_zoo.x", "", ""),
    "Registry.Example.com/a__b/c-d": ("Registry.Example.com/a__b/c-d", "", ""),
    "python:3.11.7-slim-bookworm": ("python", "3.11.7-slim-bookworm", ""),
}
BAD = [
    f"{REPO}@sha256:{'0' * 63}",  # 63 hex digits
    f"{REPO}@sha256:{'0' * 65}",
    f"{REPO}@sha256:{'A' * 64}",  # upper case hex
    f"{REPO}@sha512:{'0' * 128}",
    f"{REPO}@{DIGEST}:cpu",  # tag after the digest
    "us-docker.pkg.dev/my-project/Zoo/model-zoo:1",  # upper case path
    "zoo:1;rm -rf /", "zoo:$(id)", "zoo:`id`", "zoo 1", "zoo:1\nx", "zoo|x", "zoo&", "zoo>x",
    "'zoo'", "zoo:-1", "zoo:" + "1" * 129, "/zoo", "zoo/", "zoo//x", "-zoo", "zoo:", "zoo@",
    "a" * 256,
]


def run_launcher(*args, path=None):
  env = {k: v for k, v in os.environ.items() if k != "BUILD_WORKING_DIRECTORY"}
  env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
  if path is not None:
    env["PATH"] = path
  return subprocess.run([sys.executable, "-m", "launch.cli", "--backend=kubernetes",
                         "--recipe=nfnet_long_tail", "--model_dir=gs://b/x", *args],
                        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
                        check=False)


class ImageReferenceTest(parameterized.TestCase):

  def test_references_parse(self):
    for image, (name, tag, digest) in GOOD.items():
      self.assertEqual(job.ImageReference(name, tag, digest), job.parse_image(image), image)

  @parameterized.parameters(*BAD)
  def test_bad_references_are_refused(self, image):
    with self.assertRaisesRegex(job.LaunchError, r"is not an image reference .*; give"):
      job.parse_image(image)
    with self.assertRaises(job.LaunchError):
      job.Job(name="x", recipe="nfnet_long_tail", image=image)

  def test_the_line_says_the_digest_or_how_to_pin_the_tag(self):
    self.assertEqual(f"image: {REPO}@{DIGEST} (digest {DIGEST})",
                     job.image_line(f"{REPO}:cpu-1@{DIGEST}"))
    line = job.image_line(f"{REPO}:cpu-1")
    self.assertNotIn("\n", line)
    self.assertTrue(line.startswith("warning: "), line)
    self.assertIn(f"docker buildx imagetools inspect {REPO}:cpu-1", line)
    self.assertIn(f"--image={REPO}@sha256:<that digest>", line)
    self.assertIn("'latest'", job.image_line("model-zoo"))

  def test_the_launcher_refuses_a_bad_image_in_one_line(self):
    for image in ("zoo:1;reboot", f"{REPO}@sha256:{'0' * 63}"):
      result = run_launcher(f"--image={image}", "--dry_run")
      self.assertEqual(2, result.returncode, result.stderr)
      self.assertEqual(1, len(result.stderr.splitlines()), result.stderr)
      self.assertRegex(result.stderr, r"^error: --image=.* is not an image reference")
      self.assertEqual("", result.stdout)

  def test_the_launcher_submits_the_digest_and_says_so(self):
    with tempfile.TemporaryDirectory() as tools:
      kubectl = os.path.join(tools, "kubectl")
      with open(kubectl, "w") as f:
        f.write("#!/bin/sh\nexit 0\n")
      os.chmod(kubectl, 0o755)
      path = tools + os.pathsep + os.path.dirname(shutil.which("sh"))
      pinned = run_launcher(f"--image={REPO}@{DIGEST}", path=path)
      self.assertEqual(0, pinned.returncode, pinned.stderr)
      self.assertIn(f"image: {REPO}@{DIGEST} (digest {DIGEST})\n", pinned.stderr)
      tagged = run_launcher(f"--image={REPO}:cpu-1", path=path)
      self.assertEqual(0, tagged.returncode, tagged.stderr)
      self.assertIn(f"warning: --image={REPO}:cpu-1 is the tag 'cpu-1'", tagged.stderr)
    dry = run_launcher(f"--image={REPO}@{DIGEST}", "--dry_run")
    self.assertEqual(0, dry.returncode, dry.stderr)
    self.assertIn(f"image: {REPO}@{DIGEST}", dry.stdout)  # the manifest holds the digest


if __name__ == "__main__":
  absltest.main()
