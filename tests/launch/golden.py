"""Golden files: what a backend generates for a fixed job, compared exactly with
tests/launch/data/golden/<name>.

To regenerate them after a deliberate change, run the backend's test from the
workspace with UPDATE_GOLDEN=1, then review the diff:
    UPDATE_GOLDEN=1 PYTHONPATH=. zpy tests/launch/kubernetes_test.py
(likewise vertex_test, tpu_vm_test, slurm_test); the test then writes the files in
the source tree instead of comparing.
"""

import os

GOLDEN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "golden")


def check(test, name, text):
  """Fails `test` unless `text` is the golden file `name` (or rewrites it)."""
  path = os.path.join(GOLDEN, name)
  if os.environ.get("UPDATE_GOLDEN") == "1":
    with open(path, "w") as f:
      f.write(text)
    return
  with open(path) as f:
    expected = f.read()
  test.assertMultiLineEqual(expected, text, f"{name} differs from the golden file; if the "
                            "change is meant, regenerate it (tests/launch/golden.py)")
