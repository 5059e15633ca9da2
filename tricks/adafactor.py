"""Adafactor (Shazeer & Stern 2018, arXiv:1804.04235, algorithms 4 and 5, beta1 = 0).

For a matrix (or the last two axes of a tensor) the second moment is kept factored,
a row vector R and a column vector C (memory n + m instead of n * m):

    beta2_t = 1 - t^(-0.8)
    R_t = beta2_t R_{t-1} + (1 - beta2_t) mean_cols(G_t^2 + eps1)
    C_t = beta2_t C_{t-1} + (1 - beta2_t) mean_rows(G_t^2 + eps1)
    V_t = R_t C_t / mean(R_t)
    U_t = G_t / sqrt(V_t),   U_t <- U_t / max(1, RMS(U_t) / d)          (clipping)
    X_t = X_{t-1} - alpha_t U_t,   alpha_t = max(eps2, RMS(X_{t-1})) rho_t,
    rho_t = min(learning_rate, 1 / sqrt(t))                     (relative step size)

Vectors and scalars keep an unfactored V_t. (Means instead of the paper's sums give
the same V_t: the factor of m cancels in R C / mean(R).) tf_keras's own Adafactor
also stores a full-size V for every weight, which is not sublinear; this one is not.
"""

import tensorflow as tf
import tf_keras


@tf_keras.utils.register_keras_serializable(package="tricks")
class Adafactor(tf_keras.optimizers.Optimizer):
  """Adafactor without momentum: slots sublinear in the size of every matrix."""

  def __init__(self, learning_rate=0.01, beta_2_decay=-0.8, epsilon_1=1e-30,
               epsilon_2=1e-3, clip_threshold=1.0, relative_step=True,
               scale_parameter=True, name="Adafactor", **kwargs):
    super().__init__(name=name, **kwargs)
    self._learning_rate = self._build_learning_rate(learning_rate)
    self.beta_2_decay = beta_2_decay
    self.epsilon_1 = epsilon_1
    self.epsilon_2 = epsilon_2
    self.clip_threshold = clip_threshold
    self.relative_step = relative_step
    self.scale_parameter = scale_parameter

  def build(self, var_list):
    super().build(var_list)
    if getattr(self, "_built", False):
      return
    self._built = True
    self._factors = []
    for var in var_list:
      if var.shape.rank >= 2:
        self._factors.append((
            self.add_variable(var.shape[:-1], tf.float32, name="row"),
            self.add_variable(var.shape[:-2] + var.shape[-1:], tf.float32, name="col")))
      else:
        self._factors.append((self.add_variable(var.shape, tf.float32, name="v"),))

  def update_step(self, gradient, variable):
    """Statistics and update in float32 whatever the weights' dtype (bf16 / fp16)."""
    dtype = tf.float32
    weights = tf.cast(variable, dtype)
    gradient = tf.cast(gradient, dtype)
    t = tf.cast(self.iterations + 1, dtype)
    rho = tf.cast(self.learning_rate, dtype)
    if self.relative_step:
      rho = tf.minimum(rho, tf.math.rsqrt(t))
    alpha = rho
    if self.scale_parameter:
      alpha = tf.maximum(tf.cast(self.epsilon_2, dtype), rms(weights)) * rho
    beta2 = 1.0 - tf.pow(t, tf.cast(self.beta_2_decay, dtype))
    grad_sq = tf.square(gradient) + tf.cast(self.epsilon_1, dtype)
    slots = self._factors[self._index_dict[self._var_key(variable)]]
    if len(slots) == 2:
      row, col = slots
      row.assign(beta2 * row + (1 - beta2) * tf.reduce_mean(grad_sq, axis=-1))
      col.assign(beta2 * col + (1 - beta2) * tf.reduce_mean(grad_sq, axis=-2))
      v = (tf.expand_dims(row / tf.reduce_mean(row, axis=-1, keepdims=True), -1)
           * tf.expand_dims(col, -2))
    else:
      (v_slot,) = slots
      v_slot.assign(beta2 * v_slot + (1 - beta2) * grad_sq)
      v = v_slot
    update = gradient * tf.math.rsqrt(v)
    update /= tf.maximum(1.0, rms(update) / tf.cast(self.clip_threshold, dtype))
    variable.assign(tf.cast(weights - alpha * update, variable.dtype))

  def get_config(self):
    return dict(super().get_config(),
                learning_rate=self._serialize_hyperparameter(self._learning_rate),
                beta_2_decay=self.beta_2_decay, epsilon_1=self.epsilon_1,
                epsilon_2=self.epsilon_2, clip_threshold=self.clip_threshold,
                relative_step=self.relative_step, scale_parameter=self.scale_parameter)


def rms(x):
  return tf.sqrt(tf.reduce_mean(tf.square(x)))
