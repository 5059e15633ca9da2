"""A converged linear probe: multinomial logistic regression on frozen features.

The protocol of Radford et al. 2021 (CLIP, arXiv:2103.00020, sec. 3.2 and appendix
A.3): features computed once, a size, from the frozen network (the input of its
"logits" layer: the pooled features); scikit-learn's L-BFGS logistic regression, fit
to convergence, its L2 strength C chosen on a validation split alone over a
logarithmic sweep (CLIP: 10^-6 to 10^6; here `C_GRID`), then refit with the chosen C
on the training images. Nothing is chosen on the test split.

The objective for C (scikit-learn's, multinomial): sum_i -log softmax(W x_i + b)_{y_i}
+ ||W||^2 / (2 C), the bias unpenalised; `objective_gradient` gives its gradient, so a
test can check that a fit has converged rather than stopped at its iteration cap.
"""

import dataclasses

import numpy as np

C_GRID = tuple(float(c) for c in np.logspace(-4, 4, 17))  # 10^-4 ... 10^4, 2 a decade
MAX_ITER = 1000
TOLERANCE = 1e-6


def feature_function(model, batch_size=200):
  """images (preprocessed, N x H x W x C float32) -> float64 N x D: the frozen
  `model`'s pooled features (the input of its "logits" layer), traced once for every
  call (build it once a model, call it a chunk at a time)."""
  # pylint: disable=import-outside-toplevel
  import tensorflow as tf
  import tf_keras
  extractor = tf_keras.Model(model.inputs, model.get_layer("logits").input)
  call = tf.function(lambda x: extractor(x, training=False), reduce_retracing=True)

  def features_of(images):
    out = [call(tf.constant(images[i:i + batch_size])).numpy()
           for i in range(0, len(images), batch_size)]
    return np.concatenate(out).astype(np.float64)

  return features_of


def features(model, images, batch_size=200):
  """`feature_function(model)` of `images`, for one call."""
  return feature_function(model, batch_size)(images)


def balanced_accuracy(labels, predictions):
  """The mean over classes present in `labels` of each class's recall."""
  labels, predictions = np.asarray(labels), np.asarray(predictions)
  return float(np.mean([np.mean(predictions[labels == c] == c) for c in np.unique(labels)]))


@dataclasses.dataclass(frozen=True)
class Probe:
  """A fitted probe: the chosen C, every C's validation balanced accuracy, the
  classifier refit on the training features, and the standardisation it applies."""
  c: float
  validation: dict
  classifier: object
  mean: np.ndarray
  scale: np.ndarray

  def predict(self, x):
    return self.classifier.predict((x - self.mean) / self.scale)


def _fit(x, y, c):
  # pylint: disable=import-outside-toplevel
  from sklearn.linear_model import LogisticRegression
  classifier = LogisticRegression(C=c, max_iter=MAX_ITER, tol=TOLERANCE)
  classifier.fit(x, y)
  if classifier.n_iter_.max() >= MAX_ITER:
    raise RuntimeError(f"the probe at C={c:g} did not converge in {MAX_ITER} L-BFGS "
                       "iterations")
  return classifier


def fit(train_x, train_y, validation_x, validation_y, c_grid=C_GRID):
  """The probe whose C has the highest validation balanced accuracy (the smallest C,
  the strongest regularisation, on a tie), refit on the training features. Features
  are standardised with the training features' mean and standard deviation."""
  if len(validation_y) == 0:
    raise ValueError("the linear probe chooses C on a validation split: give one "
                     "(e.g. Task.validation_per_class)")
  mean = train_x.mean(0)
  scale = np.where(train_x.std(0) > 0, train_x.std(0), 1.0)
  x, v = (train_x - mean) / scale, (validation_x - mean) / scale
  validation, fitted = {}, {}
  for c in sorted(c_grid):
    fitted[c] = _fit(x, train_y, c)
    validation[c] = balanced_accuracy(validation_y, fitted[c].predict(v))
  best = max(validation, key=lambda c: (validation[c], -c))
  return Probe(best, validation, fitted[best], mean, scale)


def objective_gradient(classifier, x, y, c):
  """The gradient of scikit-learn's multinomial objective at the classifier's weights,
  (d/dW, d/db): X^T (P - Y) + W / C and sum_i (P - Y)_i, P the softmax probabilities
  and Y the one-hot labels over classifier.classes_."""
  w, b = classifier.coef_, classifier.intercept_
  logits = x @ w.T + b
  p = np.exp(logits - logits.max(1, keepdims=True))
  p /= p.sum(1, keepdims=True)
  onehot = (np.asarray(y)[:, None] == classifier.classes_[None, :]).astype(np.float64)
  return (p - onehot).T @ x + w / c, (p - onehot).sum(0)
