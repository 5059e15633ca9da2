"""./bazelw before `run` and `test`: installs Debian's dataset-fashion-mnist when it is
missing and it may (root, or sudo without a password), and otherwise leaves it alone.
apt-get, id, sudo and bazel are recording stand-ins on PATH: nothing is installed."""

import os
import stat
import subprocess

from absl.testing import absltest
from absl.testing import parameterized

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if os.environ.get("TEST_SRCDIR"):
  ROOT = os.path.join(os.environ["TEST_SRCDIR"], os.environ.get("TEST_WORKSPACE",
                                                                "model_zoo"))


def stub(folder, name, body):
  path = os.path.join(folder, name)
  with open(path, "w") as f:
    f.write("#!/bin/sh\n" + body + "\n")
  os.chmod(path, os.stat(path).st_mode | stat.S_IEXEC)


class BazelwTest(parameterized.TestCase):

  def bazelw(self, *args, uid=0, sudo=False, data_present=False):
    tmp = self.create_tempdir().full_path
    bin_dir, record = os.path.join(tmp, "bin"), os.path.join(tmp, "calls")
    os.makedirs(bin_dir)
    stub(bin_dir, "bazel", f'echo "bazel $*" >> {record}')
    stub(bin_dir, "apt-get", f'echo "apt-get $*" >> {record}')
    stub(bin_dir, "id", f"echo {uid}")
    stub(bin_dir, "sudo", f'if [ "$1" = -n ]; then shift; fi; '
                          f'{"" if sudo else "exit 1;"} "$@"')
    data = os.path.join(tmp, "fashion-mnist")
    if data_present:
      os.makedirs(data)
    env = dict(os.environ, PATH=bin_dir + os.pathsep + os.environ["PATH"],
               BAZELW_FASHION_MNIST_DIR=data)
    done = subprocess.run([os.path.join(ROOT, "bazelw"), *args], env=env,
                          capture_output=True, text=True, check=False)
    self.assertEqual(done.returncode, 0, done.stderr)
    calls = []
    if os.path.exists(record):
      with open(record) as f:
        calls = f.read().splitlines()
    return calls, done.stderr

  @parameterized.parameters("run", "test")
  def test_installs_the_data_set_as_root(self, command):
    calls, said = self.bazelw(command, "//recipes:nfnet_long_tail")
    self.assertEqual(calls, ["apt-get install -y -qq dataset-fashion-mnist",
                             f"bazel {command} //recipes:nfnet_long_tail"])
    self.assertIn("installing Debian's dataset-fashion-mnist", said)

  def test_installs_with_sudo(self):
    calls, _ = self.bazelw("--nosystem_rc", "run", "//x", uid=1000, sudo=True)
    self.assertEqual(calls, ["apt-get install -y -qq dataset-fashion-mnist",
                             "bazel --nosystem_rc run //x"])

  def test_leaves_it_without_root_or_sudo(self):
    calls, _ = self.bazelw("run", "//x", uid=1000, sudo=False)
    self.assertEqual(calls, ["bazel run //x"])

  @parameterized.parameters(("build", False), ("run", True))
  def test_nothing_to_install(self, command, present):
    calls, _ = self.bazelw(command, "//x", data_present=present)
    self.assertEqual(calls, [f"bazel {command} //x"])


if __name__ == "__main__":
  absltest.main()
