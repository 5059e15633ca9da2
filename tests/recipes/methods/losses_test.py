"""Loss builders: both give per-example losses; the adjusted one uses the counts."""

import gin
import numpy as np
import tensorflow as tf

from recipes.methods import losses
from tricks import remix


class LossesTest(tf.test.TestCase):

  def test_cross_entropy_is_per_example(self):
    logits = tf.constant([[2.0, 0.0], [0.0, 3.0]])
    got = losses.cross_entropy(class_counts=[5, 1])([0, 0], logits)
    self.assertAllClose(got, [np.log(1 + np.exp(-2.0)), np.log(1 + np.exp(3.0))])

  def test_label_smoothing_matches_the_smoothed_target(self):
    logits = np.array([[2.0, 0.0, -1.0]], np.float32)
    log_p = logits - np.log(np.exp(logits).sum())
    target = np.array([0.9, 0.0, 0.0]) + 0.1 / 3  # eps = 0.1, label 0
    want = -(target * log_p).sum()
    got = losses.cross_entropy(class_counts=[1, 1, 1], label_smoothing=0.1)([0], logits)
    self.assertAllClose(got, [want], rtol=1e-6)
    # The logit-adjusted loss with uniform priors is the same loss.
    got = losses.logit_adjusted(class_counts=[4, 4, 4], label_smoothing=0.1)([0], logits)
    self.assertAllClose(got, [want], rtol=1e-6)

  def test_soft_targets(self):
    """MixUp / CutMix targets: cross-entropy against the mixed distribution."""
    logits = np.array([[2.0, 0.0, -1.0], [0.5, 0.5, 1.0]], np.float32)
    log_p = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
    targets = np.array([[0.7, 0.3, 0.0], [0.0, 0.4, 0.6]], np.float32)
    got = losses.cross_entropy(class_counts=[1, 1, 1])(tf.constant(targets), logits)
    self.assertAllClose(got, -(targets * log_p).sum(axis=1), rtol=1e-6)
    got = losses.logit_adjusted(class_counts=[2, 2, 2])(tf.constant(targets), logits)
    self.assertAllClose(got, -(targets * log_p).sum(axis=1), rtol=1e-6)

  def test_logit_adjusted_uses_priors(self):
    logits = tf.zeros([1, 2])
    got = losses.logit_adjusted(class_counts=[3, 1], tau=1.0)([1], logits)
    # softmax(log(0.75), log(0.25))_1 = 0.25.
    self.assertAllClose(got, [-np.log(0.25)])


def numpy_cross_entropy(logits, labels):
  z = np.asarray(logits, np.float64)
  log_p = z - z.max(axis=1, keepdims=True)
  log_p = log_p - np.log(np.exp(log_p).sum(axis=1, keepdims=True))
  return -log_p[np.arange(len(labels)), labels]


