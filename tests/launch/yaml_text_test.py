"""launch.yaml_text: manifests read back as written, in the order written, one
document each, without anchors, long strings on one line."""

from absl.testing import absltest
import yaml

from launch import yaml_text


class YamlTextTest(absltest.TestCase):

  def test_documents_read_back_in_order_without_aliases(self):
    shared = {"name": "tensorflow", "args": ["--gin_bindings=" + "x" * 300]}
    first = {"kind": "Service", "spec": {"z": 1, "a": shared}}
    second = {"kind": "Job", "spec": {"containers": [shared, shared]}}
    text = yaml_text.dump(first, second)
    self.assertEqual(list(yaml.safe_load_all(text)), [first, second])
    self.assertNotIn("&", text)  # no anchors: a reader of one document sees it whole
    self.assertNotIn("*", text)
    self.assertEqual(text.count("\n---\n"), 1)
    self.assertLess(text.index("z: 1"), text.index("a:"))  # the order written
    self.assertIn("- --gin_bindings=" + "x" * 300 + "\n", text)  # one line


if __name__ == "__main__":
  absltest.main()
