"""--strategy names map to tf.distribute strategies; bad ones fail clearly; a
multi-worker strategy starts in real worker processes."""

import json
import os
import socket
import subprocess
import sys
from unittest import mock

import tensorflow as tf

from recipes import strategies
from recipes.errors import ConfigError


class StrategiesTest(tf.test.TestCase):

  def test_cpu_choices(self):
    self.assertIsInstance(strategies.make_strategy("auto"), tf.distribute.OneDeviceStrategy)
    self.assertIsInstance(strategies.make_strategy("one_device"),
                          tf.distribute.OneDeviceStrategy)
    self.assertIsInstance(strategies.make_strategy("mirrored"),
                          tf.distribute.MirroredStrategy)

  def test_errors(self):
    with self.assertRaisesRegex(ConfigError, "needs --tpu"):
      strategies.make_strategy("tpu")
    with self.assertRaisesRegex(ConfigError, "unknown --strategy='gpu'"):
      strategies.make_strategy("gpu")
    for bad in (0, -1, 2.0, "2", True):
      with self.assertRaisesRegex(ConfigError, "cpu_replicas=.* whole number >= 1"):
        strategies.make_strategy("mirrored", cpu_replicas=bad)
    with self.assertRaisesRegex(ConfigError, "not --strategy=one_device; add "
                                "--strategy=mirrored or drop --cpu_replicas"):
      strategies.make_strategy("one_device", cpu_replicas=2)

  def test_cluster_errors(self):
    with self.assertRaisesRegex(ConfigError, "unknown --cluster='k8s'; choose one of "
                                "tf_config, slurm"):
      strategies.make_strategy("multi_worker_mirrored", cluster="k8s")
    with self.assertRaisesRegex(ConfigError, "--cluster=slurm describes the workers of "
                                "--strategy=multi_worker_mirrored"):
      strategies.make_strategy("mirrored", cluster="slurm")
    saved = {k: os.environ.pop(k) for k in list(os.environ) if k.startswith("SLURM_")}
    try:
      with self.assertRaisesRegex(ConfigError, "--cluster=slurm needs a Slurm job step "
                                  r"\(SLURM_PROCID is not set\); start the workers with srun"):
        strategies.make_strategy("multi_worker_mirrored", cluster="slurm")
    finally:
      os.environ.update(saved)

  def test_two_workers_start_and_all_reduce(self):
    """TF_CONFIG workers on localhost: the strategy is made before the runtime starts
    (collective ops must be configured at program startup), and they all-reduce."""
    ports = []
    for _ in range(2):
      with socket.socket() as s:
        s.bind(("localhost", 0))
        ports.append(s.getsockname()[1])
    script = (
        "import tensorflow as tf\n"
        "from recipes import strategies\n"
        "s = strategies.make_strategy('multi_worker_mirrored')\n"
        "task = s.cluster_resolver.task_id\n"
        "total = s.run(lambda: tf.distribute.get_replica_context().all_reduce(\n"
        "    'sum', tf.constant(task + 1.0)))\n"
        "print(s.num_replicas_in_sync, float(s.experimental_local_results(total)[0]))\n")
    workers = []
    for index in range(2):
      config = {"cluster": {"worker": [f"localhost:{p}" for p in ports]},
                "task": {"type": "worker", "index": index}}
      env = dict(os.environ, TF_CONFIG=json.dumps(config), CUDA_VISIBLE_DEVICES="",
                 TF_CPP_MIN_LOG_LEVEL="3")
      workers.append(subprocess.Popen([sys.executable, "-c", script], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True))
    for worker in workers:
      out, err = worker.communicate(timeout=120)
      self.assertEqual(worker.returncode, 0, err[-2000:])
      self.assertEqual(out.split(), ["2", "3.0"])


def slurm_step(**values):
  """The environment srun gives a task: SLURM_* values (the test process's others
  left out, so nothing of a real job leaks in)."""
  env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
  env.update({f"SLURM_{k}": str(v) for k, v in values.items()})
  return mock.patch.dict(os.environ, env, clear=True)


