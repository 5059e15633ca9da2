"""ACNet: the fused convolution equals the training-time block in inference mode."""

from absl.testing import parameterized
import numpy as np
import tensorflow as tf

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


if __name__ == "__main__":
  tf.test.main()
