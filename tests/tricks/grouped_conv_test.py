"""Grouped convolution: both kernels against a dense convolution with a block-diagonal
kernel (the definition), and the layer against tf_keras's `Conv2D`."""

import os
import subprocess
import sys

from absl.testing import parameterized
import numpy as np
import tensorflow as tf
import tf_keras

from tricks import grouped_conv


def block_diagonal(kernel, groups):
  """The dense HWIO kernel equal to a grouped one: group g's filters see only the
  input channels of group g, zeros elsewhere."""
  h, w, cin_g, cout = kernel.shape
  cout_g = cout // groups
  dense = np.zeros((h, w, cin_g * groups, cout), kernel.dtype)
  for g in range(groups):
    dense[:, :, g * cin_g:(g + 1) * cin_g, g * cout_g:(g + 1) * cout_g] = (
        kernel[..., g * cout_g:(g + 1) * cout_g])
  return dense


def loss_and_grads(conv, x, kernel):
  """sum(y * r) and its gradients: a fixed random projection, so every output counts
  (r rounded to bfloat16, so that bfloat16 and float32 see the same r)."""
  with tf.GradientTape() as tape:
    tape.watch([x, kernel])
    y = conv(x, kernel)
    r = tf.random.stateless_normal(tf.shape(y), seed=[7, 7])
    r = tf.cast(tf.cast(r, tf.bfloat16), y.dtype)  # the same numbers in every dtype
    loss = tf.reduce_sum(y * r)
  return (y, *tape.gradient(loss, [x, kernel]))


def cpu_has(flag):
  """Whether /proc/cpuinfo lists instruction-set `flag` for this CPU."""
  with open("/proc/cpuinfo") as f:
    return any(line.startswith("flags") and flag in line.split() for line in f)


class GroupedConvTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.product(
      method=["native", "split"],
      case=[dict(groups=2, strides=1, padding="SAME", dilations=1),
            dict(groups=4, strides=2, padding="SAME", dilations=1),
            dict(groups=3, strides=1, padding="VALID", dilations=2)])
  def test_equals_dense_convolution_with_block_diagonal_kernel(self, method, case):
    if method == "native" and not grouped_conv.native_cpu_gradients():
      self.skipTest("this TensorFlow build has no native grouped gradients on CPU")
    groups = case["groups"]
    rng = np.random.default_rng(groups)
    x = tf.constant(rng.normal(size=(2, 9, 9, 4 * groups)).astype(np.float32))
    kernel = rng.normal(size=(3, 3, 4, 2 * groups)).astype(np.float32)
    args = dict(strides=case["strides"], padding=case["padding"],
                dilations=case["dilations"])

    y, dx, dk = tf.function(loss_and_grads, autograph=False)(
        lambda a, k: grouped_conv.grouped_conv2d(a, k, groups, method=method, **args),
        x, tf.constant(kernel))
    dense = tf.constant(block_diagonal(kernel, groups))
    want_y, want_dx, want_dense_dk = loss_and_grads(
        lambda a, k: tf.nn.convolution(a, k, **args), x, dense)
    self.assertAllClose(y, want_y, rtol=1e-5, atol=1e-4)
    self.assertAllClose(dx, want_dx, rtol=1e-5, atol=1e-4)
    # The grouped kernel's gradient is the dense gradient's diagonal blocks.
    cout_g = 2
    want_dk = np.concatenate(
        [want_dense_dk.numpy()[:, :, g * 4:(g + 1) * 4, g * cout_g:(g + 1) * cout_g]
         for g in range(groups)], axis=-1)
    self.assertAllClose(dk, want_dk, rtol=1e-5, atol=1e-4)

  def test_kernel_choice(self):
    self.assertEqual(grouped_conv.kernel_for(1), "native")
    if tf.config.list_physical_devices("GPU"):
      self.skipTest("with a GPU every grouped convolution is native (cuDNN)")
    chosen = {}

    def trace(name):
      def fn(x):
        chosen[name] = grouped_conv.kernel_for(4)
        return x
      return fn

    tf.function(trace("graph"))(tf.ones(1))
    tf.function(trace("xla"), jit_compile=True)(tf.ones(1))
    native = "native" if grouped_conv.native_cpu_gradients() else "split"
    self.assertEqual(chosen, {"graph": native, "xla": "split"})
    # TensorFlow's CPU kernels have a grouped float16 gradient only where oneDNN finds
    # AVX512-FP16 (oneDNN's float16 requirement on x86: True on a Xeon with it, False
    # on an AMD EPYC); float16 takes XLA on every CPU all the same, one path everywhere.
    # bfloat16 takes TensorFlow's own kernel where it has one, not tf_keras's slow XLA.
    self.assertEqual(grouped_conv.native_cpu_gradients("float16"), cpu_has("avx512_fp16"))
    self.assertEqual(grouped_conv.kernel_for(4, tf.float16), "xla")
    native_bf16 = "native" if grouped_conv.native_cpu_gradients("bfloat16") else "split"
    self.assertEqual(grouped_conv.kernel_for(4, tf.bfloat16), native_bf16)

  @parameterized.product(
      method=["native", "split"], groups=[1, 4],
      case=[dict(shape=[2, 1, 1, 16], strides=2), dict(shape=[2, 3, 2, 16], strides=3),
            dict(shape=[2, 3, 1, 16], strides=[1, 2])])
  def test_bfloat16_input_narrower_than_stride(self, method, groups, case):
    """oneDNN's bfloat16 filter gradient leaves the taps that see only padding
    uninitialised when the input is narrower than the stride (often non-finite, not
    on every call): against float32 on the same bfloat16-rounded numbers, ten calls."""
    if method == "native" and not grouped_conv.native_cpu_gradients("bfloat16"):
      self.skipTest("this TensorFlow build has no native grouped gradients on CPU")
    conv = lambda a, k: grouped_conv.grouped_conv2d(  # pylint: disable=g-long-lambda
        a, k, groups, strides=case["strides"], method=method)
    for seed in range(10):
      rng = np.random.default_rng(seed)
      x = tf.cast(rng.normal(size=case["shape"]), tf.bfloat16)
      kernel = tf.cast(rng.normal(size=(3, 3, 16 // groups, 8)), tf.bfloat16)
      got = loss_and_grads(conv, x, kernel)
      want = loss_and_grads(conv, tf.cast(x, tf.float32), tf.cast(kernel, tf.float32))
      for name, g, w in zip(("output", "input gradient", "filter gradient"), got, want):
        self.assertEqual(g.dtype, tf.bfloat16)
        # bfloat16 keeps 8 bits: a few roundings of 2^-8 of the largest value.
        self.assertAllClose(tf.cast(g, tf.float32), w, rtol=0,
                            atol=3e-2 * float(tf.reduce_max(tf.abs(w))) + 1e-3,
                            msg=f"{name}, call {seed}")

  def test_bfloat16_filter_gradient_unsafe(self):
    unsafe = grouped_conv.bfloat16_filter_gradient_unsafe
    k3 = [3, 3, 16, 16]
    self.assertTrue(unsafe([8, 1, 1, 16], k3, 2))
    self.assertTrue(unsafe([8, 4, 2, 16], k3, [1, 3]))
    self.assertTrue(unsafe([8, 16, 1, 1], k3, [1, 1, 2, 2], data_format="NCHW"))
    self.assertTrue(unsafe([None, None, None, 16], k3, 2))  # unknown: assume the worst
    self.assertTrue(unsafe(tf.TensorShape(None), k3, 1))
    self.assertFalse(unsafe([8, 2, 2, 16], k3, 2))
    self.assertFalse(unsafe([None, 1, 1, 16], k3, [1, 1, 1, 1]))
    self.assertFalse(unsafe([8, 16, 4, 4], k3, [1, 1, 2, 2], data_format="NCHW"))
    self.assertFalse(unsafe([8, 1, 1, 16], [1, 1, 16, 16], 1))
    # A 1-list (as an int) is every spatial axis's stride, as tf.nn.convolution reads
    # it: the width, 1 here, is below it too.
    self.assertTrue(unsafe([8, 4, 1, 16], k3, [2]))
    self.assertTrue(unsafe([8, 16, 4, 1], k3, (2,), data_format="NCHW"))
    self.assertFalse(unsafe([8, 4, 4, 16], k3, [2]))
    # What the sweep never ran in bfloat16: other kernel sizes, dilations above 1.
    for kernel in ([5, 5, 16, 16], [1, 7, 16, 16], [2, 2, 16, 16], [None, 3, 16, 16]):
      self.assertTrue(unsafe([8, 16, 16, 16], kernel, 1), kernel)
    self.assertFalse(unsafe([8, 16, 16, 16], k3, 1, dilations=[1, 1]))
    self.assertTrue(unsafe([8, 16, 16, 16], k3, 1, dilations=2))
    self.assertTrue(unsafe([8, 16, 16, 16], k3, 1, dilations=[2]))
    self.assertTrue(unsafe([8, 16, 16, 16], k3, 1, dilations=[1, 1, 2, 1]))

  @parameterized.named_parameters(
      ("swept", dict(kernel=3), "bfloat16"),
      ("kernel_5", dict(kernel=5), "float32"),
      ("dilation_2", dict(kernel=3, dilations=2), "float32"),
      ("stride_in_a_1_list", dict(kernel=3, shape=[2, 8, 1, 16], strides=[2]), "float32"))
  def test_bfloat16_guard_decides_the_dtype(self, case, dtype):
    """The dtype the traced convolution (forward and both gradients) runs in: bfloat16
    where the sweep found oneDNN right, float32 (cast in and out) elsewhere."""
    if tf.config.list_physical_devices("GPU"):
      self.skipTest("the guard is oneDNN's on CPU")
    x = tf.zeros(case.get("shape", [2, 8, 8, 16]), tf.bfloat16)
    kernel = tf.zeros([case["kernel"], case["kernel"], 4, 16], tf.bfloat16)
    conv = lambda a, k: grouped_conv.grouped_conv2d(  # pylint: disable=g-long-lambda
        a, k, 4, strides=case.get("strides", 1), dilations=case.get("dilations", 1),
        method="native")
    graph = tf.function(loss_and_grads, autograph=False).get_concrete_function(
        conv, x, kernel).graph
    ops = [op for op in graph.get_operations() if op.type.startswith("Conv2D")]
    self.assertCountEqual({op.type for op in ops},
                          ["Conv2D", "Conv2DBackpropInput", "Conv2DBackpropFilter"])
    self.assertEqual({op.get_attr("T").name for op in ops}, {dtype})

  @parameterized.parameters("mixed_float16", "mixed_bfloat16")
  def test_layer_trains_in_mixed_precision(self, policy):
    """The float16 case failed inside TensorFlow before the kernel choice knew dtypes."""
    layer = grouped_conv.GroupedConv2D(8, 3, groups=4, padding="same", dtype=policy)
    reference = grouped_conv.GroupedConv2D(8, 3, groups=4, padding="same")
    x = tf.random.stateless_normal([2, 6, 6, 8], seed=[3, 4])
    layer(x)
    reference(x)
    reference.set_weights(layer.get_weights())

    @tf.function
    def grads(layer):
      with tf.GradientTape() as tape:
        loss = tf.reduce_sum(tf.cast(layer(x), tf.float32) ** 2)
      return tape.gradient(loss, layer.trainable_weights)

    for got, want in zip(grads(layer), grads(reference)):
      self.assertAllClose(got, want, rtol=5e-2, atol=5e-1)

  def test_unknown_method(self):
    with self.assertRaisesRegex(ValueError, "method='fast'"):
      grouped_conv.grouped_conv2d(tf.ones([1, 3, 3, 4]), tf.ones([1, 1, 2, 4]), 2,
                                  method="fast")

  @parameterized.parameters(1, 2, 8)
  def test_layer_equals_tf_keras_conv2d(self, groups):
    kwargs = dict(filters=16, kernel_size=3, strides=2, padding="same", groups=groups,
                  activation="relu")
    ours = grouped_conv.GroupedConv2D(**kwargs)
    theirs = tf_keras.layers.Conv2D(**kwargs)
    x = tf.random.stateless_normal([2, 8, 8, 16], seed=[1, 2])
    ours(x)
    theirs(x)
    theirs.set_weights(ours.get_weights())
    self.assertEqual(ours.get_config()["groups"], groups)

    def step(layer):
      with tf.GradientTape() as tape:
        y = layer(x)
        loss = tf.reduce_sum(y * tf.cos(y))
      return [y] + tape.gradient(loss, layer.trainable_weights)

    for got, want in zip(tf.function(step)(ours), tf.function(step)(theirs)):
      self.assertAllClose(got, want, rtol=1e-5, atol=1e-5)

  def test_layer_graph_has_no_forced_xla_call(self):
    """tf_keras's Conv2D wraps a grouped convolution in an XLA-compiled call; ours
    does not (the cause of a 10x slower NFNet step on CPU)."""

    def must_compile(layer):
      x = tf.TensorSpec([1, 4, 4, 8])
      graph = tf.function(layer).get_concrete_function(x).graph
      return any(op.node_def.attr["_XlaMustCompile"].b for op in graph.get_operations())

    self.assertTrue(must_compile(tf_keras.layers.Conv2D(8, 3, groups=2)))
    self.assertFalse(must_compile(grouped_conv.GroupedConv2D(8, 3, groups=2)))

  def test_without_onednn_gradients_fall_back_to_split(self):
    """TensorFlow's plain CPU kernel cannot differentiate a grouped convolution; with
    oneDNN off the layer still trains, through the split kernel."""
    script = (
        "import tensorflow as tf\n"
        "from tricks import grouped_conv\n"
        "layer = grouped_conv.GroupedConv2D(8, 3, groups=4)\n"
        "x = tf.ones([1, 5, 5, 8])\n"
        "with tf.GradientTape() as tape:\n"
        "  loss = tf.reduce_sum(layer(x))\n"
        "grads = tape.gradient(loss, layer.trainable_weights)\n"
        "print(grouped_conv.native_cpu_gradients(), grouped_conv.kernel_for(4),\n"
        "      all(bool(tf.reduce_all(tf.math.is_finite(g))) for g in grads))\n")
    env = dict(os.environ, TF_ENABLE_ONEDNN_OPTS="0", CUDA_VISIBLE_DEVICES="",
               TF_CPP_MIN_LOG_LEVEL="3")
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                         text=True, check=False)
    self.assertEqual(out.returncode, 0, out.stderr[-2000:])
    self.assertEqual(out.stdout.split(), ["False", "split", "True"])


if __name__ == "__main__":
  tf.test.main()