class SlurmResolverTest(tf.test.TestCase):
  """--cluster=slurm's resolver, given the environment Slurm gives a step's tasks
  (the real scheduler runs it in tests/launch/slurm_real_test.py)."""

  def resolve(self, **values):
    """The resolver's (cluster, task type, task id); every node name resolves (no DNS
    is asked: these names are made up)."""
    with slurm_step(**values), mock.patch.object(socket, "getaddrinfo", autospec=True):
      resolver = strategies.slurm_resolver()
      return resolver.cluster_spec().as_dict(), resolver.task_type, resolver.task_id

  def test_cpu_only_nodes(self):
    """No GPUs (SLURM_GPUS_ON_NODE unset): TF's resolver computed range(0, 0, 0)."""
    spec, task_type, task_id = self.resolve(
        PROCID=1, STEP_NUM_TASKS=2, STEP_NODELIST="cpu[1-2]", STEP_TASKS_PER_NODE="1(x2)",
        JOB_ID=7)
    port = strategies.slurm_port_base(7, 1)
    self.assertEqual(spec, {"worker": [f"cpu1:{port}", f"cpu2:{port}"]})
    self.assertEqual((task_type, task_id), ("worker", 1))

  def test_each_rank_gets_the_address_of_its_own_host(self):
    """Slurm places ranks in allocation order (node9 before node10); sorting the
    names as strings gave rank 0 node10's address."""
    for rank, host in ((0, "node9"), (1, "node10")):
      spec, _, task_id = self.resolve(
          PROCID=rank, NODEID=rank, LOCALID=0, STEP_NUM_TASKS=2,
          STEP_NODELIST="node[9-10]", STEP_TASKS_PER_NODE="1(x2)", JOB_ID=5,
          GPUS_ON_NODE=1)
      self.assertEqual(task_id, rank)
      self.assertEqual(spec["worker"][rank].split(":")[0], host)

  def test_tasks_a_node_in_blocks_with_ports_of_their_own(self):
    spec, _, task_id = self.resolve(
        PROCID=3, NODEID=1, LOCALID=0, STEP_NUM_TASKS=5, STEP_NODELIST="a,b",
        STEP_TASKS_PER_NODE="3,2", JOB_ID=9)
    base = strategies.slurm_port_base(9, 3)
    self.assertEqual(spec["worker"], [f"a:{base}", f"a:{base + 1}", f"a:{base + 2}",
                                      f"b:{base}", f"b:{base + 1}"])
    self.assertEqual(task_id, 3)

  def test_two_jobs_on_one_node_use_different_ports(self):
    """A fixed port (TF's 8888) made a second job on the node fail to start."""
    ports = set()
    for job_id in (41, 42, 41 + 12000 // 2 - 1):
      spec, _, _ = self.resolve(PROCID=0, STEP_NUM_TASKS=2, STEP_NODELIST="vm",
                                STEP_TASKS_PER_NODE="2", JOB_ID=job_id, GPUS_ON_NODE=2)
      ports.update(spec["worker"])
    self.assertLen(ports, 6)
    for address in ports:
      self.assertBetween(int(address.split(":")[1]), strategies.PORT_LOW,
                         strategies.PORT_LOW + strategies.PORT_SPAN - 1)

  def test_a_node_name_without_an_address_is_refused_in_one_line(self):
    """Found on two real nodes (network namespaces) before each had the other's name:
    the worker failed at its first collective with UnavailableError, which the trainer
    reported as a lost peer (exit 200, retried), not as a configuration to fix."""
    def getaddrinfo(host, port, *args, **kwargs):
      del port, args, kwargs
      if host == "n10":
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
      return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("10.233.1.10", 0))]

    with slurm_step(PROCID=0, NODEID=0, LOCALID=0, STEP_NUM_TASKS=2,
                    STEP_NODELIST="n[9-10]", STEP_TASKS_PER_NODE="1(x2)", JOB_ID=3), \
        mock.patch.object(socket, "getaddrinfo", side_effect=getaddrinfo):
      with self.assertRaisesRegex(
          ConfigError, r"^Slurm node 'n10' \(SLURM_STEP_NODELIST=n\[9-10\]\) has no "
          r"address on this node \(Name or service not known\); the workers reach each "
          r"other by node name: make every node's name resolve on every node \(DNS or "
          r"/etc/hosts\)$"):
        strategies.slurm_resolver()

  def test_tasks_out_of_block_order_are_refused(self):
    with self.assertRaisesRegex(ConfigError, r"Slurm task 1 runs as task 0 of node 1, not "
                                "in block order; start the workers with srun "
                                "--distribution=block"):
      self.resolve(PROCID=1, NODEID=1, LOCALID=0, STEP_NUM_TASKS=4, STEP_NODELIST="a,b",
                   STEP_TASKS_PER_NODE="2(x2)", JOB_ID=1)


if __name__ == "__main__":
  tf.test.main()
