"""`--strategy` names to tf.distribute strategies."""

import os

import tensorflow as tf

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
  (SlurmClusterResolver: one worker a task). tpu: `tpu` is the TPU's name or grpc:// address ("local" on a
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


def slurm_resolver():
  """The Slurm job step's tasks as a cluster (one worker a task, task 0 the chief)."""
  missing = [v for v in ("SLURM_PROCID", "SLURM_STEP_NUM_TASKS", "SLURM_STEP_NODELIST")
             if v not in os.environ]
  if missing:
    raise ConfigError(f"--cluster=slurm needs a Slurm job step ({missing[0]} is not set); "
                      "start the workers with srun inside an sbatch job")
  # Slurm binds each task's GPUs itself (--gpus-per-task); the resolver only places
  # the workers (its own GPU query runs nvidia-smi, absent on CPU nodes).
  return tf.distribute.cluster_resolver.SlurmClusterResolver(
      gpus_per_node=int(os.environ.get("SLURM_GPUS_ON_NODE", "0") or 0),
      auto_set_gpu=False)


def is_chief(strategy):
  """Whether this worker writes the run's outputs (multi-worker: the chief, or worker
  0 when there is no chief)."""
  resolver = getattr(strategy, "cluster_resolver", None)
  if resolver is None or not resolver.task_type:
    return True
  spec = resolver.cluster_spec().as_dict()
  if "chief" in spec:
    return resolver.task_type == "chief"
  return resolver.task_type == "worker" and resolver.task_id == 0
