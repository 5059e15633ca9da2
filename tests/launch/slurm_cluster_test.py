"""Two real test clusters at once (two Slurm tests run side by side under Bazel): each
has its own munged, so one leaving does not take the other's authentication with it
(CI failed so when the clusters shared one munged and its starter stopped it)."""

import os
import shutil
import tempfile
import time

import tensorflow as tf

from tests import real_parts
from tests.launch import slurm_cluster


class ClusterTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    reason = slurm_cluster.install(1)
    if reason:
      real_parts.missing("real Slurm", reason)

  def cluster(self):
    directory = tempfile.mkdtemp(prefix=f"{slurm_cluster.NETNS}-", dir="/tmp")
    self.addCleanup(shutil.rmtree, directory, ignore_errors=True)
    return slurm_cluster.Cluster(directory)

  def run_job(self, cluster):
    """Submits `echo` and waits for it; its state and its output."""
    out = os.path.join(cluster.dir, "echo.out")
    said = cluster.run("sbatch", f"--output={out}", "--wrap=echo authenticated").stdout
    job_id = said.split()[-1]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and cluster.jobs().get(job_id) != "COMPLETED":
      time.sleep(0.5)
    with open(out) as f:
      return cluster.jobs().get(job_id), f.read()

  def test_a_cluster_outlives_the_one_started_before_it(self):
    first = self.cluster()
    first.__enter__()
    try:
      second = self.cluster()
      with second:
        first.__exit__(None, None, None)
        # What a failing test's message ends with (daemon_report): the daemons' states.
        self.assertIn("--- slurmctld: not running", first.daemon_report())
        report = second.daemon_report()
        self.assertIn(f"--- slurmd {second.host}: alive; slurmd-{second.host}.log:", report)
        self.assertRegex(report, r"slurmctld version \S+ started")
        self.assertEqual(second.node_states(), {second.host: "idle"})
        self.assertEqual(self.run_job(second), ("COMPLETED", "authenticated\n"))
        with open(os.path.join(second.dir, slurm_cluster.MUNGE, "munged.pid")) as f:
          munged = int(f.read().split()[0])
        self.assertTrue(slurm_cluster.alive(munged))
      # Stopped, though maybe not yet reaped: munged daemonised, so its parent now is
      # whichever reaper adopted it (CI once saw its zombie's /proc entry here).
      self.assertFalse(slurm_cluster.alive(munged), "the cluster's munged outlived it")
    finally:
      first.__exit__(None, None, None)


if __name__ == "__main__":
  tf.test.main()
