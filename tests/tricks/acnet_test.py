"""ACNet: the fused convolution equals the training-time block in inference mode."""

from absl.testing import parameterized
import numpy as np
import tensorflow as tf
import tf_keras

from tricks import acnet


def randomise_batch_norms(block, rng):
  for bn in (block.square_bn, block.hor_bn, block.ver_bn):
    c = bn.gamma.shape[0]
    bn.set_weights([rng.uniform(0.5, 2.0, c), rng.normal(size=c), rng.normal(size=c),
                    rng.uniform(0.2, 3.0, c)])


class AcnetTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.product(kernel_size=[3, 5], strides=[1, 2, 3],
                         padding=["symmetric", "valid"], size=[9, 10])
  def test_fusion_is_exact(self, kernel_size, strides, padding, size):
    rng = np.random.default_rng(kernel_size * 100 + strides * 10 + size)
    block = acnet.ACConv2D(6, kernel_size, strides=strides, padding=padding)
    x = rng.normal(size=(2, size, size + 1, 4)).astype(np.float32)
    block(x)  # build
    randomise_batch_norms(block, rng)
    want = block(x, training=False)
    fused = block.fuse()
    got = fused(x)
    self.assertEqual(got.shape, want.shape)
    self.assertAllClose(got, want, rtol=1e-4, atol=1e-4)
    self.assertLen(fused.trainable_weights, 2)  # one kernel, one bias

  def test_branches_by_hand(self):
    """One output pixel computed from the three kernels directly (no BN effect)."""
    block = acnet.ACConv2D(1, 3, padding="valid", epsilon=0.0)
    x = np.arange(25, dtype=np.float32).reshape(1, 5, 5, 1)
    block(x)
    for bn in (block.square_bn, block.hor_bn, block.ver_bn):
      bn.set_weights([np.ones(1), np.zeros(1), np.zeros(1), np.ones(1)])
    sq, hor, ver = (np.random.default_rng(i).normal(size=s).astype(np.float32)
                    for i, s in enumerate([(3, 3, 1, 1), (1, 3, 1, 1), (3, 1, 1, 1)]))
    block.square.set_weights([sq])
    block.hor.set_weights([hor])
    block.ver.set_weights([ver])
    patch = x[0, 1:4, 1:4, 0]  # the window of output (1, 1)
    want = ((patch * sq[..., 0, 0]).sum() + (patch[1] * hor[0, :, 0, 0]).sum()
            + (patch[:, 1] * ver[:, 0, 0, 0]).sum())
    self.assertAllClose(block(x, training=False)[0, 1, 1, 0], want, rtol=1e-5)
    self.assertAllClose(block.fuse()(x)[0, 1, 1, 0], want, rtol=1e-5)

  def test_trains_and_updates_moving_statistics(self):
    block = acnet.ACConv2D(3, 3)
    x = tf.random.stateless_normal([4, 6, 6, 2], seed=[0, 1]) + 3.0
    with tf.GradientTape() as tape:
      loss = tf.reduce_sum(block(x, training=True) ** 2)
    grads = tape.gradient(loss, block.trainable_weights)
    self.assertLen(grads, 9)  # 3 kernels + 3 (gamma, beta)
    self.assertTrue(all(g is not None for g in grads))
    self.assertNotAllClose(block.square_bn.moving_mean, np.zeros(3))

  def test_rejects_what_cannot_fuse(self):
    with self.assertRaisesRegex(ValueError, "TF 'same' pads unevenly"):
      acnet.ACConv2D(4, 3, padding="same")
    with self.assertRaisesRegex(ValueError, "odd kernel_size"):
      acnet.ACConv2D(4, 4)

  @parameterized.product(policy=["mixed_float16", "mixed_bfloat16"], graph=[False, True])
  def test_reduced_precision_block_and_fusion(self, policy, graph):
    """The block under a mixed policy, eagerly and in tf.function, against float32."""
    rng = np.random.default_rng(7)
    x = rng.normal(size=(2, 8, 8, 4)).astype(np.float32)
    reference = acnet.ACConv2D(5, 3, strides=2)
    reference(x)
    randomise_batch_norms(reference, rng)
    want = reference(x, training=False)
    tf_keras.mixed_precision.set_global_policy(policy)
    try:
      block = acnet.ACConv2D(5, 3, strides=2)
      block(x)
      block.set_weights(reference.get_weights())
      call = tf.function(block) if graph else block
      got = call(x, training=False)
      self.assertEqual(got.dtype, tf.as_dtype(policy.split("_")[1]))
      tol = 2e-2 if policy == "mixed_float16" else 1e-1
      self.assertAllClose(tf.cast(got, tf.float32), want, rtol=tol, atol=tol)
      fused = block.fuse()
      self.assertAllClose(tf.cast((tf.function(fused) if graph else fused)(x), tf.float32),
                          want, rtol=tol, atol=tol)
    finally:
      tf_keras.mixed_precision.set_global_policy("float32")


