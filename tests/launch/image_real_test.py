"""The CPU image, built from //launch/image:cpu's context and run, with podman and runc.

Builds the image on a Debian base made here (debootstrap: no registry is reachable;
users keep the pinned python:3.11.7-slim-bookworm, the Dockerfile's default), runs
the tiny flagship in it with the run directory mounted and compares its metrics with
the same run on the host, then stops a run in the container with `podman kill
--signal TERM` at start-up, in training and in the final evaluation: each ends
within seconds with status 143, with a checkpoint where there was progress.

Needs root on Debian (it installs podman, runc and debootstrap from Debian's archive
when missing); elsewhere it says so in one line and skips. The base image and the
image's layers stay in podman's storage, so a second run on a machine reuses them; the
first builds them (2.6 min here on a quiet machine, mostly the lock's pip install).
"""

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

from absl.testing import absltest
from absl.testing import parameterized

from tests.recipes import cli
from tests.recipes import stopping
from tests import real_parts

SUITE = "bookworm"
BASE_PACKAGES = ("python3", "python3-venv", "ca-certificates")
TOOLS = {"podman": "podman", "runc": "runc", "debootstrap": "debootstrap"}
# crun, podman's default runtime, fails in this sandbox's hybrid cgroups; runc works.
PODMAN = ("podman", "--runtime", "runc")
# setrlimit is refused without CAP_SYS_RESOURCE: no default ulimits.
CONTAINERS_CONF = "[containers]\ndefault_ulimits = []\n"
EXIT_WITHIN = 30  # seconds, as pid1_sigterm_test
TINY_IN_IMAGE = "/opt/zoo/" + cli.TINY_GIN  # the test recipe, mounted (tests/ is not in it)
# Same wheels, same CPU, same flags: the runs do the same float32 arithmetic (measured:
# equal to the last bit). The tolerance leaves room for a reassociated multi-threaded
# reduction only; the accuracies, counts over 700 test examples, must be equal.
LOSS_RTOL = 1e-5


def why_not():
  """Why the test cannot run here (None when it can)."""
  if os.geteuid() != 0:
    return "not root: podman, runc and debootstrap are installed and run as root"
  if not os.path.exists("/etc/debian_version") or not shutil.which("apt-get"):
    return "not Debian: podman, runc and debootstrap come from Debian's archive"
  return None


def sh(*args, timeout=900, **kwargs):
  done = subprocess.run(list(args), capture_output=True, text=True, timeout=timeout,
                        check=False, **kwargs)
  if done.returncode:
    raise AssertionError(f"{' '.join(args)} exited {done.returncode}: "
                         f"{(done.stdout + done.stderr)[-3000:]}")
  return done.stdout


def install_tools():
  missing = [pkg for tool, pkg in TOOLS.items() if not shutil.which(tool)]
  if missing:
    sh("apt-get", "-o", "DPkg::Lock::Timeout=600", "install", "-y", "--no-install-recommends",
       *missing, env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))


def debian_mirror():
  """The Debian mirror apt uses (its sources), for debootstrap."""
  texts = []
  for directory, names in (("/etc/apt", ["sources.list"]),
                           ("/etc/apt/sources.list.d", None)):
    if os.path.isdir(directory):
      for name in names or sorted(os.listdir(directory)):
        texts.append(stopping.read(os.path.join(directory, name)))
  for text in texts:
    for uri in re.findall(r"^URIs:\s*(\S+)|^deb\s+(?:\[[^]]*\]\s+)?(\S+)", text, re.M):
      found = uri[0] or uri[1]
      if "security" not in found:
        return found
  return "http://deb.debian.org/debian"


def base_image(work):
  """A local Debian base with python3 and venv, made once per machine (its tag names
  the recipe, so a changed recipe makes a new one)."""
  mirror = debian_mirror()
  recipe = f"{SUITE} minbase {','.join(BASE_PACKAGES)} {mirror}"
  tag = f"localhost/zoo-test-base:{SUITE}-{hashlib.sha256(recipe.encode()).hexdigest()[:12]}"
  if subprocess.run([*PODMAN, "image", "exists", tag], check=False).returncode == 0:
    return tag
  rootfs = os.path.join(tempfile.mkdtemp(dir=work), "rootfs")
  sh("debootstrap", "--variant=minbase", "--include=" + ",".join(BASE_PACKAGES), SUITE,
     rootfs, mirror)
  with subprocess.Popen(["tar", "-C", rootfs, "-c", "."], stdout=subprocess.PIPE) as tar:
    sh(*PODMAN, "import", "--change",
       "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "-", tag,
       stdin=tar.stdout)
  shutil.rmtree(rootfs, ignore_errors=True)
  return tag


def build_image(base):
  """The CPU image from //launch/image:cpu's context (its layers cached by podman: the
  lock's install is redone only when the base or the lock changes); its tag."""
  # One tag, moved by each build: earlier builds' layers stay cached, not tagged.
  tag = "localhost/zoo-test-image:cpu"
  with open(os.path.join("launch", "image", "cpu_context.tar.gz"), "rb") as context:
    # The host's CA bundle for pip: this machine reaches PyPI through an intercepting
    # proxy (a user's own build needs no volume).
    sh(*PODMAN, "build", "--build-arg", f"BASE_IMAGE={base}", "--volume",
       "/etc/ssl/certs:/etc/ssl/certs:ro", "-t", tag, "-", stdin=context, timeout=1800)
  return tag


