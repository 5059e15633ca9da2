"""--strategy names map to tf.distribute strategies; bad ones fail clearly; a
multi-worker strategy starts in real worker processes."""

import json
import os
import socket
import subprocess
import sys

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


if __name__ == "__main__":
  tf.test.main()
