"""SAM, ImbSAM and weight constraints in the training step, against NumPy.

The model is linear with a squared error, L_i(W, b) = 0.5 ||x_i W + b - t_i||^2, whose
gradient is written down here; SAM's step is Foret et al.'s Algorithm 1 (eps = rho g /
||g||, the step from w with the gradient at w + eps), ImbSAM's Zhou et al.'s split
(their utils/trainval.py `forbackward`: the head examples' loss at w, the tail's at w +
eps, eps from the tail's gradient alone; both summed over the batch size), weight
decay added at w as their PyTorch SGD adds it. MaxNorm's projection is Alshammari et
al.'s w_c <- w_c min(1, thresh / ||w_c||).
"""

import numpy as np
import tensorflow as tf
import tf_keras

from recipes import train_step
from tricks import max_norm
from tricks import sam

CLASSES = 3


def linear_model():
  inputs = tf_keras.Input((4,), name="x")
  outputs = tf_keras.layers.Dense(
      CLASSES, name="logits",
      kernel_initializer=tf_keras.initializers.RandomNormal(seed=1),
      bias_initializer=tf_keras.initializers.RandomNormal(seed=2))(inputs)
  return tf_keras.Model(inputs, outputs)


def squared_error(labels, logits):
  onehot = tf.one_hot(tf.cast(labels, tf.int32), CLASSES)
  return 0.5 * tf.reduce_sum(tf.square(logits - onehot), axis=-1)


def gradient(w, b, x, y, weight=None):
  """Gradient of sum_i weight_i 0.5 ||x_i w + b - onehot_i||^2 / batch."""
  weight = np.ones(len(x)) if weight is None else weight
  err = (x @ w + b - np.eye(CLASSES)[y]) * weight[:, None]
  return x.T @ err / len(x), err.sum(0) / len(x)


def sam_step(w, b, x, y, lr, rho, l2=0.0, tail=None):
  """One SGD step of SAM (tail None) or ImbSAM (tail: the tail classes, a bool mask)."""
  if tail is None:
    keep_w, keep_b = 0.0, 0.0
    perturb = np.ones(len(y))
  else:
    perturb = tail[y].astype(np.float64)
    keep_w, keep_b = gradient(w, b, x, y, 1.0 - perturb)
  gw, gb = gradient(w, b, x, y, perturb)
  norm = np.sqrt(np.sum(gw ** 2) + np.sum(gb ** 2))
  ew, eb = rho * gw / norm, rho * gb / norm
  sw, sb = gradient(w + ew, b + eb, x, y, perturb)
  return (w - lr * (keep_w + sw + l2 * w), b - lr * (keep_b + sb))


class SamStepTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    rng = np.random.default_rng(0)
    self.x = rng.normal(size=[8, 4]).astype(np.float32)
    self.y = np.array([0, 1, 2, 0, 2, 1, 0, 0], np.int32)

  def make(self, strategy, lr=0.1, l2=0.0, optimizer_sam=None, constraints=(),
           counts=(50, 30, 4)):
    with strategy.scope():
      model = linear_model()
      opt = tf_keras.optimizers.SGD(learning_rate=lr)
      opt.build(model.trainable_variables)
    if optimizer_sam is not None:
      optimizer_sam.build(np.array(counts))
    for c in constraints:
      c.build(model)
    step = train_step.TrainStep(train_step.StepParts(
        strategy=strategy, model=model, optimizer=opt, loss_fn=squared_error,
        global_batch=8, l2=l2,
        l2_variables=[model.get_layer("logits").kernel], sam=optimizer_sam,
        weight_constraints=list(constraints)))
    dataset = tf.data.Dataset.from_tensor_slices((self.x, self.y)).batch(8)
    return step, model, iter(strategy.experimental_distribute_dataset(dataset))

  def weights(self, model):
    layer = model.get_layer("logits")
    return layer.kernel.numpy().astype(np.float64), layer.bias.numpy().astype(np.float64)

  def check_one_step(self, strategy, rho, l2, imb):
    optimizer_sam = sam.ImbSAM(rho=rho, eta=20) if imb else sam.SAM(rho=rho)
    step, model, iterator = self.make(strategy, l2=l2, optimizer_sam=optimizer_sam)
    w, b = self.weights(model)
    tail = np.array([False, False, True]) if imb else None
    want_w, want_b = sam_step(w, b, self.x.astype(np.float64), self.y, 0.1, rho, l2, tail)
    result = step.loop(iterator, 1)
    got_w, got_b = self.weights(model)
    self.assertAllClose(got_w, want_w, atol=1e-6)
    self.assertAllClose(got_b, want_b, atol=1e-6)
    # The loss reported is the one at w (before the perturbation).
    self.assertAllClose(result.losses[0], np.mean(0.5 * np.sum(
        (self.x @ w + b - np.eye(CLASSES)[self.y]) ** 2, 1)), atol=1e-5)

  def test_sam_step_is_the_step_from_w_with_the_gradient_at_w_plus_eps(self):
    for rho, l2 in ((0.05, 0.0), (0.5, 0.01)):
      with self.subTest(rho=rho, l2=l2):
        self.check_one_step(tf.distribute.OneDeviceStrategy("/cpu:0"), rho, l2, imb=False)

  def test_imbsam_perturbs_for_the_tail_loss_only(self):
    for rho, l2 in ((0.05, 0.0), (0.5, 0.01)):
      with self.subTest(rho=rho, l2=l2):
        self.check_one_step(tf.distribute.OneDeviceStrategy("/cpu:0"), rho, l2, imb=True)

  def test_two_replicas_perturb_with_the_all_reduced_gradient(self):
    # Each replica sees 4 of the 8 examples; a perturbation from a replica's own
    # gradient would give another step.
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    for imb in (False, True):
      with self.subTest(imb=imb):
        self.check_one_step(strategy, 0.5, 0.01, imb)

  def test_imbsam_refuses_soft_targets(self):
    imb = sam.ImbSAM().build([50, 30, 4])
    with self.assertRaisesRegex(ValueError, "soft targets"):
      imb.tail_mask(tf.one_hot([0, 2], 3))

  def check_max_norm(self, strategy):
    constraint = max_norm.MaxNorm(thresh=0.1)
    step, model, iterator = self.make(strategy, lr=0.5, constraints=[constraint])
    w, b = self.weights(model)
    norms = np.linalg.norm(w, axis=0)
    radius = norms.min() + 0.1 * (norms.max() - norms.min())  # their setPerLayerThresh
    self.assertAllClose(constraint.radius, radius)
    gw, gb = gradient(w, b, self.x.astype(np.float64), self.y)
    w, b = w - 0.5 * gw, b - 0.5 * gb
    new_norms = np.linalg.norm(w, axis=0)
    want = w * np.minimum(1.0, radius / new_norms)
    step.loop(iterator, 1)
    got_w, got_b = self.weights(model)
    self.assertAllClose(got_w, want, atol=1e-6)
    self.assertAllClose(got_b, b, atol=1e-6)  # the bias is not constrained
    self.assertAllLessEqual(np.linalg.norm(got_w, axis=0), radius * (1 + 1e-6))

  def test_max_norm_once_an_epoch_projects_at_end_epoch_only(self):
    # Their train_model: PGD after the epoch's last step, not after each step.
    strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
    constraint = max_norm.MaxNorm(thresh=0.1, every="epoch")
    step, model, iterator = self.make(strategy, lr=0.5, constraints=[constraint])
    w, b = self.weights(model)
    gw, gb = gradient(w, b, self.x.astype(np.float64), self.y)
    w = w - 0.5 * gw
    step.loop(iterator, 1)
    self.assertAllClose(self.weights(model)[0], w, atol=1e-6)  # a plain SGD step
    step.end_epoch()
    want = w * np.minimum(1.0, constraint.radius / np.linalg.norm(w, axis=0))
    self.assertAllClose(self.weights(model)[0], want, atol=1e-6)

  def test_max_norm_projects_after_the_update(self):
    self.check_max_norm(tf.distribute.OneDeviceStrategy("/cpu:0"))

  def test_max_norm_projects_every_replica(self):
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    self.check_max_norm(strategy)


if __name__ == "__main__":
  # Two CPU devices for the replica tests (set before TensorFlow starts its runtime).
  tf.config.set_logical_device_configuration(
      tf.config.list_physical_devices("CPU")[0],
      [tf.config.LogicalDeviceConfiguration()] * 2)
  tf.test.main()
