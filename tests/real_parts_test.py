"""tests/real_parts.py: a missing real part fails the test in CI and skips it elsewhere."""

import os
import unittest
from unittest import mock

from absl.testing import absltest
from absl.testing import parameterized

from tests import real_parts


class RealPartsTest(parameterized.TestCase):

  @parameterized.parameters("true", "TRUE", " true\n")
  def test_fails_in_ci(self, value):
    with mock.patch.dict(os.environ, {"CI": value}):
      with self.assertRaisesRegex(AssertionError, r"^CI=true and Slurm is missing here; "
                                  r"apt-get install slurm-wlm munge \(CI must run"):
        real_parts.missing("Slurm", "apt-get install slurm-wlm munge")

  @parameterized.parameters(None, "", "false", "0", "1")
  def test_skips_elsewhere(self, value):
    env = {} if value is None else {"CI": value}
    with mock.patch.dict(os.environ, env, clear=True):
      with self.assertRaisesRegex(unittest.SkipTest, r"^Slurm is missing here; apt-get"):
        real_parts.missing("Slurm", "apt-get install slurm-wlm munge")


if __name__ == "__main__":
  absltest.main()