class ImageRealTest(parameterized.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.skip = why_not()
    if cls.skip:
      print(f"image_real_test skipped: {cls.skip}", file=sys.stderr)
      return
    began = time.monotonic()
    cls.work = os.environ.get("TEST_TMPDIR") or "/tmp"
    conf = os.path.join(cls.work, "containers.conf")
    with open(conf, "w") as f:
      f.write(CONTAINERS_CONF)
    os.environ["CONTAINERS_CONF"] = conf
    install_tools()
    cls.image = build_image(base_image(cls.work))
    print(f"image {cls.image} ready in {time.monotonic() - began:.0f} s", file=sys.stderr)

  def setUp(self):
    super().setUp()
    if self.skip:
      real_parts.missing("podman with a local base image", self.skip)

  def container(self, name, run_dir, stdout, stderr):
    """`podman run` of the tiny flagship in the image, run_dir mounted at /runs (a Popen).
    A container of that name left by a killed run is removed first."""
    remove = [*PODMAN, "rm", "-f", name]
    subprocess.run(remove, capture_output=True, check=False)
    self.addCleanup(subprocess.run, remove, capture_output=True, check=False)
    return subprocess.Popen(
        [*PODMAN, "run", "--rm", "--name", name, "-v", f"{run_dir}:/runs",
         "-v", f"{os.path.join(cli.ROOT, cli.TINY_GIN)}:{TINY_IN_IMAGE}:ro", self.image,
         "python3", "-m", "recipes.train", cli.TINY, "--model_dir=/runs/run"],
        stdout=stdout, stderr=stderr)

  def test_image_environment(self):
    config = json.loads(sh(*PODMAN, "image", "inspect", self.image))[0]["Config"]
    env = dict(e.split("=", 1) for e in config["Env"])
    self.assertEqual("/opt/zoo", config["WorkingDir"])
    self.assertEqual("/opt/zoo", env["PYTHONPATH"])
    self.assertTrue(env["PATH"].startswith("/opt/venv/bin:"), env["PATH"])
    self.assertNotIn("NVIDIA_VISIBLE_DEVICES", env)  # the CPU flavour
    out = sh(*PODMAN, "run", "--rm", self.image, "python3", "-c",
             "import sys, tensorflow as tf; print(sys.prefix, tf.__version__)")
    self.assertEqual("/opt/venv", out.split()[-2])

  def test_flagship_in_the_image_matches_the_host(self):
    root = self.create_tempdir().full_path
    with open(os.path.join(root, "out"), "w") as out:
      container = self.container("zoo-test-match", root, out, subprocess.STDOUT)
      host = cli.finish(cli.spawn(cli.TINY, f"--model_dir={os.path.join(root, 'host')}"))
      self.assertEqual(0, container.wait(timeout=600), stopping.read(out.name)[-3000:])
    self.assertEqual(0, host.returncode, host.stderr[-3000:])
    inside, outside = cli.metrics(os.path.join(root, "run")), cli.metrics(
        os.path.join(root, "host"))
    for key in ("top1", "balanced_accuracy", "many_shot_accuracy", "medium_shot_accuracy",
                "few_shot_accuracy"):
      self.assertAlmostEqual(outside[key], inside[key], delta=0.5 / 700, msg=key)
    self.assertLess(abs(inside["final_train_loss"] - outside["final_train_loss"]),
                    LOSS_RTOL * abs(outside["final_train_loss"]))
    print(f"image vs host: top1 {inside['top1']} / {outside['top1']}, final train loss "
          f"{inside['final_train_loss']} / {outside['final_train_loss']}", file=sys.stderr)

  @parameterized.parameters(*stopping.PHASES)
  def test_podman_kill_ends_the_run_within_seconds(self, phase):
    root = self.create_tempdir().full_path
    name = "zoo-test-" + phase.replace(" ", "-")
    stdout = os.path.join(root, "stdout")
    with open(stdout, "w") as out, open(os.path.join(root, "stderr"), "w") as err:
      container = self.container(name, root, out, err)
    alive = lambda: container.poll() is None
    pid = [None]

    def started():
      found = subprocess.run([*PODMAN, "inspect", "--format", "{{.State.Pid}}", name],
                             capture_output=True, text=True, check=False).stdout.strip()
      pid[0] = int(found) if found.isdigit() and int(found) else None
      return pid[0]
    self.assertTrue(stopping.wait_for(started, 120, alive, interval=0.2), "no container")
    problem = stopping.reach(phase, pid[0], stdout, os.path.join(root, "run"), alive)
    self.assertIsNone(problem, problem)
    sh(*PODMAN, "kill", "--signal", "TERM", name)
    sent = time.monotonic()
    try:
      code = container.wait(timeout=EXIT_WITHIN)
    except subprocess.TimeoutExpired:
      self.fail(f"{phase}: the container still runs {EXIT_WITHIN} s after SIGTERM")
    print(f"container, {phase}: exit {code} {time.monotonic() - sent:.1f} s after SIGTERM",
          file=sys.stderr)
    self.assertEqual(143, code, stopping.read(os.path.join(root, "stderr"))[-2000:])
    model_dir = os.path.join(root, "run")
    self.assertFalse(os.path.exists(os.path.join(model_dir, "metrics.json")))
    kept = stopping.latest_checkpoint(model_dir)
    if phase == "start-up":
      self.assertIsNone(kept)
    elif phase == "training":
      self.assertNotIn(kept, (None, "ckpt-0"), "the steps trained were not saved")
    else:
      self.assertEqual(stopping.LAST_CHECKPOINT, kept)


if __name__ == "__main__":
  absltest.main()
