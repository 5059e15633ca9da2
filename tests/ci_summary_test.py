""".ci/run's closing line: skipped tests counted apart from passed ones, and CI=true
set for the suite (a test whose real part is missing fails there)."""

import os
import subprocess
import sys

from absl.testing import absltest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if os.environ.get("TEST_SRCDIR"):
  ROOT = os.path.join(os.environ["TEST_SRCDIR"], os.environ.get("TEST_WORKSPACE",
                                                                "model_zoo"))

CASE = '<testcase name="{}" status="{}" result="{}" time="0.1" classname="T"></testcase>'


def write_target(root, label, cases, log=""):
  package, name = label[2:].split(":")
  folder = os.path.join(root, "bazel-testlogs", package, name)
  os.makedirs(folder)
  body = "".join(CASE.format(n, "notrun" if skipped else "run",
                             "suppressed" if skipped else "completed")
                 for n, skipped in cases)
  with open(os.path.join(folder, "test.xml"), "w") as f:
    f.write(f'<?xml version="1.0"?><testsuites><testsuite name="T">{body}</testsuite>'
            "</testsuites>")
  with open(os.path.join(folder, "test.log"), "w") as f:
    f.write(log)


class CiSummaryTest(absltest.TestCase):

  def summarize(self, root, log_text):
    log = os.path.join(root, "bazel.log")
    with open(log, "w") as f:
      f.write(log_text)
    return subprocess.run([sys.executable, os.path.join(ROOT, ".ci/summarize.py"), log],
                          cwd=root, capture_output=True, text=True, check=False)

  def test_skips_are_counted_apart(self):
    root = self.create_tempdir().full_path
    write_target(root, "//tests/a:ok_test", [("test_x", False), ("test_session", True)])
    write_target(root, "//tests/b:real_test", [("test_y", True), ("test_z", True)],
                 log="real part missing: a real Slurm is missing here; apt-get install "
                 "slurm-wlm munge\n")
    write_target(root, "//tests/c:bad_test", [("test_w", False)])
    done = self.summarize(root, "//tests/a:ok_test                PASSED in 3.1s\n"
                          "//tests/b:real_test     (cached) PASSED in 9.0s\n"
                          "//tests/c:bad_test               FAILED in 1.0s\n")
    self.assertEqual(done.returncode, 0, done.stderr)
    lines = done.stdout.splitlines()
    self.assertEqual(lines[-1], "1 passed, 1 failed, 1 skipped")
    self.assertEqual(lines[0], "skipped: //tests/b:real_test: 2 test(s) (test_y, test_z): "
                     "a real Slurm is missing here; apt-get install slurm-wlm munge")

  def test_no_test_run_is_not_success(self):
    done = self.summarize(self.create_tempdir().full_path, "INFO: Build completed\n")
    self.assertEqual(done.stdout.splitlines()[-1], "0 passed, 0 failed, 0 skipped")
    self.assertNotEqual(done.returncode, 0)

  def test_ci_run_sets_ci_for_the_suite(self):
    with open(os.path.join(ROOT, ".ci/run")) as f:
      script = f.read()
    self.assertIn("\nexport CI=true\n", script)
    self.assertLess(script.index("export CI=true"), script.index("./bazelw test //..."))
    self.assertIn('python3 .ci/summarize.py "$log"', script)


if __name__ == "__main__":
  absltest.main()
