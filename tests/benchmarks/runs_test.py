"""benchmarks/runs.py's provenance: the command as a user types it (under `bazel run`,
the target read from the runfiles path), the date, the machine and the revision."""

import json
import os
import re

from absl.testing import absltest
import gin

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

  def test_a_path_binding_is_one_gin_string_whatever_the_path(self):
    """A stage 1 directory whose name holds quotes and a newline reaches Gin as that one
    string, not as statements of its own (issue 57: a binding built from data)."""
    hostile = os.path.join(self.create_tempdir().full_path,
                           "it's \"here\"\nSEED = 666 #\\x")
    os.makedirs(os.path.join(hostile, "checkpoints"))
    open(os.path.join(hostile, "checkpoints", "ckpt-3.index"), "w").close()
    stage1 = runs.Run(gin_files=("a.gin",), bindings=(), model_dir=hostile)
    stage2 = runs.Run(gin_files=("b.gin",), bindings=("EPOCHS = 2",), model_dir="/tmp/s2",
                      stage1=stage1)
    binding, = [a[len("--gin_bindings="):] for a in stage2.command("python")
                if "stage1_checkpoint" in a]

    @gin.configurable("decoupled")
    def stage(stage1_checkpoint=None):
      return stage1_checkpoint

    gin.clear_config()
    gin.parse_config(binding)
    self.assertEqual(stage(), os.path.join(hostile, "checkpoints", "ckpt-3"))
    gin.clear_config()

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
