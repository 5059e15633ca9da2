"""Menon et al. 2021's synthetic experiment (arXiv:2007.07314v2, Section 6.1, Figure 2).

    ./bazelw run //recipes/reproduce:menon_synthetic [-- --seeds=0,1,2 --train_size=10000]

The paper's setup (Section 6.1 and Appendix G): labels y in {-1, +1} with
P(y = +1) = 5%; x | y ~ N(mu_y, sigma^2 I) in the plane with mu_y = y * (+1, +1); an
affine classifier trained on 10,000 samples. The paper gives no value for sigma
("isotropic covariance"); sigma = 1 is used here, for which the Bayes balanced error is
Phi(-sqrt(2)) = 7.86%, where Figure 2's balanced-error axis starts (7.5).

Class 0 is y = -1 (dominant), class 1 is y = +1 (rare). The model is two logits
f(x) = x W + b (W 2x2, b 2), fitted to convergence by Newton's method with backtracking
(the losses are convex in W, b), from zero. Methods:

  (a) ERM: plain softmax cross-entropy (`recipes.methods.losses.cross_entropy`, the trainer's).
  (b) the logit-adjusted loss, tau = 1 (`tricks.logit_adjustment.LogitAdjustedLoss`,
      priors from the training sample's class counts); prediction argmax f(x).
  (c) post-hoc logit adjustment of ERM's logits (`tricks.posthoc.adjust`, eq. 9):
      argmax f(x) - tau * log(pi), tau = 1, and tau chosen by `tricks.posthoc.choose_tau`
      on a validation sample drawn like the training sample (never on the test
      distribution). For an affine model, (c) at tau = 1 is (b) exactly:
      LA-loss(f) = CE(f + log pi) and f + log pi is again affine, so the LA minimiser
      is ERM's minus log pi (measured: 1e-10 apart).
  (d) Balanced Softmax (Ren et al. 2020): cross-entropy of f(x) + log(n_y), trained
      with `recipes.methods.losses.balanced_softmax`. Since log(n_y) = log(pi_y) + log(N) and
      softmax ignores a shared shift, it is the logit-adjusted loss at tau = 1 (one
      implementation in this project), so (d) repeats (b)'s numbers.

Balanced errors are exact, not test-sample estimates: the rule "class 1 iff
w.x + c > 0" has, for x ~ N(mu, sigma^2 I), w.x + c ~ N(w.mu + c, sigma^2 |w|^2), so
BER = 0.5 * [Phi(-(w.mu_1 + c) / (sigma |w|)) + Phi((w.mu_0 + c) / (sigma |w|))]. The
balance-optimal rule ignores the priors (Menon et al. eq. 7 and 12): it is the
likelihood-ratio rule (mu_1 - mu_0).x > (|mu_1|^2 - |mu_0|^2) / 2, with balanced error
Phi(-|mu_1 - mu_0| / (2 sigma)).

Bad flag values end the run with one line on stderr and exit status 2.
"""

import dataclasses
import math
import time

from recipes import startup

startup.quiet_tensorflow()  # before TensorFlow is imported (startup's docstring)

import numpy as np  # pylint: disable=g-import-not-at-top,wrong-import-position
import tensorflow as tf  # pylint: disable=g-import-not-at-top,wrong-import-position
from absl import app  # pylint: disable=g-import-not-at-top,wrong-import-position
from absl import flags  # pylint: disable=g-import-not-at-top,wrong-import-position

from recipes import errors  # pylint: disable=g-import-not-at-top,wrong-import-position
from recipes.methods import losses  # pylint: disable=g-import-not-at-top,wrong-import-position
from tricks import logit_adjustment  # pylint: disable=g-import-not-at-top
from tricks import posthoc  # pylint: disable=g-import-not-at-top


@dataclasses.dataclass(frozen=True)
class Setup:
  """The synthetic problem; defaults are Menon et al.'s Section 6.1 (sigma: see above)."""
  means: tuple = ((-1.0, -1.0), (1.0, 1.0))  # class 0 (y = -1), class 1 (y = +1)
  sigma: float = 1.0
  rare_prior: float = 0.05  # P(y = +1)
  train_size: int = 10_000
  val_size: int = 10_000  # for choosing the post-hoc tau
  tau: float = 1.0