class LongTailLossesTest(tf.test.TestCase):
  """The Gin builders of the long-tail losses (their formulas: tests/tricks/)."""

  def tearDown(self):
    gin.clear_config()
    super().tearDown()

  def test_balanced_softmax_is_ren_et_al(self):
    """Ren et al. 2020: phi_j = n_j e^{eta_j} / sum_i n_i e^{eta_i}, loss -log phi_y."""
    counts = np.array([60.0, 30.0, 6.0, 1.0])
    eta = np.random.default_rng(0).normal(size=(5, 4)).astype(np.float32)
    labels = np.array([0, 1, 2, 3, 3])
    weighted = counts * np.exp(eta.astype(np.float64))
    phi = weighted / weighted.sum(axis=1, keepdims=True)
    want = -np.log(phi[np.arange(5), labels])
    got = losses.balanced_softmax(class_counts=counts.tolist())(labels, eta)
    self.assertAllClose(got, want, rtol=1e-5)
    # One implementation, both names: the logit-adjusted loss at tau = 1.
    self.assertAllClose(losses.logit_adjusted(class_counts=counts.tolist(), tau=1.0)(
        labels, eta), got)
    targets = np.random.default_rng(1).dirichlet(np.ones(4), size=5).astype(np.float32)
    self.assertAllClose(losses.balanced_softmax(class_counts=counts.tolist())(targets, eta),
                        -(targets * np.log(phi)).sum(axis=1), rtol=1e-5)

  def test_balanced_softmax_on_remix_targets(self):
    """Remix + Balanced Softmax: the soft target
    lambda_y y_i + (1 - lambda_y) y_j gives lambda_y L(z, y_i) + (1 - lambda_y) L(z, y_j)
    (Chou et al.'s remix_criterion) with Ren et al.'s L = -log(n_y e^{z_y} / sum n e^z)."""
    counts = np.array([400.0, 100.0, 20.0])
    labels = np.array([0, 0, 1, 2, 0, 2], np.int32)
    images = np.eye(6, dtype=np.float32)  # image i is e_i: the mix shows lambda and j
    mixed, targets = remix.Remix().mix(tf.constant(images), tf.constant(labels), counts,
                                       tf.constant([3, 4], tf.int64))
    mixed = mixed.numpy()
    z = np.random.default_rng(4).normal(size=(6, 3))
    weighted = counts * np.exp(z)
    nll = -np.log(weighted / weighted.sum(axis=1, keepdims=True))
    got = losses.balanced_softmax(class_counts=counts.tolist())(targets, z.astype(np.float32))
    for i in range(6):
      j = i if np.isclose(mixed[i, i], 1.0) else int(np.argmax(
          np.where(np.arange(6) == i, -1.0, mixed[i])))
      lam_y = targets.numpy()[i, labels[i]] if labels[i] != labels[j] else 1.0
      want = lam_y * nll[i, labels[i]] + (1 - lam_y) * nll[i, labels[j]]
      self.assertAllClose(got[i], want, rtol=1e-5)

  def test_class_balanced_softmax_weights_cross_entropy(self):
    counts, beta = [500, 50, 5], 0.99
    raw = (1 - beta) / (1 - beta ** np.array(counts, np.float64))
    w = raw / raw.sum() * 3
    logits = np.random.default_rng(2).normal(size=(4, 3)).astype(np.float32)
    labels = np.array([0, 1, 2, 2])
    got = losses.class_balanced(class_counts=counts, beta=beta)(labels, logits)
    self.assertAllClose(got, w[labels] * numpy_cross_entropy(logits, labels), rtol=1e-5)

  def test_class_balanced_softmax_bce_is_weight_balancings_cb_loss(self):
    """Their CB_loss(labels, logits, counts, K, 'softmax', 0.9999, ...): PyTorch's
    F.binary_cross_entropy(softmax(z), onehot, weight=w_y), a mean over batch and
    classes; the trainer's mean of the per-example losses is that mean."""
    counts, beta = [500, 50, 5], 0.9999
    raw = (1 - beta) / (1 - beta ** np.array(counts, np.float64))
    w = raw / raw.sum() * 3
    logits = np.random.default_rng(3).normal(size=(4, 3))
    labels = np.array([0, 1, 2, 2])
    p = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    t = np.eye(3)[labels]
    elementwise = -w[labels][:, None] * (t * np.log(p) + (1 - t) * np.log(1 - p))
    got = losses.class_balanced(class_counts=counts, beta=beta, loss="softmax_bce")(
        labels, logits.astype(np.float32))
    self.assertEqual(got.shape, [4])
    self.assertAllClose(np.mean(got), elementwise.mean(), rtol=1e-5)
    self.assertAllClose(got, elementwise.mean(axis=1), rtol=1e-5)

  def test_class_balanced_sigmoid(self):
    counts, labels = [9, 1], np.array([0, 1])
    logits = np.array([[1.0, -2.0], [0.5, 0.5]], np.float32)
    w = losses.class_balanced(class_counts=counts, beta=1.0, loss="sigmoid")(labels, logits)
    inverse = np.array([1 / 9, 1.0]) / (1 / 9 + 1.0) * 2
    softplus = lambda x: np.log1p(np.exp(x))
    want = [inverse[0] * (softplus(-1.0) + softplus(-2.0)),
            inverse[1] * (softplus(0.5) + softplus(-0.5))]
    self.assertAllClose(w, want, rtol=1e-5)

  def test_class_balanced_uses_the_base_builders_bindings(self):
    gin.bind_parameter("focal.gamma", 0.5)
    gin.bind_parameter("focal.kind", "softmax")
    loss = losses.class_balanced(class_counts=[5, 1], beta=0.9, loss="focal")
    self.assertEqual((type(loss).__name__, loss.gamma), ("SoftmaxFocalLoss", 0.5))
    gin.bind_parameter("ldam.max_m", 0.3)
    loss = losses.class_balanced(class_counts=[5, 1], beta=0.9, loss="ldam")
    self.assertEqual((type(loss).__name__, loss.max_m), ("LDAMLoss", 0.3))
    inverse = np.array([1 / ((1 - 0.9 ** 5) / 0.1), 1.0])  # 1 / E_n, E_1 = 1
    self.assertAllClose(loss.weights, inverse / inverse.sum() * 2, rtol=1e-6)

  def test_deferred_class_balanced_ldam_is_ldam_drw(self):
    """LDAM-DRW (Cao et al. 2019): unweighted LDAM before the start epoch, the
    class-balanced weights (beta = 0.9999) from it on, switched by the trainer's
    set_epoch without retracing."""
    counts = [400, 20, 3]
    logits = tf.constant([[2.0, 0.5, -1.0], [0.3, 1.2, 0.1], [-0.4, 0.2, 0.9]])
    labels = tf.constant([0, 1, 2])
    drw = losses.class_balanced(class_counts=counts, beta=0.9999, loss="ldam",
                                start_epoch=160)
    plain = losses.ldam(class_counts=counts)
    traced = tf.function(drw.__call__)
    drw.set_epoch(159)
    self.assertAllClose(traced(labels, logits), plain(labels, logits), rtol=1e-6)
    drw.set_epoch(160)
    raw = (1 - 0.9999) / (1 - 0.9999 ** np.array(counts, np.float64))
    w = raw / raw.sum() * 3
    self.assertAllClose(traced(labels, logits), w * plain(labels, logits).numpy(),
                        rtol=1e-5)
    with self.assertRaisesRegex(ValueError, r"^class_balanced.start_epoch=-2 must be"):
      losses.class_balanced(class_counts=counts, start_epoch=-2)

  def test_weights_normalisation_is_pytorchs_weighted_mean(self):
    """Cao et al.'s LDAMLoss ends in F.cross_entropy(weight=w): the batch's
    sum_i w_yi L_i / sum_i w_yi. The trainer takes sum(per-example) / B, so the
    normalised per-example losses must give exactly that mean; deferred weights too."""
    counts = [400, 20, 3]
    logits = tf.constant([[2.0, 0.5, -1.0], [0.3, 1.2, 0.1], [-0.4, 0.2, 0.9],
                          [1.0, 0.0, 0.0]])
    labels = tf.constant([0, 1, 2, 0])
    plain = losses.ldam(class_counts=counts)(labels, logits).numpy()
    raw = (1 - 0.9999) / (1 - 0.9999 ** np.array(counts, np.float64))
    w = raw / raw.sum() * 3
    wy = w[labels.numpy()]
    torch_mean = np.sum(wy * plain) / np.sum(wy)
    loss = losses.class_balanced(class_counts=counts, beta=0.9999, loss="ldam",
                                 start_epoch=160, normalize="weights")
    traced = tf.function(loss.__call__)
    loss.set_epoch(0)  # unit weights: the plain mean
    self.assertAllClose(np.mean(traced(labels, logits)), np.mean(plain), rtol=1e-6)
    loss.set_epoch(160)
    self.assertAllClose(np.mean(traced(labels, logits)), torch_mean, rtol=1e-5)
    batch = losses.class_balanced(class_counts=counts, beta=0.9999, loss="ldam")
    self.assertAllClose(np.mean(batch(labels, logits)), np.mean(wy * plain), rtol=1e-5)
    # Soft targets weigh each example by its label mixture.
    soft = tf.constant([[0.5, 0.5, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [1.0, 0.0, 0.0]])
    softmax = losses.class_balanced(class_counts=counts, beta=0.9999, normalize="weights")
    unnormalised = losses.class_balanced(class_counts=counts, beta=0.9999)(soft, logits)
    mix_w = soft.numpy() @ w
    self.assertAllClose(np.mean(softmax(soft, logits)),
                        np.sum(unnormalised) / np.sum(mix_w), rtol=1e-5)
    with self.assertRaisesRegex(ValueError, r"^class_balanced.normalize='sum' must be one"):
      losses.class_balanced(class_counts=counts, normalize="sum")

  def test_weights_normalisation_is_global_over_replicas(self):
    """Two replicas with different weight sums: the trainer's sum over both replicas'
    per-example losses / global batch is the global weighted mean, not a mean of the
    replicas' weighted means."""
    counts = [400, 20, 3]
    loss = losses.class_balanced(class_counts=counts, beta=0.9999, normalize="weights")
    logits = np.array([[2.0, 0.5, -1.0], [0.3, 1.2, 0.1], [-0.4, 0.2, 0.9],
                       [1.0, 0.0, 0.0]], np.float32)
    labels = np.array([0, 0, 1, 2], np.int32)  # replica 0: the frequent class only
    unnormalised = losses.class_balanced(class_counts=counts, beta=0.9999)(
        labels, logits).numpy()
    w = np.asarray(loss.class_weights)[labels]
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    per_replica = strategy.experimental_distribute_values_from_function(
        lambda context: (labels[2 * context.replica_id_in_sync_group:][:2],
                         logits[2 * context.replica_id_in_sync_group:][:2]))
    result = strategy.run(tf.function(lambda y, z: loss(y, z)), args=per_replica)
    total = sum(np.sum(v) for v in strategy.experimental_local_results(result))
    self.assertAllClose(total / 4, np.sum(unnormalised) / np.sum(w), rtol=1e-5)

  def test_builders_give_per_example_losses(self):
    logits = tf.constant([[0.2, -0.4, 0.9], [0.1, 0.3, -0.8]])
    for name, loss in [("focal", losses.focal(class_counts=[3, 2, 1])),
                       ("focal softmax", losses.focal(class_counts=[3, 2, 1], kind="softmax")),
                       ("ldam", losses.ldam(class_counts=[3, 2, 1])),
                       ("class_balanced", losses.class_balanced(class_counts=[3, 2, 1]))]:
      with self.subTest(name):
        self.assertEqual(loss([0, 2], logits).shape, [2])
        self.assertEqual(loss(tf.one_hot([0, 2], 3), logits).shape, [2])

  def test_bad_arguments_name_the_binding(self):
    cases = [
        (lambda: losses.focal(class_counts=[2, 1], gamma=-1), r"^focal.gamma=-1 must be"),
        (lambda: losses.focal(class_counts=[2, 1], kind="tanh"), r"^focal.kind='tanh'"),
        (lambda: losses.focal(class_counts=[2, 1], kind="softmax", alpha=0.25),
         r"^focal.alpha=0.25 must be None"),
        (lambda: losses.focal(class_counts=[2, 1], weights=[1.0]), r"^focal.weights="),
        (lambda: losses.ldam(class_counts=[2, 1], max_m=0), r"^ldam.max_m=0 must be"),
        (lambda: losses.ldam(class_counts=[2, 1], s="30"), r"^ldam.s='30' must be"),
        (lambda: losses.class_balanced(class_counts=[2, 1], beta=1.5),
         r"^class_balanced.beta=1.5 must be"),
        (lambda: losses.class_balanced(class_counts=[2, 1], loss="hinge"),
         r"^class_balanced.loss='hinge' must be one of"),
        (lambda: losses.class_balanced(class_counts=[2, 0]),
         r"^class_balanced: .*positive training count"),
        (lambda: losses.balanced_softmax(class_counts=[2, 0]), "positive training count"),
    ]
    for make, message in cases:
      with self.subTest(message):
        with self.assertRaises(ValueError) as caught:
          make()
        # One line (Gin appends its "In call to configurable" line; the trainer keeps
        # the first).
        self.assertRegex(str(caught.exception).splitlines()[0], message)


if __name__ == "__main__":
  # Two CPU devices for the replica test (set before TensorFlow starts its runtime).
  tf.config.set_logical_device_configuration(
      tf.config.list_physical_devices("CPU")[0],
      [tf.config.LogicalDeviceConfiguration()] * 2)
  tf.test.main()
