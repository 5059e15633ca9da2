"""SGDTorch against torch.optim.SGD's update written out in NumPy, across a learning-rate
drop, with PyTorch's coupled weight decay added to the gradient as Optimization.l2 does."""

from absl.testing import parameterized
import numpy as np
import tensorflow as tf
import tf_keras

from tricks import sgd_torch

A = np.array([[2.0, 0.5, 0.0], [0.5, 1.0, 0.2], [0.0, 0.2, 3.0]])
B = np.array([1.0, -2.0, 0.5])
W0 = np.array([0.3, -0.7, 1.2])
# x1/64 after 3 steps; powers of two, exact in the schedule's float32.
LRS = [0.125] * 3 + [0.125 / 64] * 5
WD = 5e-4


def grad(w):
  return A @ w - B  # the gradient of 0.5 w'Aw - b'w


def torch_sgd(momentum, nesterov):
  """torch.optim.SGD.step (dampening 0): g += wd w; b = m b + g (b = g the first time,
  which is the same from b = 0); g = g + m b if nesterov else b; w -= lr g."""
  w, b = W0.copy(), np.zeros(3)
  for lr in LRS:
    g = grad(w) + WD * w
    b = momentum * b + g
    w = w - lr * (g + momentum * b if nesterov else b)
  return w


def run(optimizer):
  w = tf.Variable(W0, dtype=tf.float64)

  @tf.function
  def step():
    g = tf.linalg.matvec(tf.constant(A), w) - B + WD * w  # Optimization.l2's gradient
    optimizer.apply_gradients([(g, w)])

  for _ in LRS:
    step()
  return w.numpy()


def schedule():
  return tf_keras.optimizers.schedules.PiecewiseConstantDecay([2], [0.125, 0.125 / 64])


class SgdTorchTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.parameters((0.9, False), (0.9, True), (0.0, False))
  def test_matches_torch_across_lr_drop(self, momentum, nesterov):
    ours = run(sgd_torch.SGDTorch(schedule(), momentum=momentum, nesterov=nesterov))
    # rtol 1e-6: tf_keras keeps momentum as float32(0.9); tf_keras's SGD is 1e-3 off.
    self.assertAllClose(ours, torch_sgd(momentum, nesterov), rtol=1e-6, atol=1e-9)

  def test_tf_keras_sgd_differs_after_the_drop(self):
    """The reason for SGDTorch: tf_keras's velocity still carries the old rate."""
    theirs = run(tf_keras.optimizers.SGD(schedule(), momentum=0.9))
    self.assertGreater(np.abs(theirs - torch_sgd(0.9, False)).max(), 1e-3)

  def test_refuses_decoupled_weight_decay(self):
    with self.assertRaisesRegex(ValueError, "Optimization.l2"):
      sgd_torch.SGDTorch(0.1, momentum=0.9, weight_decay=5e-4)

  def test_checkpoint_round_trip_keeps_the_buffer(self):
    opt = sgd_torch.SGDTorch(0.1, momentum=0.9)
    w = tf.Variable(W0)
    opt.apply_gradients([(tf.constant(grad(W0)), w)])
    path = tf.train.Checkpoint(optimizer=opt, w=w).write(self.get_temp_dir() + "/ckpt")
    opt2 = sgd_torch.SGDTorch(0.1, momentum=0.9)
    w2 = tf.Variable(np.zeros(3))
    opt2.build([w2])
    tf.train.Checkpoint(optimizer=opt2, w=w2).read(path).assert_consumed()
    self.assertAllClose(opt2.momentums[0], grad(W0))  # b = g after the first step


if __name__ == "__main__":
  tf.test.main()