def normal_cdf(z):
  """Phi(z), accurate in both tails (no scipy here)."""
  return 0.5 * math.erfc(-z / math.sqrt(2.0))


def balanced_error(w, c, means, sigma):
  """Exact balanced error of "class 1 iff w.x + c > 0" on N(means[k], sigma^2 I)."""
  w = np.asarray(w, np.float64)
  norm = float(np.linalg.norm(w))
  if norm == 0.0:
    return 0.5  # a constant rule gets one class wholly wrong
  mu0, mu1 = (np.asarray(m, np.float64) for m in means)
  miss_rare = normal_cdf(-(float(w @ mu1) + c) / (sigma * norm))
  miss_dominant = normal_cdf((float(w @ mu0) + c) / (sigma * norm))
  return 0.5 * (miss_rare + miss_dominant)


def bayes_balanced_error(means, sigma):
  """Phi(-|mu_1 - mu_0| / (2 sigma)): the best balanced error of any rule."""
  mu0, mu1 = (np.asarray(m, np.float64) for m in means)
  return normal_cdf(-float(np.linalg.norm(mu1 - mu0)) / (2.0 * sigma))


def bayes_rule(means):
  """(w, c) of the balance-optimal rule: the likelihood ratio, priors left out."""
  mu0, mu1 = (np.asarray(m, np.float64) for m in means)
  return mu1 - mu0, -0.5 * float(mu1 @ mu1 - mu0 @ mu0)


def draw(n, setup, rng):
  """n i.i.d. (x, y) pairs: y = 1 with probability rare_prior."""
  labels = (rng.random(n) < setup.rare_prior).astype(np.int32)
  means = np.asarray(setup.means, np.float64)
  features = means[labels] + setup.sigma * rng.standard_normal((n, 2))
  return features.astype(np.float32), labels


# A fitted decision weight beyond this means the fit ran off to infinity (separable
# data); the paper's setup fits weights of about 2 (the Bayes rule is 2 x1 + 2 x2 > 0).
MAX_WEIGHT = 1e3


class NoMinimiser(ValueError):
  """The training sample is (nearly) linearly separable: no minimiser to fit."""


def classifies_all(features, labels, w, c):
  """Whether the rule w.x + c > 0 <=> class 1 classifies every example correctly: then
  the sample is linearly separable and no loss of this family has a minimiser (scaling
  the rule up lowers it towards 0). Checked exactly, since where the float32 loss
  underflows to 0 Newton's method stops at a finite weight the CPU's rounding decides."""
  scores = features.astype(np.float64) @ np.asarray(w, np.float64) + c
  return bool(np.all((2 * np.asarray(labels) - 1) * scores > 0))


