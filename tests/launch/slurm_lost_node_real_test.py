"""A node lost mid-run on a real Slurm cluster of two nodes on this machine
(slurm_cluster.py: each node's slurmd in a network namespace of its own): the tiny
flagship, submitted by the launcher (`python -m launch.cli --backend=slurm`), trains
across both; after the first checkpoint the chief's node (its slurmd, the batch shell,
srun and the chief) dies as a machine does (link cut, SIGKILL); the other worker exits
EXIT_PEER_LOST (200); slurmctld declares the node DOWN and requeues the job
(--requeue), which waits for the node, resumes from the last whole checkpoint when it
returns and ends with the local run's weights.

A target of its own, marked flaky (tests/launch/BUILD says why), so that the other
two-node tests (slurm_multinode_real_test.py) are not. Where Slurm or network
namespaces are missing: skipped with one line saying why, failed under CI=true.
"""

import datetime
import re
import time

import tensorflow as tf

from recipes import errors
from tests.launch import slurm_cluster
from tests.launch import slurm_jobs

ENDED = slurm_jobs.ENDED
RESUMED = re.compile(r"Resumed from \S*/ckpt-(\d+) at epoch")
TASK_END = re.compile(r"^\[(\S+)\] .*task (\d+) \(\d+\) exited with (exit code \d+|status "
                      r"0x[0-9a-f]+)", re.MULTILINE)


class SlurmLostNodeRealTest(slurm_jobs.SlurmJobsTest):

  NODES = 2

  def test_a_lost_node_requeues_and_the_job_resumes_to_the_same_weights(self):
    job_id = self.submit(workers=2, tasks_per_node=1)
    state = self.wait(job_id, lambda s: s in ENDED or self.checkpoint_after_epoch_one())
    self.assertEqual(state, "RUNNING", self.output(job_id)[-3000:])
    with self.daemons_reported_on_failure():
      self.lose_the_chiefs_node_and_resume(job_id)

  def lose_the_chiefs_node_and_resume(self, job_id):
    killed_at, killed = time.time(), time.monotonic()
    self.cluster.kill_node(0)  # n9: the chief, the batch shell and srun
    whole = self.checkpoints()  # what the dead chief left: all that can be read
    # The job is requeued (slurmctld: node failure, --requeue), not failed, and waits
    # for its two nodes.
    self.wait(job_id, lambda s: s == "PENDING", timeout=120)
    requeued = time.monotonic() - killed
    self.assertEqual(self.cluster.node_states()["n9"], "down*")
    # Once past its BeginTime (cred_expire), it waits for the node ("Nodes required
    # for job are DOWN, ..." or "ReqNodeNotAvail, UnavailableNodes:n9").
    reason = lambda: self.cluster.run("squeue", "--noheader", f"--jobs={job_id}",
                                      "--format=%T %r").stdout
    self.wait_for(lambda: re.search(r"DOWN|UnavailableNodes:n9", reason()), 90,
                  "the job waiting for its down node")
    self.assertTrue(reason().startswith("PENDING"), reason())
    # The survivor on n10, from its slurmstepd's log: how and when it ended.
    ends = [(datetime.datetime.fromisoformat(t).timestamp() - killed_at, task, how)
            for t, task, how in TASK_END.findall(self.slurmd_log("n10"))]
    ends = [e for e in ends if e[0] > 0]
    self.assertNotEmpty(ends, self.slurmd_log("n10")[-2000:])
    # It found its chief gone (heartbeats timed out: DeadlineExceeded, which exited 1,
    # a crash to Kubernetes, before) and exited as a lost peer, before Slurm ended it.
    self.assertEqual(ends[0][2], f"exit code {errors.EXIT_PEER_LOST}",
                     self.slurmd_log("n10")[-2000:])
    revived = time.monotonic()
    self.cluster.revive_node(0)
    self.wait(job_id, lambda s: s == "RUNNING", timeout=120)
    running_again = time.monotonic() - revived
    self.wait(job_id, lambda s: s in ENDED)
    said = self.output(job_id)
    # The last run's tasks: after the batch shell's last requeue, where a relaunch could
    # not reach a node (status 233) and was requeued again.
    resumed = [int(n) for n in RESUMED.findall(said.rsplit("requeueing job", 1)[-1])]
    self.assertLen(resumed, 2, said[-3000:])  # both tasks of the last run
    self.assertEqual(resumed[0], resumed[1])
    self.assertIn(resumed[0], whole)  # a checkpoint that was whole at the kill
    self.assertGreater(resumed[0], 0)
    self.assertNotIn("Traceback", said)
    self.assert_weights_of_the_local_run(job_id)
    print(f"lost node: survivor ended {ends[0][0]:.1f} s after the kill "
          f"(task {ends[0][1]}, {ends[0][2]}); "
          f"requeued after {requeued:.0f} s (SlurmdTimeout {slurm_cluster.SLURMD_TIMEOUT} "
          f"s); running {running_again:.0f} s after the node returned; resumed from "
          f"ckpt-{resumed[0]} (whole then: {whole})")


if __name__ == "__main__":
  tf.test.main()
