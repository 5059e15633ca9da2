"""The training step and its inner loop, against plain SGD computed by hand."""

import numpy as np
import tensorflow as tf
import tf_keras

from recipes import train_step


def linear_model():
  inputs = tf_keras.Input((3,), name="x")
  outputs = tf_keras.layers.Dense(2, kernel_initializer="zeros", name="logits")(inputs)
  return tf_keras.Model(inputs, outputs)


def mse_per_example(labels, logits):
  """0.5 * ||logits - onehot||^2 per example: a gradient easy to write down."""
  onehot = tf.one_hot(tf.cast(labels, tf.int32), 2)
  return 0.5 * tf.reduce_sum(tf.square(logits - onehot), axis=-1)


class TrainStepTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    rng = np.random.default_rng(0)
    self.x = rng.normal(size=[12, 3]).astype(np.float32)
    self.y = (np.arange(12) % 2).astype(np.int32)

  def make(self, lr=0.1, l2=0.0, loss_fn=None):
    strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
    with strategy.scope():
      model = linear_model()
      opt = tf_keras.optimizers.SGD(learning_rate=lr)
      opt.build(model.trainable_variables)
    step = train_step.TrainStep(train_step.StepParts(
        strategy=strategy, model=model, optimizer=opt, loss_fn=loss_fn or mse_per_example,
        global_batch=4, l2=l2,
        l2_variables=[model.get_layer("logits").kernel]))
    dataset = tf.data.Dataset.from_tensor_slices((self.x, self.y)).batch(4)
    return step, model, iter(strategy.experimental_distribute_dataset(dataset))

  def by_hand(self, lr, l2, steps):
    """Gradient descent on mean 0.5 ||xW + b - onehot||^2 + l2 / 2 ||W||^2."""
    w, b = np.zeros([3, 2]), np.zeros([2])
    losses = []
    for i in range(steps):
      x, y = self.x[4 * i:4 * i + 4], np.eye(2)[self.y[4 * i:4 * i + 4]]
      err = x @ w + b - y
      losses.append(np.mean(0.5 * np.sum(err ** 2, axis=1)))
      w, b = w - lr * (x.T @ err / 4 + l2 * w), b - lr * err.mean(0)
    return w, b, losses

  def test_a_loop_of_three_steps_is_three_sgd_steps(self):
    step, model, iterator = self.make(lr=0.1, l2=0.01)
    result = step.loop(iterator, 3)
    losses, accuracies = result.losses, result.accuracies
    self.assertEqual(result.bad_step, -1)
    w, b, want_losses = self.by_hand(0.1, 0.01, 3)
    layer = model.get_layer("logits")
    self.assertAllClose(layer.kernel, w, atol=1e-6)
    self.assertAllClose(layer.bias, b, atol=1e-6)
    self.assertAllClose(losses, want_losses, atol=1e-6)  # before each update
    self.assertEqual(accuracies.shape, (3,))
    self.assertAllInRange(accuracies, 0.0, 1.0)

  def test_loops_of_one_equal_one_loop_of_three(self):
    step, model, iterator = self.make()
    for _ in range(3):
      step.loop(iterator, 1)
    one = [v.numpy() for v in model.weights]
    step, model, iterator = self.make()
    step.loop(iterator, 3)
    for a, b in zip(one, model.weights):
      self.assertAllEqual(a, b)

  def test_a_non_finite_loss_stops_the_loop_at_its_step(self):
    self.x[5, 1] = np.nan  # the second batch (examples 4-7)
    step, _, iterator = self.make()
    result = step.loop(iterator, 3)
    self.assertEqual(result.bad_step, 1)  # the first non-finite step, not the last
    self.assertTrue(np.isnan(result.bad_loss))
    self.assertTrue(np.isfinite(result.losses[0]))
    self.assertTrue(np.isnan(result.losses[2]))  # NaN weights from then on

  def test_a_non_finite_gradient_with_a_finite_loss_is_caught(self):
    # sqrt(sum(logits^2)) at the zero-initialised model: loss 0, gradient 0 / 0 = NaN.
    step, _, iterator = self.make(
        loss_fn=lambda labels, logits: tf.sqrt(tf.reduce_sum(tf.square(logits), -1)))
    result = step.loop(iterator, 2)
    self.assertEqual(result.bad_step, 0)
    self.assertEqual(result.bad_loss, 0.0)
    self.assertTrue(np.isnan(result.bad_grad_norm))

  def test_metrics_accumulate_over_the_loop(self):
    step, _, iterator = self.make()
    losses = step.loop(iterator, 3).losses
    self.assertAllClose(step.loss_metric.result(), np.mean(losses), atol=1e-6)
    step.reset_metrics()
    self.assertEqual(float(step.loss_metric.result()), 0.0)


if __name__ == "__main__":
  tf.test.main()
