"""benchmarks/linear_probe.py: the fit converges (its objective's gradient, from the
formula, vanishes at the weights), C is the validation split's choice, the smallest
C on a tie, and the features are the input of the model's own head."""

import numpy as np
import tensorflow as tf

from benchmarks import linear_probe
from zoo import registry


def blobs(n, seed, classes=3, dims=6, spread=1.5):
  rng = np.random.default_rng(seed)
  centres = np.random.default_rng(0).normal(0, 2, (classes, dims))
  y = np.arange(n) % classes
  return centres[y] + rng.normal(0, spread, (n, dims)), y


class LinearProbeTest(tf.test.TestCase):

  def test_the_fit_is_converged(self):
    x, y = blobs(300, 1)
    for c in (0.01, 1.0, 100.0):
      classifier = linear_probe._fit(x, y, c)  # pylint: disable=protected-access
      grad_w, grad_b = linear_probe.objective_gradient(classifier, x, y, c)
      # Against the size of either term: X^T (P - Y) at the start (P uniform).
      scale = np.abs((1 / 3 - (y[:, None] == np.arange(3))).T @ x).max()
      self.assertLess(np.abs(grad_w).max() / scale, 1e-4, msg=c)
      self.assertLess(np.abs(grad_b).max() / len(y), 1e-4, msg=c)

  def test_the_gradient_formula_is_the_objectives(self):
    # A central difference of sum -log softmax + ||W||^2 / (2C) at the fitted weights
    # moved off the optimum.
    x, y = blobs(60, 2)
    c = 0.5
    classifier = linear_probe._fit(x, y, c)  # pylint: disable=protected-access
    classifier.coef_ = classifier.coef_ + 0.3
    def objective(w):
      logits = x @ w.T + classifier.intercept_
      logits = logits - logits.max(1, keepdims=True)
      log_p = logits - np.log(np.exp(logits).sum(1, keepdims=True))
      return -log_p[np.arange(len(y)), y].sum() + (w ** 2).sum() / (2 * c)
    grad_w, _ = linear_probe.objective_gradient(classifier, x, y, c)
    step = np.zeros_like(classifier.coef_)
    step[1, 2] = 1e-5
    numeric = (objective(classifier.coef_ + step) - objective(classifier.coef_ - step)) / 2e-5
    self.assertAllClose(grad_w[1, 2], numeric, rtol=1e-5)

  def test_c_is_the_validation_choice(self):
    x, y = blobs(30, 3, spread=3.0)  # few, noisy: C matters
    vx, vy = blobs(300, 4, spread=3.0)
    probe = linear_probe.fit(x, y, vx, vy, c_grid=(1e-3, 1e-1, 10.0))
    self.assertEqual(probe.c, max(probe.validation, key=probe.validation.get))
    self.assertEqual(linear_probe.balanced_accuracy(vy, probe.predict(vx)),
                     probe.validation[probe.c])
    # Every C equally good on validation: the strongest regularisation, the smallest C.
    easy_x, easy_y = blobs(60, 5, spread=0.01)
    tie = linear_probe.fit(easy_x, easy_y, easy_x, easy_y, c_grid=(10.0, 1.0, 0.1))
    self.assertEqual(set(tie.validation.values()), {1.0})
    self.assertEqual(tie.c, 0.1)
    with self.assertRaisesRegex(ValueError, "chooses C on a validation split"):
      linear_probe.fit(x, y, vx[:0], vy[:0])

  def test_balanced_accuracy(self):
    # Class 0: 3 of 4 right, class 1: 1 of 1: (0.75 + 1) / 2.
    self.assertAllClose(linear_probe.balanced_accuracy([0, 0, 0, 0, 1], [0, 0, 0, 1, 1]),
                        0.875)

  def test_features_are_the_heads_input(self):
    model = registry.build("efficientnet_lite0", num_classes=7, input_shape=(40, 48, 3))
    images = np.random.default_rng(0).normal(0, 1, (5, 40, 48, 3)).astype(np.float32)
    found = linear_probe.features(model, images, batch_size=2)
    kernel, bias = model.get_layer("logits").get_weights()
    self.assertEqual(found.shape, (5, 1280))
    want = model(images, training=False).numpy()
    self.assertAllClose(found @ kernel + bias, want, rtol=0,
                        atol=1e-5 * np.abs(want).max())


if __name__ == "__main__":
  tf.test.main()
