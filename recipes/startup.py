"""What a run prints before it trains: TensorFlow's C++ log level, set before TensorFlow
is imported. This module imports nothing of TensorFlow's, so an entry point can call
`quiet_tensorflow()` first.

The rule (`tf_log_level`), for TF_CPP_MIN_LOG_LEVEL (0 all, 1 no INFO, 2 no WARNING,
3 no ERROR either; FATAL always prints):

1. A value the user set is kept, whatever it is (TF_CPP_MIN_LOG_LEVEL=0 shows all).
2. A GPU is expected (`gpu_expected`): CUDA_VISIBLE_DEVICES names devices (set, and
   neither empty nor -1), or, when it is unset, the machine has NVIDIA device nodes
   (/dev/nvidia0, /dev/nvidia1, ...). Then 1: INFO is hidden, TensorFlow's warnings
   and errors stay on stderr, because on such a machine they are how a real problem
   shows (a CUDA library that does not load, a driver too old, a failed cuInit).
3. Otherwise (no NVIDIA device, or CUDA_VISIBLE_DEVICES empty or -1: the GPUs hidden on
   purpose) 3: TensorFlow's C++ log lines are hidden. On a CPU-only machine its
   start-up prints an error it cannot act on (`failed call to cuInit: ... (303)`: the
   CUDA build looking for a GPU) and a warning about tf.distribute's own input
   iterator (`GeneratorDatasetOp::Dataset will not be optimized`), which a reader
   takes for failures. A failure that matters still reaches the run as a Python
   exception, which the entry point reports in one line.

That warning is not our data's: the in-memory sources are `from_tensor_slices` over
arrays. `distribute_datasets_from_function` iterates through an
OwnedMultiDeviceIterator for every strategy, one device included, and its per-device
dataset is a GeneratorDataset op, which tf.data cannot rewrite; a plain
`from_tensor_slices(...).batch(4)` iterated that way prints it. Only per-replica input
without fetching to the device avoids that iterator, which would change how the
pipeline is sharded, so the line is left to the log level.

The run then says in one line which devices it uses (`strategies.describe_devices`),
and, when a GPU was expected but TensorFlow found none, that it was expected.
"""

import glob
import os

ENV = "TF_CPP_MIN_LOG_LEVEL"
GPU_LEVEL = "1"  # a GPU is expected: TensorFlow's warnings and errors shown
CPU_LEVEL = "3"  # no GPU expected: TensorFlow's C++ log lines hidden


def nvidia_device_nodes():
  """The NVIDIA GPU device nodes of this machine (/dev/nvidia0, ...); [] without."""
  return sorted(glob.glob("/dev/nvidia[0-9]*"))


def gpu_expected(environ=None, device_nodes=None):
  """True when this process should find a GPU: CUDA_VISIBLE_DEVICES names devices, or
  it is unset and the machine has NVIDIA device nodes (`device_nodes`; by default
  those of /dev)."""
  environ = os.environ if environ is None else environ
  visible = environ.get("CUDA_VISIBLE_DEVICES")
  if visible is not None:
    return visible.strip() not in ("", "-1")
  return bool(nvidia_device_nodes() if device_nodes is None else device_nodes)


def tf_log_level(environ=None, device_nodes=None):
  """The TF_CPP_MIN_LOG_LEVEL a run starts with (the rule in the module docstring)."""
  environ = os.environ if environ is None else environ
  if environ.get(ENV, "") != "":
    return environ[ENV]
  return GPU_LEVEL if gpu_expected(environ, device_nodes) else CPU_LEVEL


def quiet_tensorflow(environ=None):
  """Sets TF_CPP_MIN_LOG_LEVEL by the rule, unless the user set it; returns it. Call
  it before anything imports TensorFlow (the level is read once, at import)."""
  environ = os.environ if environ is None else environ
  environ[ENV] = tf_log_level(environ)
  return environ[ENV]
