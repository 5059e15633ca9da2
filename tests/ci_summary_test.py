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

  def summarize(self, root, log_text, sizes=None):
    log = os.path.join(root, "bazel.log")
    with open(log, "w") as f:
      f.write(log_text)
    args = [log]
    if sizes is not None:
      args.append(os.path.join(root, "sizes.txt"))
      with open(args[-1], "w") as f:
        f.write("".join(f"{label} {size}\n" for label, size in sizes.items())
                + "Loading: 0 packages loaded\n\n")  # a stray line Bazel may print
    return subprocess.run([sys.executable, os.path.join(ROOT, ".ci/summarize.py"), *args],
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

  def test_targets_over_a_third_of_their_timeout_are_named(self):
    # Bazel's timeouts: small 60 s, medium 300 s, large 900 s; a sharded target by its
    # slowest shard ("max" of the stats line), a failed one too.
    root = self.create_tempdir().full_path
    labels = ["//tests/a:quick_test", "//tests/a:slow_test", "//tests/b:sharded_test",
              "//tests/b:even_test", "//tests/c:timeout_test", "//tests/d:retried_test",
              "//tests/d:partly_cached_test"]
    for label in labels:
      write_target(root, label, [("test_x", False)])
    done = self.summarize(
        root,
        "//tests/a:quick_test                PASSED in 19.9s\n"
        "//tests/a:slow_test        (cached) PASSED in 20.1s\n"
        "//tests/b:sharded_test              PASSED in 90.0s\n"
        "  Stats over 6 runs: max = 137.3s, min = 31.0s, avg = 72.3s, dev = 37.4s\n"
        "//tests/b:even_test                 PASSED in 100.0s\n"
        "  Stats over 2 runs: max = 100.0s, min = 31.0s, avg = 65.5s, dev = 34.5s\n"
        "//tests/c:timeout_test             TIMEOUT in 60.1s\n"
        "//tests/d:retried_test             FAILED in 3 out of 3 in 1500.0s\n"
        "  Stats over 3 runs: max = 1500.0s, min = 1400.0s, avg = 1450.0s, dev = 40.8s\n"
        "//tests/d:partly_cached_test (5/6 cached) PASSED in 90.0s\n"
        "  Stats over 6 runs: max = 120.0s, min = 31.0s, avg = 72.3s, dev = 37.4s\n",
        sizes=dict(zip(labels, ["small", "small", "medium", "medium", "small", "enormous",
                                "small"])))
    self.assertEqual(done.returncode, 0, done.stderr)
    slow = [line for line in done.stdout.splitlines() if line.startswith("slow: ")]
    self.assertEqual(slow, [
        "slow: //tests/a:slow_test: 20.1 s, over a third of a small test's 60 s timeout; "
        "make it quicker or size it up (docs/developing.md)",
        "slow: //tests/b:sharded_test: 137.3 s, over a third of a medium test's 300 s "
        "timeout; make it quicker or size it up (docs/developing.md)",
        "slow: //tests/c:timeout_test: 60.1 s, over a third of a small test's 60 s "
        "timeout; make it quicker or size it up (docs/developing.md)",
        "slow: //tests/d:partly_cached_test: 120.0 s, over a third of a small test's 60 s "
        "timeout; make it quicker or size it up (docs/developing.md)",
        "slow: //tests/d:retried_test: 1500.0 s, over a third of an enormous test's 3600 s "
        "timeout; make it quicker or size it up (docs/developing.md)"])
    self.assertEqual(done.stdout.splitlines()[-1], "5 passed, 2 failed, 0 skipped")

  def test_a_flaky_target_that_passed_counts_as_passed_and_is_named(self):
    # Bazel 4.2.3's lines for a target marked flaky=True whose first attempt failed.
    root = self.create_tempdir().full_path
    for label in ("//tests/a:ok_test", "//tests/b:real_test", "//tests/c:old_test"):
      write_target(root, label, [("test_x", False)])
    done = self.summarize(
        root,
        "//tests/a:ok_test                   PASSED in 3.1s\n"
        "//tests/b:real_test                 FLAKY, failed in 1 out of 2 in 345.1s\n"
        "  Stats over 2 runs: max = 345.1s, min = 130.0s, avg = 237.6s, dev = 107.6s\n"
        "  /root/.cache/bazel/x/testlogs/tests/b/real_test/test_attempts/attempt_1.log\n"
        "//tests/c:old_test        (cached) FLAKY, failed in 2 out of 3 in 9.0s\n",
        sizes={"//tests/a:ok_test": "small", "//tests/b:real_test": "medium",
               "//tests/c:old_test": "medium"})
    self.assertEqual(done.returncode, 0, done.stderr)
    self.assertEqual(done.stdout.splitlines(), [
        "flaky: //tests/b:real_test: failed 1 of 2 runs, then passed; the failed runs' "
        "logs: bazel-testlogs/tests/b/real_test/test_attempts/",
        "flaky: //tests/c:old_test: failed 2 of 3 runs, then passed (a cached result); the "
        "failed runs' logs: bazel-testlogs/tests/c/old_test/test_attempts/",
        "slow: //tests/b:real_test: 345.1 s, over a third of a medium test's 300 s "
        "timeout; make it quicker or size it up (docs/developing.md)",
        "3 passed, 0 failed, 0 skipped"])

  def test_no_test_run_is_not_success(self):
    done = self.summarize(self.create_tempdir().full_path, "INFO: Build completed\n")
    self.assertEqual(done.stdout.splitlines()[-1], "0 passed, 0 failed, 0 skipped")
    self.assertNotEqual(done.returncode, 0)

  def test_ci_run_sets_ci_for_the_suite(self):
    with open(os.path.join(ROOT, ".ci/run")) as f:
      script = f.read()
    self.assertIn("\nexport CI=true\n", script)
    self.assertLess(script.index("export CI=true"), script.index("./bazelw test //..."))
    self.assertIn('python3 .ci/summarize.py "$log" "$sizes"', script)
    self.assertIn('attr(size, $size, tests(//...))', script)
    self.assertIn("for size in $(python3 .ci/summarize.py --sizes); do", script)

  def test_sizes_are_bazels_four(self):
    # .ci/run queries the sizes summarize.py prints: every size Bazel has, each with its
    # timeout (Bazel's test encyclopedia: small 60 s, medium 300, large 900, enormous 3600).
    done = subprocess.run([sys.executable, os.path.join(ROOT, ".ci/summarize.py"),
                           "--sizes"], capture_output=True, text=True, check=True)
    self.assertEqual(done.stdout.split(), ["small", "medium", "large", "enormous"])


if __name__ == "__main__":
  absltest.main()
