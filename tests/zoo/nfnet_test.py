"""NFNet: published parameter counts, the block's signal-propagation design, training."""

from unittest import mock

from absl.testing import parameterized
import gin
import numpy as np
import tensorflow as tf
import tf_keras

from tricks import grouped_conv
from zoo import nfnet
from zoo import registry

# Parameter counts at 1000 classes. Sources: Brock et al. 2021 (arXiv:2102.06171),
# table 1 / appendix, and DeepMind's nfnets README (F0 71.5M ... F6 438.4M).
PUBLISHED_PARAMS = {
    "F0": 71.5e6,
    "F1": 132.6e6,
    "F2": 193.8e6,
    "F3": 254.9e6,
    "F4": 316.1e6,
    "F5": 377.2e6,
    "F6": 438.4e6,
}


class NfnetTest(tf.test.TestCase, parameterized.TestCase):

  def tearDown(self):
    tf_keras.backend.clear_session()
    super().tearDown()

  @parameterized.parameters(sorted(PUBLISHED_PARAMS))
  def test_parameter_count_matches_paper(self, variant):
    """The formula, to the paper's precision (0.1M), without building F1-F6."""
    count = nfnet.count_params(variant, num_classes=1000)
    self.assertEqual(round(count / 1e6, 1), PUBLISHED_PARAMS[variant] / 1e6,
                     msg=f"{variant}: {count}")

  @parameterized.parameters(
      ("nano", 1000, {}),
      ("F0", 1000, {}),
      ("nano", 7, {"width": 1.5, "se_ratio": 0.25, "expansion": 1.0,
                   "final_conv_mult": 3}),
  )
  def test_parameter_formula_equals_the_built_model(self, variant, classes, overrides):
    model = nfnet.nfnet(variant, num_classes=classes, input_shape=(None, None, 3),
                        **overrides)
    self.assertEqual(nfnet.count_params(variant, num_classes=classes, **overrides),
                     model.count_params())
    # Weight by weight (zoo/timm_checkpoint.py's test maps F1-F6 by these).
    self.assertEqual(nfnet.weight_shapes(variant, num_classes=classes, **overrides),
                     {w.name.split(":")[0]: tuple(w.shape) for w in model.weights})

  def test_parameter_formula_refuses_unknown_arguments(self):
    with self.assertRaisesRegex(ValueError, "unknown NFNet variant 'F9'"):
      nfnet.count_params("F9")
    with self.assertRaises(TypeError):
      nfnet.count_params("F0", depth=3)

  def test_design_and_its_knobs_build_alike(self):
    design = nfnet.Design(width=1.5, alpha=0.3, stochdepth_rate=0.2, dropout=0.0)
    given = nfnet.nfnet("nano", 7, (None, None, 3), design)
    knobs = nfnet.nfnet("nano", 7, (None, None, 3), width=1.5, alpha=0.3,
                        stochdepth_rate=0.2, dropout=0.0)
    self.assertEqual([(w.name, w.shape) for w in given.weights],
                     [(w.name, w.shape) for w in knobs.weights])
    self.assertEqual([layer.name for layer in given.layers],
                     [layer.name for layer in knobs.layers])
    self.assertEqual(nfnet.count_params("nano", 7, design=design), given.count_params())
    # A knob replaces that field of `design` and keeps the others.
    model = nfnet.nfnet("nano", 7, (None, None, 3), design, alpha=0.1)
    self.assertAllClose(model.get_layer("nf_block_1/alpha").scale, 0.1)
    self.assertEqual(model.get_layer("final_conv").kernel.shape[-1], 2 * 1.5 * 192)
    with self.assertRaisesRegex(TypeError, "unexpected keyword arguments \\['depth'\\]"):
      nfnet.nfnet("nano", depth=3)

  def test_knobs_bound_through_gin(self):
    """zoo.build's keywords reach the model (recipes bind zoo.build.stochdepth_rate,
    tests/recipes/cli.py zoo.build.dropout), and so do nfnet's own (docs/tricks.md),
    which the operative config records with the knobs left at the paper's values."""
    self.addCleanup(gin.clear_config)
    gin.parse_config(["zoo.build.name = 'nfnet_nano'", "zoo.build.num_classes = 3",
                      "zoo.build.input_shape = (16, 16, 3)",
                      "zoo.build.stochdepth_rate = 0.25", "zoo.build.dropout = 0.0",
                      "nfnet.alpha = 0.3", "nfnet.activation = 'relu'"])
    model = registry.build()
    layers = [layer.name for layer in model.layers]
    self.assertNotIn("dropout", layers)  # nano's own rate is 0.2
    self.assertNotIn("nf_block_0/stoch_depth", layers)  # block i drops 0.25 * i / 4
    self.assertAllClose(model.get_layer("nf_block_2/stoch_depth").rate, 0.25 * 2 / 4)
    self.assertAllClose(model.get_layer("nf_block_1/alpha").scale, 0.3)
    self.assertEqual(model.get_layer("final_act").activation, "relu")
    operative = gin.operative_config_str().splitlines()
    self.assertContainsSubset(["nfnet.alpha = 0.3", "nfnet.width = 1.0",
                               "build.stochdepth_rate = 0.25"], operative)
    self.assertNotIn("nfnet.stochdepth_rate = 0.1", operative)  # zoo.build passed it

  def test_f0_layer_shapes(self):
    model = nfnet.nfnet("F0", num_classes=1000, input_shape=(None, None, 3))
    # Stem 16-32-64-128, then stage widths 256/512/1536/1536 and a 3072 final conv.
    self.assertEqual(model.get_layer("stem_conv3").kernel.shape, (3, 3, 64, 128))
    # Block 0 bottleneck: width 128 = one group of 128; grouped conv kernels are
    # (3, 3, group_size, width).
    self.assertEqual(model.get_layer("nf_block_0/conv1").kernel.shape, (3, 3, 128, 128))
    # Stage 3 blocks: width 768 in 6 groups of 128.
    self.assertEqual(model.get_layer("nf_block_3/conv1").kernel.shape, (3, 3, 128, 768))
    self.assertEqual(model.get_layer("nf_block_3/conv1").groups, 6)
    self.assertEqual(model.get_layer("final_conv").kernel.shape, (1, 1, 1536, 3072))
    self.assertEqual(model.get_layer("nf_block_1/squeeze_excite/fc0").kernel.shape,
                     (512, 256))
    self.assertEqual(nfnet.VARIANTS["F0"].randaugment, (4, 5))

  def test_signal_propagation_constants(self):
    """beta = 1/expected_std, growing by alpha^2 per block, reset at transitions."""
    model = nfnet.nfnet("F0", num_classes=10, input_shape=(None, None, 3))
    betas = [model.get_layer(f"nf_block_{i}/beta").scale for i in range(12)]
    # Written out by hand for F0 (depths 1, 2, 6, 3; alpha^2 = 0.04): the input
    # variance grows by 0.04 per block; a stage's first block (whose shortcut is a conv
    # of the normalised input) leaves variance 1 + 0.04 behind it.
    variances = [1.0, 1.04, 1.04, 1.08, 1.04, 1.08, 1.12, 1.16, 1.20, 1.24, 1.04, 1.08]
    self.assertAllClose(betas, 1 / np.sqrt(variances))
    # Stochastic depth grows linearly with the block index: 0.1 * i / 12.
    self.assertAllClose(model.get_layer("nf_block_6/stoch_depth").rate, 0.1 * 6 / 12)

  def test_blocks_start_as_identity_on_the_shortcut(self):
    """SkipInit: with skip gains at 0 every block returns its shortcut at init."""
    model = nfnet.nfnet("nano", num_classes=10, input_shape=(32, 32, 3))
    probe = tf_keras.Model(model.input, [model.get_layer("nf_block_1/residual").output,
                                         model.get_layer("nf_block_1/conv_shortcut").output])
    out, shortcut = probe(tf.random.stateless_normal([2, 32, 32, 3], seed=[0, 1]))
    self.assertAllClose(out, shortcut)

  def test_nano_output_and_training_step(self):
    model = nfnet.nfnet("nano", num_classes=7, input_shape=(32, 32, 3))
    x = tf.random.stateless_normal([4, 32, 32, 3], seed=[1, 2])
    y = tf.constant([0, 1, 2, 3])
    self.assertEqual(model(x).shape, (4, 7))
    optimizer = tf_keras.optimizers.SGD(0.1)
    loss_fn = tf_keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    losses = []
    for _ in range(5):
      with tf.GradientTape() as tape:
        loss = loss_fn(y, model(x, training=True))
      grads = tape.gradient(loss, model.trainable_variables)
      optimizer.apply_gradients(zip(grads, model.trainable_variables))
      losses.append(float(loss))
    self.assertLess(losses[-1], losses[0])
    self.assertTrue(all(g is not None for g in grads))

  def test_nano_bfloat16_step_takes_the_fast_path_and_matches_xla(self):
    """mixed_bfloat16 at 16px, where the last stage's stride-2 grouped convolution sees
    a 1x1 input (oneDNN's bfloat16 filter gradient returns garbage there): TensorFlow's
    own kernels, no forced XLA call, gradients finite and equal to tf_keras's XLA
    path's for the same weights and batches within bfloat16 rounding: the whole
    gradient, and each grouped convolution's filter gradient (the two paths differ in
    those convolutions alone), within 5% of its norm. (Not each weight's: a skip
    gain's gradient, one scalar summing terms that cancel, differed by 2x in a trial.)"""
    tf_keras.utils.set_random_seed(0)
    tf_keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
      model = nfnet.nfnet("nano", num_classes=5, input_shape=(16, 16, 3),
                          dropout=0.0, stochdepth_rate=0.0)
    finally:
      tf_keras.mixed_precision.set_global_policy("float32")
    # At initialisation the residual branches and the classifier are zero, and so are
    # most gradients: open them so that every convolution's filter gradient counts.
    for weight in model.weights:
      if "skip_gain" in weight.name:
        weight.assign(tf.ones_like(weight))
    logits = model.get_layer("logits").kernel
    logits.assign(tf.random.stateless_normal(logits.shape, seed=[5, 6]))
    loss_fn = tf_keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def grads(x, y):
      with tf.GradientTape() as tape:
        loss = loss_fn(y, tf.cast(model(x, training=True), tf.float32))
      return tape.gradient(loss, model.trainable_weights)

    # One trace each (the signature admits every batch size), `xla`'s under tf_keras's
    # kernel choice: every call below runs the graph traced here.
    signature = (tf.TensorSpec([None, 16, 16, 3]), tf.TensorSpec([None], tf.int32))
    fast = tf.function(grads, input_signature=signature)
    xla = tf.function(grads, input_signature=signature)
    tf_keras_path = lambda groups, dtype="float32": "xla" if groups > 1 else "native"
    with mock.patch.object(grouped_conv, "kernel_for", tf_keras_path):
      xla_graph = xla.get_concrete_function().graph
    fast_graph = fast.get_concrete_function().graph
    must_compile = lambda graph: any(op.node_def.attr["_XlaMustCompile"].b
                                     for op in graph.get_operations())
    self.assertTrue(must_compile(xla_graph))  # tf_keras's nested XLA call is there
    self.assertFalse(must_compile(fast_graph))
    grouped = {layer.kernel.name for layer in model.layers
               if getattr(layer, "groups", 1) > 1}
    self.assertLen(grouped, 8)  # conv1 and conv1b of each of nano's 4 blocks

    def close(got, want, name):  # bfloat16 rounding apart: within 5% of the norm
      self.assertLessEqual(float(tf.norm(got - want)), 0.05 * float(tf.norm(want)) + 1e-6,
                           msg=name)

    flat = lambda tensors: tf.concat([tf.reshape(t, [-1]) for t in tensors], 0)
    for seed in range(4):
      x = tf.random.stateless_normal([8, 16, 16, 3], seed=[seed, 0])
      y = tf.random.stateless_uniform([8], seed=[seed, 1], maxval=5, dtype=tf.int32)
      got, want = fast(x, y), xla(x, y)
      for weight, g, w in zip(model.trainable_weights, got, want):
        self.assertTrue(np.isfinite(g.numpy()).all(), msg=weight.name)
        if weight.name in grouped:
          close(g, w, weight.name)
      close(flat(got), flat(want), f"the whole gradient, batch {seed}")
    self.assertEqual([fast.experimental_get_tracing_count(),
                      xla.experimental_get_tracing_count()], [1, 1])

  def test_open_input_shape_takes_train_and_test_resolutions(self):
    model = nfnet.nfnet("nano", num_classes=3, input_shape=(None, None, 3))
    for size in (32, 48):
      self.assertEqual(model(tf.zeros([1, size, size, 3])).shape, (1, 3))

  def test_unknown_variant(self):
    with self.assertRaisesRegex(ValueError, "unknown NFNet variant 'F9'"):
      nfnet.nfnet("F9")


if __name__ == "__main__":
  tf.test.main()
