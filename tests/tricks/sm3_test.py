"""SM3-II against Anil et al. 2019, written out per coordinate in NumPy."""

import itertools

from absl.testing import parameterized
import numpy as np
import tensorflow as tf
import tf_keras

from tricks import sm3


def numpy_sm3(w, grads, lr):
  """SM3-II with the cover of a tensor's slices along each axis, entry by entry."""
  w = w.astype(np.float64).copy()
  accs = [np.zeros(n) for n in w.shape] if w.ndim > 1 else [np.zeros(w.shape)]
  for g in grads:
    nu = np.zeros(w.shape)
    for i in itertools.product(*map(range, w.shape)):
      if w.ndim > 1:
        nu[i] = min(accs[r][i[r]] for r in range(w.ndim)) + g[i] ** 2
      else:
        nu[i] = accs[0][i] + g[i] ** 2
    if w.ndim > 1:
      accs = [np.zeros(n) for n in w.shape]
      for i in itertools.product(*map(range, w.shape)):
        for r in range(w.ndim):
          accs[r][i[r]] = max(accs[r][i[r]], nu[i])
    else:
      accs = [nu]
    w -= lr * np.where(nu > 0, g / np.sqrt(np.where(nu > 0, nu, 1)), 0)
  return w


class Sm3Test(tf.test.TestCase, parameterized.TestCase):

  @parameterized.parameters((3, 4), (2, 3, 4), (5,))
  def test_matches_algorithm(self, *shape):
    rng = np.random.default_rng(0)
    w0 = rng.normal(size=shape).astype(np.float32)
    grads = [rng.normal(size=shape).astype(np.float32) * (rng.random(shape) > 0.3)
             for _ in range(4)]
    var = tf.Variable(w0)
    optimizer = sm3.SM3(learning_rate=0.1)
    step = tf.function(lambda g: optimizer.apply_gradients([(g, var)]))
    for g in grads:
      step(tf.constant(g))
    self.assertAllClose(var, numpy_sm3(w0, grads, 0.1), rtol=1e-5, atol=1e-6)

  @parameterized.product(dtype=["bfloat16", "float16"], graph=[False, True])
  def test_reduced_precision_variables(self, dtype, graph):
    """Half-precision weights, eagerly and in tf.function: the algorithm within the
    rounding of the weights' dtype (statistics are kept in float32)."""
    rng = np.random.default_rng(1)
    w0 = rng.normal(size=(4, 6)).astype(np.float32)
    grads = [rng.normal(size=(4, 6)).astype(np.float32) for _ in range(3)]
    var = tf.Variable(tf.cast(w0, dtype))
    optimizer = sm3.SM3(learning_rate=0.1)
    step = lambda g: optimizer.apply_gradients([(g, var)])
    step = tf.function(step) if graph else step
    for g in grads:
      step(tf.cast(g, dtype))
    self.assertEqual(var.dtype, tf.as_dtype(dtype))
    want = numpy_sm3(tf.cast(tf.cast(w0, dtype), tf.float32).numpy(), [tf.cast(tf.cast(g, dtype), tf.float32).numpy() for g in grads], 0.1)
    tol = 3e-2 if dtype == "bfloat16" else 3e-3
    self.assertAllClose(tf.cast(var, tf.float32), want, rtol=tol, atol=tol)
    for slot in optimizer.variables[1:]:
      self.assertEqual(slot.dtype, tf.float32)

  def test_slot_memory_is_sublinear(self):
    model = tf_keras.Sequential([tf_keras.Input((8, 8, 16)),
                                 tf_keras.layers.Conv2D(32, 3),
                                 tf_keras.layers.Flatten(),
                                 tf_keras.layers.Dense(10)])
    optimizer = sm3.SM3()
    optimizer.build(model.trainable_variables)
    slots = sum(int(np.prod(v.shape)) for v in optimizer.variables[1:])
    # Conv kernel 3x3x16x32: 3+3+16+32; bias 32; Dense kernel 1152x10: 1152+10; bias 10.
    self.assertEqual(slots, (3 + 3 + 16 + 32) + 32 + (1152 + 10) + 10)
    params = sum(int(np.prod(v.shape)) for v in model.trainable_variables)
    self.assertLess(slots, params / 5)

  def test_momentum_and_training(self):
    model = tf_keras.Sequential([tf_keras.Input((3,)), tf_keras.layers.Dense(1)])
    model.compile(sm3.SM3(learning_rate=0.5, momentum=0.9), "mse")
    x = np.random.default_rng(1).normal(size=(64, 3)).astype(np.float32)
    y = x @ np.array([[1.0], [-2.0], [0.5]], np.float32)
    history = model.fit(x, y, epochs=20, batch_size=16, verbose=0).history["loss"]
    self.assertLess(history[-1], 0.5 * history[0])
    with self.assertRaisesRegex(ValueError, "momentum must be in"):
      sm3.SM3(momentum=1.0)


if __name__ == "__main__":
  tf.test.main()
