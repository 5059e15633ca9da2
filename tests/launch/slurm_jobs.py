"""What the real-Slurm tests share: a cluster of `NODES` nodes (slurm_cluster.Cluster)
started once for the test class, this interpreter as the jobs' `python3`, the local
two-worker run of the tiny flagship they compare with, and the launcher itself
(`python -m launch.cli --backend=slurm`) submitting to the cluster."""

import contextlib
import glob
import io
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from unittest import mock

import tensorflow as tf

from launch import job as job_lib
from launch import local
from tests import real_parts
from tests.launch import slurm_cluster
from tests.recipes import cli

# Three epochs: a stop after the first epoch's checkpoint lands well before the end.
RECIPE_ARGS = (cli.TINY, *cli.DETERMINISTIC_MODEL, "--gin_bindings=EPOCHS = 3")
STEPS_PER_EPOCH = 8  # the tiny flagship's
ENDED = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY",
         "BOOT_FAIL", "DEADLINE", "PREEMPTED")
CHECKPOINT = re.compile(r"ckpt-(\d+)\.index$")


class SlurmJobsTest(tf.test.TestCase):
  """A real Slurm cluster of NODES nodes for the class's tests, and the local run."""

  NODES = 1

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.began = time.monotonic()
    reason = slurm_cluster.install(cls.NODES)
    if reason:
      part = "real Slurm" if cls.NODES == 1 else f"real Slurm cluster of {cls.NODES} nodes"
      real_parts.missing(part, reason)
    cls.root = os.path.join(os.environ.get("TEST_TMPDIR") or "/tmp",
                            f"slurm-real-{os.getpid()}")
    os.makedirs(cls.root)
    # slurmd's sockets live in its spool directory, whose path must be short (a Unix
    # socket's path has at most 108 bytes; Bazel's TEST_TMPDIR is longer).
    cluster_dir = tempfile.mkdtemp(prefix=f"{slurm_cluster.NETNS}-", dir="/tmp")
    cls.addClassCleanup(shutil.rmtree, cluster_dir, ignore_errors=True)
    cls.cluster = slurm_cluster.Cluster(cluster_dir, nodes=cls.NODES)
    cls.cluster.__enter__()
    cls.addClassCleanup(cls.cluster.__exit__, None, None, None)
    print(f"the cluster of {cls.NODES} node(s) was up after "
          f"{time.monotonic() - cls.began:.0f} s")
    # `python3` on the job's PATH: this interpreter (the workers' environment).
    cls.bin = os.path.join(cls.root, "bin")
    os.makedirs(cls.bin)
    with open(os.path.join(cls.bin, "python3"), "w") as f:
      f.write(f"#!/bin/sh\nexec {sys.executable} \"$@\"\n")
    os.chmod(os.path.join(cls.bin, "python3"), 0o755)
    started = time.monotonic()
    cls.local_run = os.path.join(cls.root, "local")
    out = io.StringIO()
    with mock.patch.dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"):
      status = local.launch(job_lib.Job("tiny", "nfnet_long_tail_digits", workers=2,
                                        model_dir=cls.local_run,
                                        recipe_args=RECIPE_ARGS), out=out)
    assert status == 0, out.getvalue()[-3000:]
    print(f"the local two-worker run took {time.monotonic() - started:.0f} s")

  @classmethod
  def tearDownClass(cls):
    super().tearDownClass()
    print(f"{cls.__name__}: {time.monotonic() - cls.began:.0f} s in all")

  def setUp(self):
    super().setUp()
    self.began = time.monotonic()

  def tearDown(self):
    print(f"{self.id().rsplit('.', 1)[-1]}: {time.monotonic() - self.began:.0f} s")
    self.cluster.settle()  # a failed test's job or dead node does not reach the next
    super().tearDown()

  def launcher(self, *flags, cwd=None):
    """`python -m launch.cli --backend=slurm FLAGS` against the test cluster."""
    env = cli.environment(dict(self.cluster.env, PYTHONPATH=local.ROOT,
                               TMPDIR=self.scratch))
    return subprocess.run([sys.executable, "-m", "launch.cli", "--backend=slurm",
                           *flags], cwd=cwd or self.dir, env=env, capture_output=True,
                          text=True, check=False, timeout=60)

  def submit(self, *flags, workers=2, tasks_per_node=2, recipe_args=RECIPE_ARGS):
    """Submits the tiny flagship with the launcher (`workers` tasks, `tasks_per_node`
    of them a node, one CPU each); its job id."""
    self.dir = self.create_tempdir().full_path
    self.scratch = os.path.join(self.dir, "tmp")
    os.makedirs(self.scratch)
    self.model_dir = os.path.join(self.dir, "run")
    result = self.launcher(
        "--recipe=nfnet_long_tail_digits", "--name=tiny", f"--workers={workers}",
        f"--model_dir={self.model_dir}", f"--slurm_workdir={local.ROOT}",
        f"--slurm_tasks_per_node={tasks_per_node}", "--slurm_cpus_per_task=1",
        f"--slurm_setup=export PATH={self.bin}:$PATH", *flags, "--", *recipe_args)
    self.assertEqual(result.returncode, 0, result.stderr)
    return re.search(r"Submitted batch job (\d+)", result.stdout).group(1)

  def output(self, job_id):
    path = os.path.join(self.dir, f"tiny-{job_id}.out")
    if not os.path.exists(path):
      return ""
    with open(path) as f:
      return f.read()

  def wait(self, job_id, until, timeout=400):
    """Waits until until(state) (squeue's state of the job); the state."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
      state = self.cluster.jobs().get(job_id)
      if until(state):
        return state
      time.sleep(0.5)
    shown = self.cluster.run("scontrol", "show", "job", job_id, check=False).stdout
    self.fail(f"job {job_id} still {state} after {timeout} s:\n{shown}\n"
              f"{self.output(job_id)[-3000:]}")

  def wait_for(self, condition, timeout, what):
    """Polls condition() until it is truthy (its value) or fails after `timeout` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
      found = condition()
      if found:
        return found
      time.sleep(0.2)
    self.fail(f"{what}: not after {timeout} s")

  def slurmd_log(self, name):
    with open(os.path.join(self.cluster.dir, f"slurmd-{name}.log")) as f:
      return f.read()

  @contextlib.contextmanager
  def daemons_reported_on_failure(self):
    """A failure's message ends with each Slurm daemon's state and log tail."""
    try:
      yield
    except AssertionError as e:
      raise AssertionError(f"{e}\n{self.cluster.daemon_report()}") from e

  def checkpoints(self):
    """The numbers of the checkpoints in model_dir (those with an index: whole)."""
    found = glob.glob(os.path.join(self.model_dir, "checkpoints", "ckpt-*.index"))
    return sorted(int(CHECKPOINT.search(p).group(1)) for p in found)

  def checkpoint_after_epoch_one(self):
    return any(n > 0 for n in self.checkpoints())

  def assert_weights_of_the_local_run(self, job_id, rtol=1e-6, atol=1e-7):
    self.assertEqual(self.cluster.jobs().get(job_id), "COMPLETED",
                     self.output(job_id)[-3000:])
    (want, _), (got, _) = cli.final_weights(self.local_run), cli.final_weights(
        self.model_dir)
    self.assertEqual(sorted(got), sorted(want))
    for name, value in want.items():
      self.assertAllClose(got[name], value, rtol=rtol, atol=atol, msg=name)

  def assert_only_the_chief_wrote(self, job_id):
    said = self.output(job_id)
    self.assertEqual(said.count("Report in "), 1, said[-3000:])
    self.assertContainsSubset(["checkpoints", "config.gin", "metrics.json", "train",
                               "eval"], os.listdir(self.model_dir))
    # The other tasks' scratch directories are gone.
    self.assertEqual([n for n in os.listdir(self.scratch) if n.startswith("model_zoo-")],
                     [])
