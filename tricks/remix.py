"""Remix: rebalanced MixUp (Chou et al. 2020, "Remix: Rebalanced Mixup", ECCV 2020
workshops, arXiv:2007.03943, Sec. 3, the definition of lambda_y).

Images are mixed as MixUp mixes them (Zhang et al. 2018): one lambda ~ Beta(alpha,
alpha) a batch and a random pairing j = perm(i), x~ = lambda x_i + (1 - lambda) x_j;
the label takes its own weight lambda_y,

    lambda_y = 0        if n_i / n_j >= kappa and lambda < tau,
             = 1        if n_i / n_j <= 1 / kappa and 1 - lambda < tau,
             = lambda   otherwise,
    y~ = lambda_y y_i + (1 - lambda_y) y_j,

n the training split's class counts (the first case checked first, as their
`remix_data`; kappa = 3, tau = 0.5 in the paper). The mixed label goes to the minority
class when the majority image dominates less than tau of the pixels' weight. The target
is a soft [batch, classes] vector: for a loss linear in its target (cross-entropy,
Balanced Softmax) that is their lambda_y L(z, y_i) + (1 - lambda_y) L(z, y_j).
"""

import numpy as np
import tensorflow as tf


def label_weight(lam, n_i, n_j, kappa=3.0, tau=0.5):
  """lambda_y for each pair (i, j) with class counts n_i, n_j and image weight lam."""
  lam = tf.cast(lam, tf.float64)
  ratio = tf.cast(n_i, tf.float64) / tf.cast(n_j, tf.float64)
  lam = tf.broadcast_to(lam, tf.shape(ratio))
  to_j = (ratio >= kappa) & (lam < tau)
  to_i = (ratio <= 1.0 / kappa) & (1.0 - lam < tau)
  return tf.where(to_j, tf.zeros_like(lam), tf.where(to_i, tf.ones_like(lam), lam))


def _number(name, value, lowest):
  if isinstance(value, bool) or not isinstance(value, (int, float)) or value < lowest:
    raise ValueError(f"Remix.{name}={value!r} must be a number >= {lowest}")
  return float(value)


class Remix:
  """`InputPipeline.remix`: Remix on each global training batch."""

  def __init__(self, alpha=1.0, kappa=3.0, tau=0.5):
    self.alpha = _number("alpha", alpha, 0)
    self.kappa = _number("kappa", kappa, 1)
    self.tau = _number("tau", tau, 0)

  def mix(self, images, labels, class_counts, seed):
    """(mixed images, soft targets [batch, classes]) of a batch of class-id `labels`;
    `seed` a stateless seed [2] (the batch's draws: lambda and the pairing)."""
    counts = tf.constant(np.asarray(class_counts, np.float64))
    num_classes = int(counts.shape[0])
    seeds = tf.random.experimental.stateless_split(seed, 3)
    if self.alpha > 0:  # Beta(a, a) as G1 / (G1 + G2), G ~ Gamma(a)
      g1 = tf.random.stateless_gamma([], seeds[0], self.alpha, dtype=tf.float64)
      g2 = tf.random.stateless_gamma([], seeds[1], self.alpha, dtype=tf.float64)
      lam = g1 / (g1 + g2)
    else:
      lam = tf.constant(1.0, tf.float64)
    batch = tf.shape(images)[0]
    perm = tf.argsort(tf.random.stateless_uniform([batch], seeds[2]))
    labels = tf.reshape(tf.cast(labels, tf.int32), [-1])
    paired = tf.gather(labels, perm)
    lam_x = tf.cast(lam, images.dtype)
    mixed = lam_x * images + (1 - lam_x) * tf.gather(images, perm)
    lam_y = label_weight(lam, tf.gather(counts, labels), tf.gather(counts, paired),
                         self.kappa, self.tau)[:, None]
    targets = (lam_y * tf.one_hot(labels, num_classes, dtype=tf.float64)
               + (1 - lam_y) * tf.one_hot(paired, num_classes, dtype=tf.float64))
    return mixed, tf.cast(targets, tf.float32)
