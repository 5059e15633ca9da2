"""Grouped convolution through TensorFlow's fastest kernel on each device.

A grouped convolution (Krizhevsky et al. 2012; Xie et al. 2017, ResNeXt; the 3x3
convolutions of NFNets, group width 128) splits the C input channels into G groups,
each convolved with its own C_out / G filters:

    y[..., g] = conv(x[..., g], W[..., g]),   g = 1..G,

the HWIO kernel W holding C / G input channels. Three kernels run it, with the same
numbers up to float summation order:

- "native": one `tf.nn.convolution` with the grouped kernel (cuDNN on GPU, XLA's
  feature groups on TPU, oneDNN on CPU). TensorFlow's CPU kernel has grouped
  gradients only through oneDNN (on by default on x86 Linux; `TF_ENABLE_ONEDNN_OPTS=0`
  turns it off, and other builds may lack it), and only in float32 and bfloat16: a
  float16 grouped gradient on CPU fails ("filter_size does not have enough elements").
- "split": one ordinary convolution per group, concatenated: what the CPU
  differentiates in every dtype, and what XLA compiles well on CPU, where XLA's own
  grouped convolution is 10-60x slower than either (forward and backward on a 2-core
  CPU, 2026-11-23: 463 ms against 71 ms for 8x32x32x256 at 2 groups; 795 ms against
  27 ms for 8x8x8x1536 at 12).
- "xla": tf_keras's own path, a nested `tf.function(jit_compile=True)`: slow on CPU;
  the kernel for float16 there (no native grouped gradient).

tf_keras's `Conv2D` sends every `groups > 1` convolution through "xla"; `GroupedConv2D`
is that layer choosing the kernel when it is traced (`kernel_for`): "native" on GPU and
TPU; on CPU, in float32 and bfloat16, "native" where oneDNN differentiates it and
"split" where it does not or (float32) inside an XLA function; in float16, "xla".

oneDNN's bfloat16 filter gradient on CPU (`jit_bf16:avx512_core_bf16` backward_weights,
oneDNN 3.7.3 in TensorFlow 2.20) leaves the filter taps that see only padding unwritten
when the input is narrower than the stride (SAME padding, input width < stride width,
kernel wider than 1): TensorFlow hands back an uninitialised buffer there, often
non-finite, whether the convolution is grouped or not. `benchmarks/grouped_conv_bf16.py`
reproduces it; its sweep ran 1x1 and 3x3 kernels without dilation only. Such a
convolution (only the last stages of tiny inputs, e.g. NFNet-nano at 16px), and one the
sweep never ran (a kernel of another size, a dilation above 1), runs in float32 here,
cast in and out (`bfloat16_filter_gradient_unsafe`).
"""

import functools

import tensorflow as tf
import tf_keras

KERNELS = ("native", "split", "xla")
# Kernel sizes benchmarks/grouped_conv_bf16.py swept in bfloat16 (without dilation).
SWEPT_KERNEL_SIZES = (1, 3)


@functools.lru_cache(maxsize=None)
def native_cpu_gradients(dtype="float32"):
  """Whether this TensorFlow build differentiates a grouped convolution of `dtype` on
  the CPU (with oneDNN: float32 and bfloat16, not float16)."""
  # Raw gradient ops: `init_scope` (out of any trace, into eager) pauses tapes.
  with tf.init_scope(), tf.device("/CPU:0"):
    dy = tf.ones([1, 5, 5, 4], dtype)  # a 1x1 or whole-image kernel takes a matmul path
    kernel = tf.ones([3, 3, 2, 4], dtype)
    try:
      tf.raw_ops.Conv2DBackpropInput(input_sizes=[1, 5, 5, 4], filter=kernel,
                                     out_backprop=dy, strides=[1, 1, 1, 1], padding="SAME")
      tf.raw_ops.Conv2DBackpropFilter(input=dy, filter_sizes=[3, 3, 2, 4],
                                      out_backprop=dy, strides=[1, 1, 1, 1], padding="SAME")
    except (tf.errors.UnimplementedError, tf.errors.InvalidArgumentError,
            tf.errors.NotFoundError):
      return False
  return True


def in_xla_context():
  """Whether the function being traced is compiled by XLA (`jit_compile=True`)."""
  try:
    from tensorflow.python.ops import control_flow_util  # pylint: disable=g-import-not-at-top
  except ImportError:  # TensorFlow moved it: assume no XLA (correct, maybe slower)
    return False
  return control_flow_util.GraphOrParentsInXlaContext(tf.compat.v1.get_default_graph())