def fit_linear(features, labels, loss_fn, max_steps=100, tol=1e-6):
  """Minimises mean(loss_fn(labels, x W + b)) by damped Newton; returns (w, c).

  (w, c) = (W[:, 1] - W[:, 0], b[1] - b[0]): the model predicts class 1 iff
  w.x + c > 0. The two-logit model is over-parameterised (a shift shared by both logits
  changes nothing), so the Newton step uses the Hessian's pseudo-inverse.
  """
  x = tf.constant(features, tf.float32)
  y = tf.constant(labels, tf.int32)

  def mean_loss(theta):
    logits = tf.matmul(x, tf.reshape(theta[:4], [2, 2])) + theta[4:]
    return tf.reduce_mean(loss_fn(y, logits))

  @tf.function
  def derivatives(theta):
    with tf.GradientTape() as outer:
      outer.watch(theta)
      with tf.GradientTape() as inner:
        inner.watch(theta)
        loss = mean_loss(theta)
      grad = inner.gradient(loss, theta)
    return loss, grad, outer.jacobian(grad, theta)

  loss_at = tf.function(mean_loss)

  def decision(theta):
    return np.array([theta[1] - theta[0], theta[3] - theta[2], theta[5] - theta[4]])

  theta = np.zeros(6)
  for _ in range(max_steps):
    loss, grad, hess = (t.numpy().astype(np.float64)
                        for t in derivatives(tf.constant(theta, tf.float32)))
    step = np.linalg.pinv(hess, rcond=1e-6, hermitian=True) @ grad
    size = 1.0
    # Backtrack while the loss rises by more than float32 rounding of a mean loss.
    while (size > 1e-4 and
           float(loss_at(tf.constant(theta - size * step, tf.float32))) > loss + 1e-6):
      size /= 2
    new = theta - size * step
    moved = np.max(np.abs(decision(new) - decision(theta)))
    theta = new
    if moved < tol:
      break
  d = decision(theta)
  separates = classifies_all(features, labels, d[:2], d[2])
  if moved >= tol or np.max(np.abs(d)) > MAX_WEIGHT or separates:
    # On linearly separable data the loss has no minimiser: the weights grow until the
    # float32 loss underflows, or Newton's method keeps moving.
    how = (f"did not converge in {max_steps} steps" if moved >= tol
           else f"ended at a weight of {np.max(np.abs(d)):.3g}" if not separates
           else "found a rule that classifies every training example correctly")
    raise NoMinimiser(f"the loss has no minimiser on this training sample (Newton's "
                      f"method {how}): it is (nearly) linearly separable; raise "
                      "--train_size")
  return d[:2], float(d[2])


def decision_logits(w, c, features):
  """Logits (0, w.x + c): the fitted model's logits up to a shift both classes share,
  which changes neither softmax, argmax nor a post-hoc adjustment's decision."""
  scores = features.astype(np.float64) @ np.asarray(w, np.float64) + c
  return np.stack([np.zeros_like(scores), scores], axis=-1)


def post_hoc_rule(w, c, class_counts, tau):
  """(w, c') of argmax f(x) - tau * log(pi), by `tricks.posthoc.adjust` on the bias."""
  adjusted = posthoc.adjust(decision_logits(w, c, np.zeros((1, 2))), class_counts, tau)[0]
  return w, float(adjusted[1] - adjusted[0])


def run_seed(seed, setup=Setup()):
  """One trial: {method: balanced error}, plus the post-hoc tau chosen on validation."""
  rng = np.random.default_rng(seed)
  x_train, y_train = draw(setup.train_size, setup, rng)
  x_val, y_val = draw(setup.val_size, setup, rng)
  counts = np.bincount(y_train, minlength=2)
  if np.any(counts == 0) or np.any(np.bincount(y_val, minlength=2) == 0):
    raise ValueError(f"seed {seed}: a sample has no example of a class (training counts "
                     f"{counts.tolist()}); raise --train_size / --val_size or --rare_prior")
  tf.random.set_seed(seed)  # nothing here is random in TF; set for good measure
  erm = fit_linear(x_train, y_train, losses.cross_entropy(class_counts=counts))
  la = fit_linear(x_train, y_train,
                  logit_adjustment.LogitAdjustedLoss(counts, tau=setup.tau))
  balanced_softmax = fit_linear(x_train, y_train,
                                losses.balanced_softmax(class_counts=counts))
  val_tau = posthoc.choose_tau(decision_logits(*erm, x_val), y_val, counts)

  def ber(rule):
    return balanced_error(*rule, setup.means, setup.sigma)

  results = {
      "erm": ber(erm),
      "la_loss": ber(la),
      "post_hoc": ber(post_hoc_rule(*erm, counts, setup.tau)),
      "post_hoc_val": ber(post_hoc_rule(*erm, counts, val_tau)),
      "balanced_softmax": ber(balanced_softmax),
  }
  return dict(results, val_tau=val_tau, counts=counts.tolist(), la_rule=la)


ROWS = (
    ("erm", "(a) ERM (softmax cross-entropy)"),
    ("la_loss", "(b) logit-adjusted loss, tau = {tau:g}"),
    ("post_hoc", "(c) post-hoc adjustment of ERM, tau = {tau:g}"),
    ("post_hoc_val", "(c) post-hoc adjustment of ERM, tau on validation"),
    ("balanced_softmax", "(d) Balanced Softmax (the loss of (b), tau = 1)"),
)


