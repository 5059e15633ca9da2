"""`--strategy` names to tf.distribute strategies."""

import os
import socket

import tensorflow as tf
# TensorFlow's Slurm host-list and tasks-a-node expansions (not in its public API).
from tensorflow.python.distribute.cluster_resolver import slurm_cluster_resolver as slurm_lib

from recipes.errors import ConfigError

NAMES = ("auto", "one_device", "mirrored", "multi_worker_mirrored", "tpu")
CLUSTERS = ("tf_config", "slurm")


def configure_devices(gpu_memory_growth=False):
  """Device settings that must precede any use of the devices (so, the strategy):
  GPU memory allocated as needed rather than all at once."""
  if gpu_memory_growth:
    for gpu in tf.config.list_physical_devices("GPU"):
      tf.config.experimental.set_memory_growth(gpu, True)


def split_cpu(cpu_replicas):
  """Splits the CPU into `cpu_replicas` logical devices (before the runtime starts)."""
  cpu = tf.config.list_physical_devices("CPU")[0]
  tf.config.set_logical_device_configuration(
      cpu, [tf.config.LogicalDeviceConfiguration() for _ in range(cpu_replicas)])


def make_strategy(name, tpu="", cpu_replicas=1, cluster="tf_config"):
  """The tf.distribute strategy called `name` (one of NAMES).

  auto: MirroredStrategy over all local GPUs when there are several, else one device.
  one_device: the first GPU, or the CPU. mirrored: MirroredStrategy over local GPUs
  (the CPU without; with `cpu_replicas` > 1, over that many logical CPU devices, so a
  machine without GPUs runs the multi-replica code path). multi_worker_mirrored: the
  cluster in TF_CONFIG, or with `cluster="slurm"` the Slurm job step's tasks
  (`slurm_resolver`: one worker a task). tpu: `tpu` is the TPU's name or grpc:// address ("local" on a
  TPU VM).

  Call it before anything else runs on the devices: it asks only for physical
  devices, so the runtime starts with the strategy (collective ops for
  multi_worker_mirrored, and the CPU split, must be configured before it starts).
  """
  if name not in NAMES:
    raise ConfigError(f"unknown --strategy={name!r}; choose one of {', '.join(NAMES)}")
  if cluster not in CLUSTERS:
    raise ConfigError(f"unknown --cluster={cluster!r}; choose one of {', '.join(CLUSTERS)}")
  if cluster != "tf_config" and name != "multi_worker_mirrored":
    raise ConfigError(f"--cluster={cluster} describes the workers of "
                      "--strategy=multi_worker_mirrored; add that strategy or drop --cluster")
  if isinstance(cpu_replicas, bool) or not isinstance(cpu_replicas, int) or \
      cpu_replicas < 1:
    raise ConfigError(f"--cpu_replicas={cpu_replicas!r} must be a whole number >= 1")
  gpus = tf.config.list_physical_devices("GPU")
  if cpu_replicas > 1:
    if name != "mirrored":
      raise ConfigError(f"--cpu_replicas={cpu_replicas} splits the CPU for "
                        f"--strategy=mirrored, not --strategy={name}; add "
                        "--strategy=mirrored or drop --cpu_replicas")
    if gpus:
      raise ConfigError(f"--cpu_replicas={cpu_replicas} is for machines without GPUs; "
                        f"this one has {len(gpus)}: drop --cpu_replicas")
  if name == "auto":
    name = "mirrored" if len(gpus) > 1 else "one_device"
  if name == "one_device":
    return tf.distribute.OneDeviceStrategy("/gpu:0" if gpus else "/cpu:0")
  if name == "mirrored":
    if cpu_replicas > 1:
      split_cpu(cpu_replicas)
      return tf.distribute.MirroredStrategy(
          [f"/cpu:{i}" for i in range(cpu_replicas)])
    return tf.distribute.MirroredStrategy()
  if name == "multi_worker_mirrored":
    if cluster == "slurm":
      return tf.distribute.MultiWorkerMirroredStrategy(cluster_resolver=slurm_resolver())
    return tf.distribute.MultiWorkerMirroredStrategy()
  if not tpu:
    raise ConfigError("--strategy=tpu needs --tpu=<name, grpc:// address or 'local'>")
  resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu)
  tf.config.experimental_connect_to_cluster(resolver)
  tf.tpu.experimental.initialize_tpu_system(resolver)
  return tf.distribute.TPUStrategy(resolver)


