"""benchmarks/runs.py's provenance: the command as a user types it (under `bazel run`,
the target read from the runfiles path), the date, the machine and the revision."""

import json
import os
import re

from absl.testing import absltest

from benchmarks import runs


class ProvenanceTest(absltest.TestCase):

  def test_the_command_as_typed(self):
    binary = ("/root/.cache/bazel/_bazel_root/x/execroot/model_zoo/bazel-out/k8-fastbuild/"
              "bin/benchmarks/nfnet_bf16.runfiles/model_zoo/benchmarks/"
              "nfnet_bf16_benchmark.py")
    self.assertEqual(runs.command([binary, "--output=/tmp/a b.json", "--rounds=6"]),
                     "./bazelw run //benchmarks:nfnet_bf16 -- '--output=/tmp/a b.json' "
                     "--rounds=6")
    self.assertEqual(runs.command([binary]), "./bazelw run //benchmarks:nfnet_bf16")
    self.assertEqual(runs.command(["benchmarks/x.py", "--name=a;b"]),
                     "benchmarks/x.py '--name=a;b'")

  def test_provenance_names_the_date_machine_and_revision(self):
    found = runs.provenance()
    self.assertCountEqual(found, ["command", "date", "machine", "revision"])
    self.assertRegex(found["date"], r"^\d{4}-\d{2}-\d{2}$")
    self.assertRegex(found["machine"], r", \d+ logical cores$")
    self.assertTrue(found["revision"] is None or re.fullmatch(
        r"[0-9a-f]{40}(\+changes)?", found["revision"]), found["revision"])

  def test_results_are_written_as_json_and_markdown(self):
    root = self.create_tempdir().full_path
    runs.write_results(root, "transfer", {"a": [1, 2]}, "| a |")
    with open(os.path.join(root, "transfer.json")) as f:
      self.assertEqual(json.load(f), {"a": [1, 2]})
    with open(os.path.join(root, "transfer.md")) as f:
      self.assertEqual(f.read(), "| a |\n")


if __name__ == "__main__":
  absltest.main()