def format_table(seeds, per_seed, setup):
  """A Markdown table: balanced error per seed, mean, and the gap to Bayes."""
  bayes = bayes_balanced_error(setup.means, setup.sigma)
  head = ["method"] + [f"seed {s}" for s in seeds] + ["mean", "mean - Bayes"]
  lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
  for key, label in ROWS:
    values = [r[key] for r in per_seed]
    mean = float(np.mean(values))
    cells = [label.format(tau=setup.tau)] + [f"{v:.4f}" for v in values]
    lines.append("| " + " | ".join(cells + [f"{mean:.4f}", f"{mean - bayes:+.5f}"]) + " |")
  cells = ["Bayes-optimal (closed form)"] + [f"{bayes:.4f}"] * (len(seeds) + 1) + ["0"]
  lines.append("| " + " | ".join(cells) + " |")
  return "\n".join(lines)


FLAGS = flags.FLAGS
flags.DEFINE_list("seeds", ["0", "1", "2"], "trials: one seed each (comma-separated ints)")
flags.DEFINE_integer("train_size", Setup.train_size, "training sample size (the paper: 10,000)",
                     lower_bound=2)
flags.DEFINE_integer("val_size", Setup.val_size, "validation sample size, for the post-hoc tau",
                     lower_bound=2)
flags.DEFINE_float("rare_prior", Setup.rare_prior, "P(y = +1) (the paper: 0.05)")
flags.register_validator(
    "seeds", lambda v: bool(v) and all(s.strip().isdigit() for s in v),
    message="--seeds must be a comma-separated list of non-negative integers, e.g. 0,1,2")
flags.register_validator("rare_prior", lambda v: 0.0 < v < 1.0,
                         message="--rare_prior must be strictly between 0 and 1")




def main(argv):
  if len(argv) > 1:
    errors.fail(f"unexpected arguments {' '.join(argv[1:])!r}; every flag starts with --")
  seeds = [int(s) for s in FLAGS.seeds]
  setup = Setup(rare_prior=FLAGS.rare_prior, train_size=FLAGS.train_size,
                val_size=FLAGS.val_size)
  start = time.perf_counter()
  per_seed = []
  for seed in seeds:
    try:
      per_seed.append(run_seed(seed, setup))
    except ValueError as e:
      errors.fail(f"seed {seed}: {str(e).splitlines()[0]}" if isinstance(e, NoMinimiser)
           else str(e).splitlines()[0])
  mu0, mu1 = setup.means
  print(f"Menon et al. 2021, Section 6.1: x | y ~ N(mu_y, {setup.sigma:g}^2 I), "
        f"mu_-1 = {mu0}, mu_+1 = {mu1}, P(y = +1) = {setup.rare_prior:g}; affine model "
        f"on {setup.train_size} training samples; balanced error exact (closed form).\n")
  print(format_table(seeds, per_seed, setup))
  print()
  print("rare training examples per seed: "
        + ", ".join(f"{s}: {r['counts'][1]}" for s, r in zip(seeds, per_seed)))
  print("post-hoc tau chosen on validation: "
        + ", ".join(f"{s}: {r['val_tau']:g}" for s, r in zip(seeds, per_seed)))
  w, c = bayes_rule(setup.means)
  for s, r in zip(seeds, per_seed):
    la_w, la_c = r["la_rule"]
    scale = np.linalg.norm(w) / np.linalg.norm(la_w)
    print(f"seed {s}: LA separator {la_w[0] * scale:+.3f} x1 {la_w[1] * scale:+.3f} x2 "
          f"{la_c * scale:+.3f} > 0 (Bayes: {w[0]:+.3f} x1 {w[1]:+.3f} x2 {c + 0.0:+.3f} > 0)")
  print(f"({time.perf_counter() - start:.1f} s)")


def cli(argv=None):
  app.run(main, argv=argv, flags_parser=errors.parse_flags)


if __name__ == "__main__":
  cli()
