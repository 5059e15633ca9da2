"""LDAM (Cao et al. 2019, eq. 13) and NormedLinear against the paper's formulas in NumPy."""

from absl.testing import parameterized
import numpy as np
import tensorflow as tf
import tf_keras

from tricks import ldam

# CIFAR-10-LT, rho = 100 (Cao et al.'s profile: 5000 * 0.01^(i / 9), floored).
CIFAR10_LT = [5000, 2997, 1796, 1077, 645, 387, 232, 139, 83, 50]


def numpy_margins(counts, max_m):
  # Delta_j = C / n_j^(1/4); the rarest class (min n) gets max_m: C = max_m * min(n)^(1/4).
  counts = np.asarray(counts, np.float64)
  c = max_m * counts.min() ** 0.25
  return c / counts ** 0.25


def numpy_ldam(logits, label, counts, max_m=0.5, s=30.0):
  """-log(e^{s(z_y - D_y)} / (e^{s(z_y - D_y)} + sum_{j != y} e^{s z_j})), float64."""
  z = np.asarray(logits, np.float64)
  delta = numpy_margins(counts, max_m)
  true = s * (z[label] - delta[label])
  others = np.array([s * z[j] for j in range(len(z)) if j != label])
  return np.log1p(np.exp(others - true).sum())  # the same, without cancellation


class LDAMTest(tf.test.TestCase, parameterized.TestCase):

  def test_margins(self):
    got = ldam.margins(CIFAR10_LT, max_m=0.5)
    self.assertAllClose(got, numpy_margins(CIFAR10_LT, 0.5), rtol=1e-6)
    self.assertAllClose(got[-1], 0.5)  # the rarest class
    self.assertAllClose(got[0], 0.5 * (50 / 5000) ** 0.25, rtol=1e-6)  # 0.1581

  @parameterized.product(graph=[False, True], dtype=[tf.float32, tf.bfloat16])
  def test_matches_eq13(self, graph, dtype):
    rng = np.random.default_rng(0)
    counts = [500, 120, 30, 5]
    cosines = np.tanh(rng.normal(size=(6, 4))).astype(np.float32)
    labels = np.array([0, 1, 2, 3, 3, 0])
    loss = ldam.LDAMLoss(counts)
    got = (tf.function(loss) if graph else loss)(labels, tf.cast(cosines, dtype))
    z = tf.cast(tf.cast(cosines, dtype), tf.float32).numpy()
    want = [numpy_ldam(z[i], labels[i], counts) for i in range(6)]
    self.assertAllClose(got, want, rtol=1e-5, atol=2e-5)

  def test_margin_on_true_class_only(self):
    """Equal logits: the loss is that of a softmax with the true logit lowered by s*D_y."""
    counts = [100, 1]
    loss = ldam.LDAMLoss(counts, max_m=0.5, s=30.0)([0, 1], tf.zeros([2, 2]))
    d = numpy_margins(counts, 0.5)
    self.assertAllClose(loss, [np.log1p(np.exp(30 * d[0])), np.log1p(np.exp(15.0))],
                        rtol=1e-6)

  @parameterized.parameters(False, True)
  def test_soft_targets_are_the_expected_loss(self, graph):
    rng = np.random.default_rng(1)
    counts = [50, 20, 5]
    z = np.tanh(rng.normal(size=(5, 3))).astype(np.float32)
    targets = rng.dirichlet(np.ones(3), size=5).astype(np.float32)
    w = np.array([0.3, 1.0, 1.7], np.float32)
    loss = ldam.LDAMLoss(counts, weights=w)
    got = (tf.function(loss) if graph else loss)(targets, z)
    per_class = np.array([[numpy_ldam(z[i], k, counts) for k in range(3)] for i in range(5)])
    self.assertAllClose(got, (targets * w * per_class).sum(axis=1), rtol=1e-5)
    # One-hot soft targets give the hard-label loss.
    labels = np.array([0, 2, 1, 1, 0])
    self.assertAllClose(loss(tf.one_hot(labels, 3), z), loss(labels, z), rtol=1e-5, atol=1e-6)

  def test_soft_path_keeps_confident_examples_exact(self):
    """Cosines at +-1 with s = 30: losses near 1e-24 (no cancellation), finite gradients."""
    counts = [1000, 10, 1]
    z = tf.constant([[1.0, -1.0, -1.0], [-1.0, -1.0, 1.0], [0.9, 0.9, -1.0]])
    targets = tf.constant([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0], [0.5, 0.5, 0.0]])
    loss = ldam.LDAMLoss(counts)
    with tf.GradientTape() as tape:
      tape.watch(z)
      got = loss(targets, z)
    want = [numpy_ldam(z.numpy()[0], 0, counts), numpy_ldam(z.numpy()[1], 2, counts),
            0.5 * numpy_ldam(z.numpy()[2], 0, counts) + 0.5 * numpy_ldam(z.numpy()[2], 1, counts)]
    self.assertAllClose(got, want, rtol=1e-4, atol=0)
    self.assertTrue(np.all(np.isfinite(tape.gradient(got, z))))

  def test_class_weights(self):
    counts, labels = [40, 10, 2], np.array([0, 1, 2, 2])
    z = np.tanh(np.random.default_rng(2).normal(size=(4, 3))).astype(np.float32)
    w = np.array([0.2, 0.9, 1.9], np.float32)
    got = ldam.LDAMLoss(counts, weights=w)(labels, z)
    want = [w[y] * numpy_ldam(z[i], y, counts) for i, y in enumerate(labels)]
    self.assertAllClose(got, want, rtol=1e-5)

  def test_weights_switch_after_tracing(self):
    """DRW: a tf.Variable of weights, assigned after the step is traced, takes effect."""
    counts, labels = [40, 10, 2], np.array([0, 2])
    z = np.array([[0.5, 0.1, -0.2], [0.3, 0.0, 0.4]], np.float32)
    w = tf.Variable(tf.ones([3]))
    step = tf.function(ldam.LDAMLoss(counts, weights=w))
    plain = step(labels, z).numpy()
    w.assign([0.5, 1.0, 2.0])
    self.assertAllClose(step(labels, z), plain * np.array([0.5, 2.0]), rtol=1e-6)

  def test_rejects_bad_arguments(self):
    with self.assertRaisesRegex(ValueError, "positive training count"):
      ldam.LDAMLoss([10, 0])
    with self.assertRaisesRegex(ValueError, "s=0 must be a number > 0"):
      ldam.LDAMLoss([10, 1], s=0)
    with self.assertRaisesRegex(ValueError, "max_m=-1 must be a number > 0"):
      ldam.LDAMLoss([10, 1], max_m=-1)
    with self.assertRaisesRegex(ValueError, r"shape \[2\]"):
      ldam.LDAMLoss([10, 1], weights=tf.Variable(tf.ones([3])))


