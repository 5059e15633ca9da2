"""SM3-II (Anil, Gupta, Koren, Singer 2019, arXiv:1901.11150, algorithm SM3-II).

A tensor of shape (n_1, ..., n_k) keeps one accumulator per axis, a_r of length n_r
(the cover of its slices), n_1 + ... + n_k numbers instead of their product:

    nu_t(i)  = min_r a_r(i_r) + g_t(i)^2
    a_r(j)  <- max over {i : i_r = j} of nu_t(i)
    w_t      = w_{t-1} - lr * g_t / sqrt(nu_t)         (0 where nu_t = 0)

Vectors and scalars keep one accumulator of their own shape (Adagrad). Optional
momentum m <- beta m + (1 - beta) update, as in the authors' implementation, costs a
full-size slot; momentum = 0 keeps the optimizer sublinear.
"""

import tensorflow as tf
import tf_keras


@tf_keras.utils.register_keras_serializable(package="tricks")
class SM3(tf_keras.optimizers.Optimizer):
  """SM3-II with per-axis accumulators."""

  def __init__(self, learning_rate=0.1, momentum=0.0, name="SM3", **kwargs):
    super().__init__(name=name, **kwargs)
    self._learning_rate = self._build_learning_rate(learning_rate)
    if not 0.0 <= momentum < 1.0:
      raise ValueError(f"SM3 momentum must be in [0, 1), got {momentum}")
    self.momentum = momentum

  def build(self, var_list):
    super().build(var_list)
    if getattr(self, "_built", False):
      return
    self._built = True
    self._accumulators = []
    self._momenta = []
    for var in var_list:
      if var.shape.rank <= 1:
        self._accumulators.append([self.add_variable(var.shape, tf.float32,
                                                     name="accumulator")])
      else:
        self._accumulators.append([
            self.add_variable([dim], tf.float32, name=f"accumulator_{axis}")
            for axis, dim in enumerate(var.shape)])
      if self.momentum:
        self._momenta.append(self.add_variable(var.shape, tf.float32, name="momentum"))

  def update_step(self, gradient, variable):
    """Accumulators and update in float32 whatever the weights' dtype (bf16 / fp16)."""
    gradient = tf.cast(gradient, tf.float32)
    index = self._index_dict[self._var_key(variable)]
    accumulators = self._accumulators[index]
    rank = variable.shape.rank
    if rank <= 1:
      nu = accumulators[0] + tf.square(gradient)
      accumulators[0].assign(nu)
    else:
      def along(axis, vector):  # reshape a_r to broadcast along axis r
        shape = [1] * rank
        shape[axis] = -1
        return tf.reshape(vector, shape)

      covers = [along(r, a) for r, a in enumerate(accumulators)]
      nu = covers[0]
      for cover in covers[1:]:
        nu = tf.minimum(nu, cover)
      nu = nu + tf.square(gradient)
      for r, accumulator in enumerate(accumulators):
        others = [axis for axis in range(rank) if axis != r]
        accumulator.assign(tf.reduce_max(nu, axis=others))
    update = tf.math.divide_no_nan(gradient, tf.sqrt(nu))
    if self.momentum:
      m = self._momenta[index]
      m.assign(self.momentum * m + (1.0 - self.momentum) * update)
      update = m
    variable.assign(tf.cast(tf.cast(variable, tf.float32)
                            - tf.cast(self.learning_rate, tf.float32) * update,
                            variable.dtype))

  def get_config(self):
    return dict(super().get_config(),
                learning_rate=self._serialize_hyperparameter(self._learning_rate),
                momentum=self.momentum)
