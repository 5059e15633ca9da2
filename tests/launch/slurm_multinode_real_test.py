"""A real Slurm cluster of two nodes on this machine (slurm_cluster.py: each node's
slurmd in a network namespace of its own, with its own address, as separate hosts)
runs the launcher's own sbatch script, submitted by the launcher (`python -m
launch.cli --backend=slurm`, no dry run):

- one task a node: the tiny flagship trains across the two nodes (the workers talk over
  the namespaces' addresses, the cluster built by recipes.strategies.slurm_cluster from
  Slurm's variables) to the weights of the local two-worker run; only the chief writes;
- two tasks a node: the same, each node's tasks on the resolver's block of ports;
- a node's slurmd dead when the step launches: srun cannot reach it (status 233), the
  batch shell requeues the job, which trains to the local run's weights once it is back;
- the launcher's --status and --cancel name the job on both nodes.
A node lost mid-run: slurm_lost_node_real_test.py.

Where Slurm or network namespaces are missing (not root, not Debian, no iproute2):
skipped with one line saying why, failed under CI=true (tests/real_parts.py).
"""

import os
import re
import time

import tensorflow as tf

from launch import slurm
from recipes import strategies
from tests.launch import slurm_jobs

ENDED = slurm_jobs.ENDED
LONG_ARGS = (*slurm_jobs.RECIPE_ARGS, "--gin_bindings=EPOCHS = 60")
SERVER = re.compile(r"Started server with target: grpc://(\S+)")


class SlurmMultinodeRealTest(slurm_jobs.SlurmJobsTest):

  NODES = 2

  def servers(self, job_id):
    """The workers' gRPC addresses as they started them (host:port)."""
    return sorted(SERVER.findall(self.output(job_id)))

  def expected_servers(self, job_id, tasks_per_node):
    base = strategies.slurm_port_base(int(job_id), tasks_per_node)
    return sorted(f"{name}:{base + k}" for name in self.cluster.names
                  for k in range(tasks_per_node))

  def test_one_task_a_node_trains_like_the_local_workers(self):
    job_id = self.submit(workers=2, tasks_per_node=1)
    self.wait(job_id, lambda s: s == "RUNNING", timeout=60)
    status = self.launcher(f"--status={job_id}")
    self.assertEqual(status.returncode, 0, status.stderr)
    self.assertRegex(status.stdout, rf"{job_id} +tiny +RUNNING .*n\[9-10\]")
    # A task in each node's network namespace; the chief's node talks to the other
    # node's address, on the port the resolver gave its task.
    for node in (0, 1):
      self.wait_for(lambda n=node: self.cluster.processes(n), 60, f"a task on node {node}")
    port = str(strategies.slurm_port_base(int(job_id), 1))

    def across():  # n9's TCP connections with n10's address, on a worker's port
      return [(here, there) for here, there in self.cluster.connections(0)
              if there.rsplit(":", 1)[0] == self.cluster.addresses[1]
              and port in (here.rsplit(":", 1)[1], there.rsplit(":", 1)[1])]

    self.wait_for(across, 180, f"a connection between n9 and n10 on port {port}")
    self.wait(job_id, lambda s: s in ENDED)
    said = self.output(job_id)
    self.assertEqual(self.servers(job_id), self.expected_servers(job_id, 1))
    self.assertIn("on 2 replica(s)", said)
    self.assertEqual(said.count("This worker is done; the chief writes the report in"), 1)
    self.assert_only_the_chief_wrote(job_id)
    self.assert_weights_of_the_local_run(job_id)

  def test_two_tasks_a_node_train_like_the_local_workers(self):
    """Four workers (two a node, each node's on ports base and base + 1) on the local
    run's global batch: the same arithmetic but the gradient sum is reassociated over
    four replicas instead of two (rtol 1e-4)."""
    job_id = self.submit(workers=4, tasks_per_node=2)
    self.wait(job_id, lambda s: s in ENDED, timeout=600)
    said = self.output(job_id)
    self.assertEqual(self.servers(job_id), self.expected_servers(job_id, 2))
    self.assertIn("on 4 replica(s)", said)
    self.assertEqual(said.count("This worker is done; the chief writes the report in"), 3)
    self.assert_only_the_chief_wrote(job_id)
    self.assert_weights_of_the_local_run(job_id, rtol=1e-4, atol=1e-6)

  def test_a_step_that_cannot_reach_a_node_requeues_and_the_job_trains(self):
    """n10's slurmd dies just before the step's launch (the batch shell sleeps before
    srun): srun cannot reach it (status 233), the batch shell requeues the job (one of
    at most LAUNCH_REQUEUES); with the slurmd back the job runs again and trains to the
    local run's weights."""
    job_id = self.submit("--slurm_setup=sleep 8", workers=2, tasks_per_node=1)
    self.wait(job_id, lambda s: s == "RUNNING", timeout=60)
    self.cluster.kill_slurmd(1)
    with self.daemons_reported_on_failure():
      requeued = f"(233: a slurmd could not be reached): requeueing job {job_id} to resume"
      self.wait(job_id, lambda s: requeued in self.output(job_id) or s in ENDED,
                timeout=60)
      self.assertIn(f"{requeued} (1 in a row, of at most {slurm.LAUNCH_REQUEUES})",
                    self.output(job_id))
      self.cluster.revive_node(1)  # its slurmd again (slurmctld never saw it down)
      self.wait(job_id, lambda s: s in ENDED)
      said = self.output(job_id)
      self.assertEqual(said.count("requeueing"), 1, said[-3000:])
      self.assertIn("on 2 replica(s)", said)
      self.assert_only_the_chief_wrote(job_id)
      self.assert_weights_of_the_local_run(job_id)
      # The second launch started: the count of failed launches in a row is gone.
      self.assertEqual(os.listdir(os.path.join(self.model_dir, ".launch")), [])

  def test_status_and_cancel_name_the_job_across_both_nodes(self):
    job_id = self.submit(workers=2, tasks_per_node=1, recipe_args=LONG_ARGS)
    for node in (0, 1):
      self.wait_for(lambda n=node: self.cluster.processes(n), 120, f"a task on node {node}")
    status = self.launcher(f"--status={job_id}")
    self.assertEqual(status.returncode, 0, status.stderr)
    self.assertRegex(status.stdout, rf"{job_id} +tiny +RUNNING .*n\[9-10\]")
    result = self.launcher(f"--cancel={job_id}")
    self.assertEqual(result.returncode, 0, result.stderr)
    self.assertEqual(self.wait(job_id, lambda s: s in ENDED, timeout=120), "CANCELLED")
    for node in (0, 1):  # no task left on either node
      self.wait_for(lambda n=node: not self.cluster.processes(n), 60,
                    f"node {node}'s tasks ended")
    time.sleep(20)  # past cred_expire: a requeued job would be pending again by now
    self.assertEqual(self.cluster.jobs().get(job_id), "CANCELLED")
    status = self.launcher(f"--status={job_id}")
    self.assertRegex(status.stdout, rf"{job_id} +tiny +CANCELLED")
    self.assertNotIn("requeueing", self.output(job_id))


if __name__ == "__main__":
  tf.test.main()
