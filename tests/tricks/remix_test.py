"""Remix (Chou et al. 2020): the label rule against the paper's cases in NumPy."""

import numpy as np
import tensorflow as tf

from tricks import remix


def paper_lambda_y(lam, n_i, n_j, kappa, tau):
  """Sec. 3's three cases, one pair at a time (the first case checked first)."""
  if n_i / n_j >= kappa and lam < tau:
    return 0.0
  if n_i / n_j <= 1 / kappa and 1 - lam < tau:
    return 1.0
  return lam


class RemixTest(tf.test.TestCase):

  def test_label_weight_is_the_papers_rule(self):
    counts = np.array([500.0, 150.0, 50.0, 5.0])
    pairs = [(i, j) for i in range(4) for j in range(4)]
    n_i = np.array([counts[i] for i, _ in pairs])
    n_j = np.array([counts[j] for _, j in pairs])
    for lam in (0.1, 0.3, 0.5, 0.7, 0.9):
      for kappa, tau in ((3.0, 0.5), (10.0, 0.4)):
        want = [paper_lambda_y(lam, a, b, kappa, tau) for a, b in zip(n_i, n_j)]
        got = remix.label_weight(lam, n_i, n_j, kappa, tau)
        self.assertAllClose(got, want)
    # 500 / 150 >= 3 and lam = 0.3 < 0.5: all of the label to the minority image j.
    self.assertEqual(float(remix.label_weight(0.3, [500.0], [150.0])[0]), 0.0)
    # 500 / 150 >= 3 but the majority image dominates (lam = 0.7): plain MixUp.
    self.assertAllClose(remix.label_weight(0.7, [500.0], [150.0]), [0.7])
    # n_i / n_j = 1/10 <= 1/3 and 1 - lam = 0.2 < 0.5: all to the minority image i.
    self.assertEqual(float(remix.label_weight(0.8, [50.0], [500.0])[0]), 1.0)

  def test_mix_pairs_images_and_labels_by_the_rule(self):
    counts = np.array([400.0, 100.0, 20.0])
    labels = np.array([0, 0, 0, 0, 1, 1, 2, 2], np.int32)
    batch = len(labels)
    images = np.eye(batch, dtype=np.float32)  # image i is e_i: the mix shows lam and j
    mixer = remix.Remix(alpha=1.0, kappa=3.0, tau=0.5)
    for s in range(6):
      mixed, targets = mixer.mix(tf.constant(images), tf.constant(labels), counts,
                                 tf.constant([s, 1], tf.int64))
      mixed, targets = mixed.numpy().astype(np.float64), targets.numpy()
      lams = []
      for i in range(batch):
        row = mixed[i]
        j = i if np.isclose(row[i], 1.0) else int(np.argmax(np.where(
            np.arange(batch) == i, -1.0, row)))
        lam = row[i] if j != i else 1.0
        lams.append(lam)
        lam_y = paper_lambda_y(lam, counts[labels[i]], counts[labels[j]], 3.0, 0.5)
        want = lam_y * np.eye(3)[labels[i]] + (1 - lam_y) * np.eye(3)[labels[j]]
        self.assertAllClose(targets[i], want, atol=1e-6)
        self.assertAllClose(row.sum(), 1.0, atol=1e-6)
      unpaired = [l for l in lams if l != 1.0]
      if unpaired:  # one lambda a batch
        self.assertAllClose(unpaired, [unpaired[0]] * len(unpaired), atol=1e-6)
    again = mixer.mix(tf.constant(images), tf.constant(labels), counts,
                      tf.constant([5, 1], tf.int64))[0]
    self.assertAllEqual(again, mixed)  # stateless: the same seed mixes alike

  def test_bad_settings(self):
    with self.assertRaisesRegex(ValueError, "Remix.kappa=0.5 must be"):
      remix.Remix(kappa=0.5)
    with self.assertRaisesRegex(ValueError, "Remix.alpha"):
      remix.Remix(alpha=-1)


if __name__ == "__main__":
  tf.test.main()