def kernel_for(groups, dtype="float32"):
  """The kernel a grouped convolution of `dtype` traced now should use: "native",
  "split" or "xla"."""
  if groups == 1 or any(tf.config.list_physical_devices(d) for d in ("GPU", "TPU")):
    return "native"  # cuDNN's, or XLA's on TPU (feature groups are native there)
  dtype = tf.as_dtype(dtype)
  if in_xla_context():
    return "split" if dtype == tf.float32 else "native"
  if dtype == tf.float16:
    return "xla"  # TensorFlow's CPU kernels have no grouped float16 gradient
  return "native" if native_cpu_gradients(dtype.name) else "split"


def spatial_values(values, rank, data_format="NHWC"):
  """`strides` or `dilations` as `tf.nn.convolution` reads them, one a spatial axis: an
  int or a 1-list is every axis's; a list of rank + 2 holds the batch and channel
  axes too."""
  values = [values] if isinstance(values, int) else list(values)
  if len(values) == 1:
    return values * rank
  if len(values) == rank + 2:
    return values[1:-1] if data_format.endswith("C") else values[2:]
  return values


def bfloat16_filter_gradient_unsafe(input_shape, kernel_shape, strides, dilations=1,
                                    data_format="NHWC"):
  """Whether oneDNN's bfloat16 filter gradient may return garbage for a convolution of
  `input_shape` (static, batch first) with a `kernel_shape` (HWIO) kernel: some spatial
  input size below its stride, or unknown (the fault, seen in the width, is checked in
  both dimensions); or a case the sweep never ran: a kernel size other than
  SWEPT_KERNEL_SIZES, or unknown, or a dilation above 1."""
  input_shape, kernel_shape = tf.TensorShape(input_shape), tf.TensorShape(kernel_shape)
  if input_shape.rank is None or kernel_shape.rank is None:
    return True
  spatial = input_shape[1:-1] if data_format.endswith("C") else input_shape[2:]
  rank = len(spatial)
  strides = spatial_values(strides, rank, data_format)
  dilations = spatial_values(dilations, rank, data_format)
  return (any(size is None or size < stride for size, stride in zip(spatial, strides))
          or any(size not in SWEPT_KERNEL_SIZES for size in kernel_shape[:-2])
          or any(dilation > 1 for dilation in dilations))


def grouped_conv2d(inputs, kernel, groups, strides=1, padding="SAME", dilations=1,
                   data_format="NHWC", method=None):
  """`tf.nn.convolution` of `inputs` with an HWIO `kernel` of in_channels / `groups`
  inputs; `method` ("native", "split", "xla") forces a kernel, None picks
  `kernel_for`."""
  method = method or kernel_for(groups, inputs.dtype)
  if method not in KERNELS:
    raise ValueError(f"grouped_conv2d method={method!r}: use one of {KERNELS} or None")
  if (inputs.dtype == tf.bfloat16 and method != "xla" and not in_xla_context()
      and not any(tf.config.list_physical_devices(d) for d in ("GPU", "TPU"))
      and bfloat16_filter_gradient_unsafe(inputs.shape, kernel.shape, strides,
                                          dilations, data_format)):
    # oneDNN's bfloat16 filter gradient is wrong or untried here (module docstring).
    outputs = grouped_conv2d(tf.cast(inputs, tf.float32), tf.cast(kernel, tf.float32),
                             groups, strides, padding, dilations, data_format, method)
    return tf.cast(outputs, tf.bfloat16)
  conv = functools.partial(tf.nn.convolution, strides=strides, padding=padding,
                           dilations=dilations, data_format=data_format)
  if groups == 1 or method == "native":
    return conv(inputs, kernel)
  if method == "xla":
    return tf.function(conv, jit_compile=True, autograph=False)(inputs, kernel)
  channel_axis = -1 if data_format.endswith("C") else 1
  parts = zip(tf.split(inputs, groups, axis=channel_axis),
              tf.split(kernel, groups, axis=-1))
  return tf.concat([conv(x, k) for x, k in parts], axis=channel_axis)


@tf_keras.utils.register_keras_serializable(package="tricks")
class GroupedConv2D(tf_keras.layers.Conv2D):
  """tf_keras's `Conv2D` (same weights, config and outputs) whose grouped
  convolutions run through `grouped_conv2d` instead of tf_keras's forced XLA."""

  def convolution_op(self, inputs, kernel):
    padding = self.padding.upper() if isinstance(self.padding, str) else self.padding
    return grouped_conv2d(
        inputs, kernel, self.groups, strides=list(self.strides), padding=padding,
        dilations=list(self.dilation_rate),
        data_format="NHWC" if self.data_format == "channels_last" else "NCHW")

  def call(self, inputs):
    outputs = self.convolution_op(inputs, self.kernel)
    if self.use_bias:
      outputs = tf.nn.bias_add(
          outputs, self.bias,
          data_format="NHWC" if self.data_format == "channels_last" else "NCHW")
    if self.activation is not None:
      outputs = self.activation(outputs)
    return outputs