class ConvertModelTest(tf.test.TestCase):

  def conv_bn_model(self, strides):
    inputs = tf_keras.Input((9, 9, 3))
    x = tf_keras.layers.Conv2D(4, 3, padding="same", use_bias=False, name="c1")(inputs)
    x = tf_keras.layers.BatchNormalization(name="bn1")(x)
    x = tf_keras.layers.ReLU()(x)
    x = tf_keras.layers.Conv2D(6, 3, strides=strides, padding="same", name="c2")(x)
    x = tf_keras.layers.BatchNormalization(name="bn2")(x)
    x = tf_keras.layers.Conv2D(6, 1, name="pointwise")(x)  # 1 x 1: left alone
    x = tf_keras.layers.GlobalAveragePooling2D()(x)
    model = tf_keras.Model(inputs, tf_keras.layers.Dense(2, name="head")(x))
    rng = np.random.default_rng(strides)
    for name in ("bn1", "bn2"):
      c = model.get_layer(name).gamma.shape[0]
      model.get_layer(name).set_weights([rng.uniform(0.5, 2, c), rng.normal(size=c),
                                         rng.normal(size=c), rng.uniform(0.5, 2, c)])
    model.get_layer("c2").bias.assign(rng.normal(size=6))
    return model

  def test_convert_carries_the_pair_and_fuses_exactly(self):
    model = self.conv_bn_model(strides=1)
    converted = acnet.convert(model)
    blocks = [l for l in converted.layers if isinstance(l, acnet.ACConv2D)]
    self.assertEqual([b.name for b in blocks], ["c1", "c2"])
    x = np.random.default_rng(0).normal(size=(4, 9, 9, 3)).astype(np.float32)
    # With the new branches silenced, the converted model is the original one.
    for block in blocks:
      for bn in (block.hor_bn, block.ver_bn):
        bn.gamma.assign(tf.zeros_like(bn.gamma))
    self.assertAllClose(converted(x, training=False), model(x, training=False),
                        rtol=1e-5, atol=1e-5)

  def test_fused_model_equals_the_trained_block_model(self):
    for strides in (1, 2):
      converted = acnet.convert(self.conv_bn_model(strides))
      x = np.random.default_rng(1).normal(size=(4, 9, 9, 3)).astype(np.float32)
      for _ in range(3):  # move every branch's moving statistics
        converted(x, training=True)
      fused = acnet.fuse_model(converted)
      self.assertFalse(any(isinstance(l, acnet.ACConv2D) for l in fused.layers))
      self.assertAllClose(fused(x), converted(x, training=False), rtol=1e-4, atol=1e-4)

  def test_refuses_models_without_pairs(self):
    inputs = tf_keras.Input((4, 4, 3))
    model = tf_keras.Model(inputs, tf_keras.layers.Conv2D(2, 3)(inputs))
    with self.assertRaisesRegex(ValueError, "no odd k x k Conv2D followed by"):
      acnet.convert(model)
    with self.assertRaisesRegex(ValueError, "no ACConv2D"):
      acnet.fuse_model(model)


if __name__ == "__main__":
  tf.test.main()
