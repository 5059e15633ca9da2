"""What a test does when a real part it needs (a data set, Slurm, podman, root) is
missing: in CI (the environment variable CI is 'true', as CI services set it and
.ci/run does) the test fails, so a green CI run means every real part ran; elsewhere it
skips with one line that names the part and how to get it.
"""

import os
import unittest


def in_ci():
  return os.environ.get("CI", "").strip().lower() == "true"


def missing(part, fix):
  """Fails (CI) or skips (elsewhere) the calling test: `part` is missing, `fix` gets it."""
  message = f"{part} is missing here; {fix}"
  print(f"real part missing: {message}", flush=True)  # .ci/summarize.py reads this line
  if in_ci():
    raise AssertionError(f"CI=true and {message} (CI must run every real part)")
  raise unittest.SkipTest(message)
