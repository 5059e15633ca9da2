"""Focal loss against Lin et al. 2017's eq. 5 and Cui et al. 2019's code, in NumPy."""

from absl.testing import parameterized
import numpy as np
import tensorflow as tf

from tricks import focal


def lin_sigmoid(z, label, gamma, alpha=None, w=1.0):
  """sum_j -alpha_t (1 - p_t)^gamma log p_t, p = sigmoid(z_j), p_t = p for the label."""
  z = np.asarray(z, np.float64)
  total = 0.0
  for j, zj in enumerate(z):
    p, not_p = 1.0 / (1.0 + np.exp(-zj)), 1.0 / (1.0 + np.exp(zj))  # p, 1 - p
    p_t, not_p_t = (p, not_p) if j == label else (not_p, p)
    a_t = 1.0 if alpha is None else (alpha if j == label else 1.0 - alpha)
    total += -a_t * not_p_t ** gamma * np.log(p_t)
  return w * total


def cui_batch(labels_one_hot, z, alpha, gamma):
  """Cui et al.'s `focal_loss` (src/cifar_main.py), transcribed into NumPy: BCE times
  their stable modulator, weighted, summed, divided by the number of positives."""
  y, z = np.asarray(labels_one_hot, np.float64), np.asarray(z, np.float64)
  bce = np.maximum(z, 0) - z * y + np.log1p(np.exp(-np.abs(z)))
  modulator = 1.0 if gamma == 0 else np.exp(-gamma * y * z - gamma * np.log1p(np.exp(-z)))
  return np.sum(alpha * modulator * bce) / np.sum(y)


def lin_softmax(z, label, gamma, w=1.0):
  z = np.asarray(z, np.float64)
  p = np.exp(z - z.max()) / np.exp(z - z.max()).sum()
  return -w * (1.0 - p[label]) ** gamma * np.log(p[label])


class SigmoidFocalTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.product(gamma=[0.0, 0.5, 1.0, 2.0], alpha=[None, 0.25],
                         graph=[False, True])
  def test_matches_eq5(self, gamma, alpha, graph):
    rng = np.random.default_rng(0)
    z = rng.normal(scale=2.0, size=(5, 4)).astype(np.float32)
    labels = np.array([0, 1, 2, 3, 1])
    loss = focal.SigmoidFocalLoss(4, gamma=gamma, alpha=alpha)
    got = (tf.function(loss) if graph else loss)(labels, z)
    want = [lin_sigmoid(z[i], labels[i], gamma, alpha) for i in range(5)]
    self.assertAllClose(got, want, rtol=1e-5)

  @parameterized.parameters(0.0, 1.0, 2.0)
  def test_batch_mean_is_cui_et_al_loss(self, gamma):
    """With class-balanced weights, the batch mean is their normalised total."""
    rng = np.random.default_rng(1)
    z = rng.normal(scale=2.0, size=(6, 3)).astype(np.float32)
    labels = np.array([0, 1, 2, 2, 0, 1])
    w = np.array([0.4, 1.1, 1.5], np.float32)
    got = focal.SigmoidFocalLoss(3, gamma=gamma, weights=w)(labels, z)
    one_hot = np.eye(3)[labels]
    alpha = np.tile(w[labels][:, None], [1, 3])  # their per-example weight, tiled
    self.assertAllClose(np.mean(got), cui_batch(one_hot, z, alpha, gamma), rtol=1e-5)

  def test_extreme_logits_are_exact_and_finite(self):
    z = tf.constant([[100.0, -100.0, 0.0], [-100.0, 100.0, 30.0]])
    labels = np.array([1, 0])
    loss = focal.SigmoidFocalLoss(3, gamma=2.0)
    with tf.GradientTape() as tape:
      tape.watch(z)
      got = loss(labels, z)
    # Label 1 at -100: (1 - p)^2 (-log p) = 100 (p = e^-100); class 0 at 100, negative:
    # p^2 (-log(1 - p)) = 100; class 2 at 0: 0.25 log 2. Row 2 likewise, plus class 2 at
    # 30 negative: ~30.
    want = [lin_sigmoid([100.0, -100.0, 0.0], 1, 2.0),
            lin_sigmoid([-100.0, 100.0, 30.0], 0, 2.0)]
    self.assertAllClose(got, want, rtol=1e-5)
    self.assertTrue(np.all(np.isfinite(tape.gradient(got, z))))

  def test_soft_targets_are_the_expected_loss(self):
    rng = np.random.default_rng(2)
    z = rng.normal(size=(4, 3)).astype(np.float32)
    targets = rng.dirichlet(np.ones(3), size=4).astype(np.float32)
    w = np.array([0.5, 1.0, 1.5], np.float32)
    got = focal.SigmoidFocalLoss(3, gamma=2.0, weights=w)(targets, z)
    want = [sum(targets[i, k] * lin_sigmoid(z[i], k, 2.0, w=w[k]) for k in range(3))
            for i in range(4)]
    self.assertAllClose(got, want, rtol=1e-5)

  def test_bfloat16_logits(self):
    z = tf.constant([[1.5, -0.5]], tf.bfloat16)
    got = focal.SigmoidFocalLoss(2, gamma=2.0)([0], z)
    self.assertEqual(got.dtype, tf.float32)
    self.assertAllClose(got, [lin_sigmoid([1.5, -0.5], 0, 2.0)], rtol=1e-5)


class SoftmaxFocalTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.product(gamma=[0.0, 0.5, 1.0, 2.0], graph=[False, True])
  def test_matches_eq5(self, gamma, graph):
    rng = np.random.default_rng(3)
    z = rng.normal(scale=2.0, size=(5, 4)).astype(np.float32)
    labels = np.array([0, 1, 2, 3, 1])
    w = np.array([0.2, 0.8, 1.2, 1.8], np.float32)
    loss = focal.SoftmaxFocalLoss(4, gamma=gamma, weights=w)
    got = (tf.function(loss) if graph else loss)(labels, z)
    want = [lin_softmax(z[i], labels[i], gamma, w[labels[i]]) for i in range(5)]
    self.assertAllClose(got, want, rtol=1e-5)

  def test_gamma_zero_is_cross_entropy(self):
    z = tf.constant([[2.0, -1.0, 0.5], [0.0, 0.0, 3.0]])
    got = focal.SoftmaxFocalLoss(3, gamma=0.0)([1, 2], z)
    self.assertAllClose(got, tf.nn.sparse_softmax_cross_entropy_with_logits([1, 2], z))

  def test_soft_targets_are_the_expected_loss(self):
    rng = np.random.default_rng(4)
    z = rng.normal(size=(4, 3)).astype(np.float32)
    targets = rng.dirichlet(np.ones(3), size=4).astype(np.float32)
    got = focal.SoftmaxFocalLoss(3, gamma=1.0)(targets, z)
    want = [sum(targets[i, k] * lin_softmax(z[i], k, 1.0) for k in range(3)) for i in range(4)]
    self.assertAllClose(got, want, rtol=1e-5)

  def test_small_gamma_gradient_is_finite_when_certain(self):
    z = tf.constant([[200.0, 0.0, 0.0]])
    with tf.GradientTape() as tape:
      tape.watch(z)
      got = focal.SoftmaxFocalLoss(3, gamma=0.5)([0], z)
    self.assertAllClose(got, [0.0])
    self.assertTrue(np.all(np.isfinite(tape.gradient(got, z))))


class ArgumentsTest(tf.test.TestCase):

  def test_rejects_bad_arguments(self):
    with self.assertRaisesRegex(ValueError, "gamma=-1 must be a number >= 0"):
      focal.SigmoidFocalLoss(3, gamma=-1)
    with self.assertRaisesRegex(ValueError, "alpha=2 must be None or a number in"):
      focal.SigmoidFocalLoss(3, alpha=2)
    with self.assertRaisesRegex(ValueError, "3 finite numbers >= 0"):
      focal.SoftmaxFocalLoss(3, weights=[1.0, 2.0])


if __name__ == "__main__":
  tf.test.main()
