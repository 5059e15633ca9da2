"""`--strategy` names to tf.distribute strategies."""

import tensorflow as tf

from recipes.errors import ConfigError

NAMES = ("auto", "one_device", "mirrored", "multi_worker_mirrored", "tpu")


def configure_devices(gpu_memory_growth=False):
  """Device settings that must precede any use of the devices (so, the strategy):
  GPU memory allocated as needed rather than all at once."""
  if gpu_memory_growth:
    for gpu in tf.config.list_physical_devices("GPU"):
      tf.config.experimental.set_memory_growth(gpu, True)


def make_strategy(name, tpu=""):
  """The tf.distribute strategy called `name` (one of NAMES).

  auto: MirroredStrategy over all local GPUs when there are several, else one device.
  one_device: the first GPU, or the CPU. mirrored: MirroredStrategy over local GPUs
  (the CPU without). multi_worker_mirrored: the cluster in TF_CONFIG. tpu: `tpu` is
  the TPU's name or grpc:// address ("local" on a TPU VM).
  """
  gpus = tf.config.list_logical_devices("GPU")
  if name == "auto":
    name = "mirrored" if len(gpus) > 1 else "one_device"
  if name == "one_device":
    return tf.distribute.OneDeviceStrategy(gpus[0].name if gpus else "/cpu:0")
  if name == "mirrored":
    return tf.distribute.MirroredStrategy()
  if name == "multi_worker_mirrored":
    return tf.distribute.MultiWorkerMirroredStrategy()
  if name == "tpu":
    if not tpu:
      raise ConfigError("--strategy=tpu needs --tpu=<name, grpc:// address or 'local'>")
    resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu)
    tf.config.experimental_connect_to_cluster(resolver)
    tf.tpu.experimental.initialize_tpu_system(resolver)
    return tf.distribute.TPUStrategy(resolver)
  raise ConfigError(f"unknown --strategy={name!r}; choose one of {', '.join(NAMES)}")