class NormedLinearTest(tf.test.TestCase):

  def test_cosines(self):
    rng = np.random.default_rng(3)
    x = rng.normal(size=(4, 6)).astype(np.float32)
    layer = ldam.NormedLinear(3)
    got = layer(x)
    w = layer.kernel.numpy().astype(np.float64)
    want = (x / np.linalg.norm(x, axis=1, keepdims=True)) @ (w / np.linalg.norm(w, axis=0))
    self.assertAllClose(got, want, rtol=1e-5, atol=1e-6)
    self.assertLessEqual(float(tf.reduce_max(tf.abs(got))), 1.0 + 1e-6)
    # Scale-free in both features and weights.
    layer.kernel.assign(layer.kernel * 7.0)
    self.assertAllClose(layer(3.0 * x), got, rtol=1e-5, atol=1e-6)

  def test_initial_columns_have_unit_norm(self):
    layer = ldam.NormedLinear(5)
    layer.build((None, 8))
    self.assertAllClose(np.linalg.norm(layer.kernel.numpy(), axis=0), np.ones(5), rtol=1e-6)

  def test_zero_features_give_zero_cosines(self):
    self.assertAllEqual(ldam.NormedLinear(2)(tf.zeros([1, 3])), [[0.0, 0.0]])

  def test_serialises(self):
    inputs = tf_keras.Input([4])
    model = tf_keras.Model(inputs, ldam.NormedLinear(3, name="logits")(inputs))
    clone = tf_keras.Model.from_config(model.get_config())
    clone.set_weights(model.get_weights())
    x = np.ones([2, 4], np.float32)
    self.assertAllClose(clone(x), model(x))


if __name__ == "__main__":
  tf.test.main()