KINDS = {"OneDeviceStrategy": "one device", "MirroredStrategy": "mirrored",
         "CollectiveAllReduceStrategy": "multi-worker mirrored",
         "MultiWorkerMirroredStrategy": "multi-worker mirrored",
         "TPUStrategy": "TPU", "TPUStrategyV2": "TPU"}


def devices_line(device_types, gpu_names=(), kind="one device", workers=1,
                 gpu_expected=False):
  """The one line that says which devices a run uses, e.g. "devices: CPU only",
  "devices: 2 x GPU (NVIDIA H100 80GB HBM3), mirrored".

  device_types: this worker's replica devices' types ("CPU", "GPU", "TPU"); gpu_names:
  the names of its GPUs; kind: the strategy ("one device", "mirrored", ...); workers:
  how many workers the strategy spans; gpu_expected: this machine was expected to have
  a GPU (startup.gpu_expected), so finding none is said, not hidden.
  """
  types = sorted(set(device_types))
  if types == ["CPU"] and len(device_types) == 1:
    line = "devices: CPU only"
  elif types == ["CPU"]:
    line = f"devices: {len(device_types)} x CPU (logical devices of one CPU)"
  else:
    parts = []
    for t in types:
      n = sum(1 for d in device_types if d == t)
      names = sorted(set(gpu_names)) if t == "GPU" else []
      parts.append(f"{n} x {t}" + (f" ({', '.join(names)})" if names else ""))
    line = "devices: " + " + ".join(parts)
  if kind != "one device" or len(device_types) > 1:
    line += f", {kind}"
  if workers > 1:
    line += f" over {workers} workers"
  if gpu_expected and "GPU" not in types:
    line += ("; a GPU was expected (NVIDIA devices or CUDA_VISIBLE_DEVICES) but "
             "TensorFlow found none: see its messages on stderr")
  return line


