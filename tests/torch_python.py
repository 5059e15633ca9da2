"""The Python with torch and torchvision that tests of the torchvision peers run.

torch is not a project dependency (docs/input.md: PyPI's torch wheel is the CUDA build,
5.5 GB installed with its nvidia-* wheels). The environment variable ZOO_TORCH_PYTHON
names an interpreter that has both; .bazelrc passes it to tests under Bazel, and
.ci/run installs one from third_party/py/requirements_torch_lock.txt:

    ZOO_TORCH_PYTHON=/path/to/torch-env/bin/python \
        ./bazelw test //tests/benchmarks:input_benchmark_test

Unset, the tests that need it skip, saying so in one line; set to something that is
not an executable, they fail (the run asked for them).
"""

import os

ENV = "ZOO_TORCH_PYTHON"


def interpreter():
  """The torch interpreter's path, or None when ZOO_TORCH_PYTHON is unset or empty.
  Raises ValueError when it names no executable."""
  python = os.environ.get(ENV)
  if not python:
    return None
  if not (os.path.isfile(python) and os.access(python, os.X_OK)):
    raise ValueError(f"{ENV}={python!r} is not an executable; name a Python with torch "
                     "and torchvision, or unset it to skip the torchvision tests")
  return python


def skip_unless_available(test):
  """Skips `test` (a unittest.TestCase) in one line unless ZOO_TORCH_PYTHON is set."""
  if interpreter() is None:
    test.skipTest(f"{ENV} unset: no torch interpreter to run torchvision (set it; under "
                  "Bazel too: .bazelrc passes it on; .ci/run installs one)")
