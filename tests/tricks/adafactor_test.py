"""Adafactor against Shazeer & Stern 2018, algorithm 4, written with the paper's sums."""

from absl.testing import parameterized
import numpy as np
import tensorflow as tf
import tf_keras

from tricks import adafactor


def numpy_adafactor(x, grads, lr=0.01, eps1=1e-30, eps2=1e-3, d=1.0):
  x = x.astype(np.float64).copy()
  factored = x.ndim >= 2
  r = np.zeros(x.shape[:-1])
  c = np.zeros(x.shape[:-2] + x.shape[-1:])
  v = np.zeros(x.shape)
  for t, g in enumerate(grads, start=1):
    rho = min(lr, 1 / np.sqrt(t))
    alpha = max(eps2, np.sqrt(np.mean(x ** 2))) * rho
    beta2 = 1 - t ** -0.8
    g2 = g ** 2 + eps1
    if factored:
      r = beta2 * r + (1 - beta2) * g2.sum(axis=-1)     # (G^2 + eps1) 1_m
      c = beta2 * c + (1 - beta2) * g2.sum(axis=-2)     # 1_n^T (G^2 + eps1)
      v = r[..., :, None] * c[..., None, :] / r.sum(axis=-1)[..., None, None]
    else:
      v = beta2 * v + (1 - beta2) * g2
    u = g / np.sqrt(v)
    u = u / max(1.0, np.sqrt(np.mean(u ** 2)) / d)
    x = x - alpha * u
  return x


class AdafactorTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.parameters((4, 6), (3, 4, 5), (7,))
  def test_matches_algorithm(self, *shape):
    rng = np.random.default_rng(0)
    x0 = rng.normal(size=shape).astype(np.float32)
    grads = [rng.normal(size=shape).astype(np.float32) for _ in range(4)]
    var = tf.Variable(x0)
    optimizer = adafactor.Adafactor(learning_rate=0.05)
    step = tf.function(lambda g: optimizer.apply_gradients([(g, var)]))
    for g in grads:
      step(tf.constant(g))
    self.assertAllClose(var, numpy_adafactor(x0, grads, lr=0.05), rtol=1e-4, atol=1e-6)

  @parameterized.product(dtype=["bfloat16", "float16"], graph=[False, True])
  def test_reduced_precision_variables(self, dtype, graph):
    """Half-precision weights, eagerly and in tf.function: the algorithm within the
    rounding of the weights' dtype (statistics are kept in float32)."""
    rng = np.random.default_rng(1)
    x0 = rng.normal(size=(4, 6)).astype(np.float32)
    grads = [rng.normal(size=(4, 6)).astype(np.float32) for _ in range(3)]
    var = tf.Variable(tf.cast(x0, dtype))
    optimizer = adafactor.Adafactor(learning_rate=0.05)
    step = lambda g: optimizer.apply_gradients([(g, var)])
    step = tf.function(step) if graph else step
    for g in grads:
      step(tf.cast(g, dtype))
    self.assertEqual(var.dtype, tf.as_dtype(dtype))
    want = numpy_adafactor(tf.cast(tf.cast(x0, dtype), tf.float32).numpy(), [tf.cast(tf.cast(g, dtype), tf.float32).numpy() for g in grads], lr=0.05)
    tol = 3e-2 if dtype == "bfloat16" else 3e-3
    self.assertAllClose(tf.cast(var, tf.float32), want, rtol=tol, atol=tol)
    for slot in optimizer.variables[1:]:
      self.assertEqual(slot.dtype, tf.float32)

  def test_slot_memory_is_sublinear(self):
    model = tf_keras.Sequential([tf_keras.Input((256,)), tf_keras.layers.Dense(512)])
    optimizer = adafactor.Adafactor()
    optimizer.build(model.trainable_variables)
    slots = sum(int(np.prod(v.shape)) for v in optimizer.variables[1:])  # not iterations
    # Kernel 256 x 512: a row of 256 and a column of 512; the bias keeps 512.
    self.assertEqual(slots, 256 + 512 + 512)
    adam = tf_keras.optimizers.Adam()
    adam.build(model.trainable_variables)
    adam_slots = sum(int(np.prod(v.shape)) for v in adam.variables[1:])
    self.assertEqual(adam_slots, 2 * (256 * 512 + 512))

  def test_trains_a_model_and_serialises(self):
    model = tf_keras.Sequential([tf_keras.Input((3,)), tf_keras.layers.Dense(4),
                                 tf_keras.layers.Dense(1)])
    model.compile(adafactor.Adafactor(learning_rate=0.1), "mse")
    x = np.random.default_rng(1).normal(size=(64, 3)).astype(np.float32)
    y = x @ np.array([[1.0], [-2.0], [0.5]], np.float32)
    history = model.fit(x, y, epochs=20, batch_size=16, verbose=0).history["loss"]
    self.assertLess(history[-1], 0.5 * history[0])
    clone = adafactor.Adafactor.from_config(model.optimizer.get_config())
    self.assertEqual(clone.get_config()["relative_step"], True)


if __name__ == "__main__":
  tf.test.main()