def describe_devices(strategy, gpu_expected=False):
  """`devices_line` for `strategy` (made by make_strategy) on this machine."""
  devices = [tf.DeviceSpec.from_string(d) for d in strategy.extended.worker_devices]
  types = [d.device_type or "CPU" for d in devices]
  physical = tf.config.list_physical_devices("GPU")
  names = []
  for d in devices:
    if d.device_type == "GPU" and (d.device_index or 0) < len(physical):
      details = tf.config.experimental.get_device_details(physical[d.device_index or 0])
      names.append(details.get("device_name", "GPU"))
  kind = KINDS.get(type(strategy).__name__, type(strategy).__name__)
  workers = max(1, strategy.num_replicas_in_sync // max(1, len(devices)))
  return devices_line(types, names, kind, workers,
                      gpu_expected=gpu_expected and not physical)


# Ports of a Slurm job's workers: a block of PORT_SPAN ports from PORT_LOW on (below
# Linux's ephemeral range, 32768-60999), chosen by the job id, one port a task on a
# node. Two jobs sharing a node collide only when their ids differ by a multiple of
# PORT_SPAN // (tasks a node), e.g. 12000 apart with one task a node.
PORT_LOW = 20000
PORT_SPAN = 12000


def slurm_port_base(job_id, tasks_per_node):
  """The first port of job `job_id`'s tasks on a node (task k of a node: base + k)."""
  slots = PORT_SPAN // tasks_per_node
  return PORT_LOW + (job_id % slots) * tasks_per_node


def slurm_cluster(environ):
  """(worker addresses in rank order, this task's rank) of the Slurm job step in
  `environ`: the step's nodes in allocation order (SLURM_STEP_NODELIST, expanded by
  TensorFlow's own helpers), each running its SLURM_STEP_TASKS_PER_NODE tasks, ranks
  in blocks (srun --distribution=block, Slurm's default): node 0 runs ranks 0..k-1.
  TensorFlow's SlurmClusterResolver sorts the host names instead (node10 before
  node9) and so gives a task another host's address; and on CPU-only nodes it fails
  (range(0, 0, 0)). Checked against the task's own SLURM_NODEID and SLURM_LOCALID."""
  missing = [v for v in ("SLURM_PROCID", "SLURM_STEP_NUM_TASKS", "SLURM_STEP_NODELIST",
                         "SLURM_STEP_TASKS_PER_NODE", "SLURM_JOB_ID") if v not in environ]
  if missing:
    raise ConfigError(f"--cluster=slurm needs a Slurm job step ({missing[0]} is not set); "
                      "start the workers with srun inside an sbatch job")
  hosts = slurm_lib.expand_hostlist(environ["SLURM_STEP_NODELIST"])
  counts = slurm_lib.expand_tasks_per_node(environ["SLURM_STEP_TASKS_PER_NODE"])
  rank, total = int(environ["SLURM_PROCID"]), int(environ["SLURM_STEP_NUM_TASKS"])
  if len(hosts) != len(counts) or sum(counts) != total:
    raise ConfigError(f"the Slurm step's nodes ({environ['SLURM_STEP_NODELIST']}) and "
                      f"tasks a node ({environ['SLURM_STEP_TASKS_PER_NODE']}) do not make "
                      f"its {total} tasks; start the workers with one srun step")
  base = slurm_port_base(int(environ["SLURM_JOB_ID"]), max(counts))
  addresses, places = [], []
  for node, (host, count) in enumerate(zip(hosts, counts)):
    addresses += [f"{host}:{base + local}" for local in range(count)]
    places += [(node, local) for local in range(count)]
  own = (int(environ.get("SLURM_NODEID", places[rank][0])),
         int(environ.get("SLURM_LOCALID", places[rank][1])))
  if own != places[rank]:
    raise ConfigError(f"Slurm task {rank} runs as task {own[1]} of node {own[0]}, not in "
                      "block order; start the workers with srun --distribution=block")
  return addresses, rank


def check_node_names(addresses, nodelist):
  """ConfigError unless every host of `addresses` resolves here. The workers reach each
  other by Slurm's node names; a name without an address failed only at the first
  collective, as an UnavailableError that the trainer reports as a lost peer (exit 200,
  which engines retry), not as the cluster's configuration it is."""
  for host in dict.fromkeys(a.rsplit(":", 1)[0] for a in addresses):
    try:
      socket.getaddrinfo(host, None)
    except (socket.gaierror, UnicodeError) as e:
      reason = getattr(e, "strerror", None) or str(e)
      raise ConfigError(f"Slurm node {host!r} (SLURM_STEP_NODELIST={nodelist}) has no "
                        f"address on this node ({reason}); the workers reach each other "
                        "by node name: make every node's name resolve on every node "
                        "(DNS or /etc/hosts)") from None


def slurm_resolver():
  """The Slurm job step's tasks as a cluster (one worker a task, task 0 the chief).
  Slurm binds each task's GPUs itself (--gpus-per-task): the worker uses those it sees.
  Every node's name must resolve (check_node_names)."""
  addresses, rank = slurm_cluster(os.environ)
  check_node_names(addresses, os.environ["SLURM_STEP_NODELIST"])
  return tf.distribute.cluster_resolver.SimpleClusterResolver(
      tf.train.ClusterSpec({"worker": addresses}), task_type="worker", task_id=rank,
      num_accelerators={"GPU": len(tf.config.list_physical_devices("GPU"))},
      rpc_layer="grpc")


def is_chief(strategy):
  """Whether this worker writes the run's outputs (multi-worker: the chief, or worker
  0 when there is no chief)."""
  resolver = strategy.cluster_resolver  # None on one machine
  if resolver is None or not resolver.task_type:
    return True
  spec = resolver.cluster_spec().as_dict()
  if "chief" in spec:
    return resolver.task_type == "chief"
  return resolver.task_type == "worker" and resolver.task_id == 0


def tpu_advice(runtime, pipeline, replicas, datasets):
  """What a TPU run needs settled on the host before its first step; returns advice
  lines. `datasets` maps a name to a dataset the TPU will be fed. Raises ConfigError
  for float16 (TPUs compute in bfloat16) and for any dataset whose element shapes are
  not fully static (XLA compiles one program for one shape)."""
  if runtime.mixed_precision == "mixed_float16":
    raise ConfigError("Runtime.mixed_precision = 'mixed_float16' on a TPU: TPUs compute in "
                      "bfloat16; set Runtime.mixed_precision = 'mixed_bfloat16'")
  for name, dataset in datasets.items():
    for spec in tf.nest.flatten(dataset.element_spec):
      if not spec.shape.is_fully_defined():
        raise ConfigError(f"the {name} data's elements have shape {spec.shape}, not static; "
                          "a TPU needs fixed shapes (batch with drop_remainder, pad "
                          "evaluation to whole batches)")
  advice = []
  per_replica = pipeline.batch_size // replicas
  if per_replica % 8:
    advice.append(f"TPU: {per_replica} examples a replica is not a multiple of 8; XLA pads "
                  "the batch dimension, so a multiple of 8 (128 ideally) wastes nothing")
  if runtime.steps_per_loop == 1:
    advice.append("TPU: Runtime.steps_per_loop = 1 makes the host talk to the TPU every "
                  "step; set it to 50-200 (or an epoch's steps)")
  return advice
