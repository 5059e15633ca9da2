"""slurm_cluster.missing: a real part the test needs and lacks ends it as a failure
under CI=true (CI must run every real part) and as a one-line skip elsewhere."""

import os
import unittest
from unittest import mock

from absl.testing import absltest

from tests.launch import slurm_cluster


class MissingTest(absltest.TestCase):

  def test_ci_fails(self):
    with mock.patch.dict(os.environ, CI="true"):
      with self.assertRaisesRegex(AssertionError, r"^no real Slurm here: needs root "
                                  r"\(CI=true: a missing real part fails\)$"):
        slurm_cluster.missing("real Slurm", "needs root")

  def test_elsewhere_skips_in_one_line(self):
    for value in (None, "false", "1"):
      env = {k: v for k, v in os.environ.items() if k != "CI"}
      if value is not None:
        env["CI"] = value
      with mock.patch.dict(os.environ, env, clear=True):
        with self.assertRaises(unittest.SkipTest) as caught:
          slurm_cluster.missing("real Slurm", "needs root")
      self.assertEqual(str(caught.exception), "no real Slurm here: needs root")


if __name__ == "__main__":
  absltest.main()
