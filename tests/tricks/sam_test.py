"""SAM's perturbation (Foret et al. 2021, eq. 2) and ImbSAM's tail split, in NumPy.

The full steps (two passes, two replicas) are in //tests/recipes:sam_step_test.
"""

import numpy as np
import tensorflow as tf

from tricks import sam


class SamTest(tf.test.TestCase):

  def test_perturbation_is_rho_g_over_the_global_norm(self):
    rng = np.random.default_rng(0)
    grads = [rng.normal(size=[3, 2]), rng.normal(size=[2])]
    norm = np.sqrt(sum(np.sum(g ** 2) for g in grads))
    got = sam.perturbation([tf.constant(g) for g in grads], 0.05)
    for g, e in zip(grads, got):
      self.assertAllClose(e, 0.05 * g / norm)
    self.assertAllClose(np.sqrt(sum(np.sum(e.numpy() ** 2) for e in got)), 0.05)

  def test_zero_gradient_gives_no_perturbation(self):
    got = sam.perturbation([tf.zeros([2, 2])], 0.05)
    self.assertAllEqual(got[0], np.zeros([2, 2]))

  def test_imbsam_tail_is_fewer_than_eta_examples(self):
    imb = sam.ImbSAM(rho=0.1, eta=20).build([500, 20, 19, 3])
    self.assertAllEqual(imb.tail_mask(tf.constant([0, 1, 2, 3, 2])), [0, 0, 1, 1, 1])
    self.assertIsNone(sam.SAM().build([5, 1]).tail_mask(tf.constant([0, 1])))

  def test_bad_settings(self):
    with self.assertRaisesRegex(ValueError, "SAM.rho=0 must be"):
      sam.SAM(rho=0)
    with self.assertRaisesRegex(ValueError, "ImbSAM.eta"):
      sam.ImbSAM(eta="20")


if __name__ == "__main__":
  tf.test.main()
