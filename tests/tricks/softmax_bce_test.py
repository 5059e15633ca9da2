"""tricks/softmax_bce.py against PyTorch's F.binary_cross_entropy(softmax(z), t,
weight=w_y) as CB_loss's "softmax" branch calls it, written out in NumPy: per example
-w_y / K sum_k [t_k log p_k + (1 - t_k) log(1 - p_k)], each log clamped at -100."""

import numpy as np
import tensorflow as tf

from tricks import softmax_bce


def reference(logits, labels, weights):
  z = logits - logits.max(axis=1, keepdims=True)
  p = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
  t = np.eye(logits.shape[1])[labels]
  log_p = np.maximum(np.log(p), -100.0)
  log_q = np.maximum(np.log(1.0 - p), -100.0)
  bce = -(t * log_p + (1 - t) * log_q).mean(axis=1)
  return np.asarray(weights)[labels] * bce


class SoftmaxBCETest(tf.test.TestCase):

  def test_against_the_pytorch_formula(self):
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(6, 4)).astype(np.float32) * 3
    labels = np.array([0, 1, 2, 3, 1, 0])
    weights = [0.5, 1.0, 1.5, 1.0]
    loss = softmax_bce.SoftmaxBCELoss(4, weights)(labels, logits).numpy()
    self.assertAllClose(loss, reference(logits, labels, weights), rtol=1e-5)
    plain = softmax_bce.SoftmaxBCELoss(4)(labels, logits).numpy()
    self.assertAllClose(plain, reference(logits, labels, [1.0] * 4), rtol=1e-5)

  def test_the_clamp_keeps_a_saturated_softmax_finite(self):
    logits = np.array([[200.0, 0.0, 0.0]], np.float32)  # p_0 = 1: log(1 - p_0) = -inf
    loss = softmax_bce.SoftmaxBCELoss(3)(np.array([1]), logits).numpy()
    self.assertTrue(np.isfinite(loss).all())
    self.assertAllClose(loss, [(100.0 + 100.0) / 3], rtol=1e-5)  # both logs at -100


if __name__ == "__main__":
  tf.test.main()
