"""Extended Batch Normalization (Luo et al. 2020, arXiv:2003.05569, section 3).

BN's per-channel mean, but one standard deviation pooled over channels and batch:

    mu_c    = 1 / (N H W)   sum_{n,h,w}   x_nchw                      (as BN)
    sigma^2 = 1 / (N C H W) sum_{n,c,h,w} (x_nchw - mu_c)^2           (EBN)
    y       = gamma_c (x - mu_c) / sqrt(sigma^2 + eps) + beta_c

so sigma^2 is the mean over channels of BN's per-channel (biased) variances, and a
small batch still has C times more samples behind its scale. Moving averages of mu_c
(one a channel) and sigma^2 (a scalar) normalise at inference.

Under a distribution strategy the moments are those of the global batch: the replicas
all-reduce (SUM) their per-channel counts, sums and sums of squares in one collective,
and sigma^2 = mean_c(E[x^2]_c - mu_c^2) -- sums, never an average of local variances
(the one-pass form Keras's synchronised BN uses; a two-pass form measured ~15% slower
on the ResNet-50 benchmark). The statistics are computed in float32 whatever the
layer's compute dtype, so the layer is safe under mixed_float16 / mixed_bfloat16.
"""

import tensorflow as tf
import tf_keras


@tf_keras.utils.register_keras_serializable(package="tricks")
class ExtendedBatchNormalization(tf_keras.layers.Layer):
  """Drop-in for `BatchNormalization` with EBN's pooled standard deviation.

  Same arguments and weight names as Keras's layer (gamma, beta, moving_mean,
  moving_variance -- the last a scalar). A layer with `trainable=False` normalises
  with its moving statistics, as Keras's BN does in TF2 (fine-tuning).
  """

  def __init__(self, axis=-1, momentum=0.99, epsilon=1e-3, center=True, scale=True,
               synchronized=True, beta_initializer="zeros", gamma_initializer="ones",
               moving_mean_initializer="zeros", moving_variance_initializer="ones",
               **kwargs):
    super().__init__(**kwargs)
    if isinstance(axis, (list, tuple)):
      if len(axis) != 1:
        raise ValueError(f"ExtendedBatchNormalization normalises one channel axis, got "
                         f"axis={axis}")
      axis = axis[0]
    self.axis = axis
    self.momentum = momentum
    self.epsilon = epsilon
    self.center = center
    self.scale = scale
    self.synchronized = synchronized
    self.beta_initializer = tf_keras.initializers.get(beta_initializer)
    self.gamma_initializer = tf_keras.initializers.get(gamma_initializer)
    self.moving_mean_initializer = tf_keras.initializers.get(moving_mean_initializer)
    self.moving_variance_initializer = tf_keras.initializers.get(
        moving_variance_initializer)
    self.supports_masking = True

  def build(self, input_shape):
    rank = len(input_shape)
    self._channel_axis = self.axis % rank
    channels = input_shape[self._channel_axis]
    if channels is None:
      raise ValueError(f"{self.name}: the channel axis {self.axis} of input shape "
                       f"{tuple(input_shape)} must be known")
    add = lambda name, shape, init, trainable: self.add_weight(
        name=name, shape=shape, initializer=init, trainable=trainable,
        dtype=tf.float32, experimental_autocast=False,
        synchronization=(tf.VariableSynchronization.AUTO if trainable
                         else tf.VariableSynchronization.ON_READ),
        aggregation=(tf.VariableAggregation.NONE if trainable
                     else tf.VariableAggregation.MEAN))
    self.gamma = add("gamma", (channels,), self.gamma_initializer, True) if self.scale else None
    self.beta = add("beta", (channels,), self.beta_initializer, True) if self.center else None
    self.moving_mean = add("moving_mean", (channels,), self.moving_mean_initializer, False)
    self.moving_variance = add("moving_variance", (), self.moving_variance_initializer,
                               False)
    super().build(input_shape)

  def _broadcast(self, value, rank):
    shape = [1] * rank
    shape[self._channel_axis] = -1
    return tf.reshape(value, shape)

  def _sync_context(self):
    context = tf.distribute.get_replica_context()
    if self.synchronized and context is not None and context.num_replicas_in_sync > 1:
      return context
    return None

  def batch_moments(self, x):
    """(mu_c, sigma^2, count) of the global batch; `x` float32."""
    axes = [i for i in range(x.shape.rank) if i != self._channel_axis]
    context = self._sync_context()
    count = tf.cast(tf.reduce_prod(tf.gather(tf.shape(x), axes)), tf.float32)
    total = tf.reduce_sum(x, axis=axes)
    total_sq = tf.reduce_sum(tf.square(x), axis=axes)
    if context is not None:
      count, total, total_sq = context.all_reduce(tf.distribute.ReduceOp.SUM,
                                                  [count, total, total_sq])
    mean = total / count
    channel_variance = tf.maximum(total_sq / count - tf.square(mean), 0.0)
    return mean, tf.reduce_mean(channel_variance), count

  def _normalize_batch(self, x, gamma, beta):
    """Training-mode EBN, with its gradient in closed form. With x^ = (x - mu_c) r,
    r = (sigma^2 + eps)^-1/2, M = N H W and K = M C (global counts):

        dbeta_c = sum_nhw dy,   dgamma_c = sum_nhw dy x^,
        dx = r gamma_c dy - r gamma_c dbeta_c / M - x^ r sum_c(gamma_c dgamma_c) / K,

    the sums in dx taken over the global batch (all-reduced), those returned for
    gamma and beta over this replica's (the trainer all-reduces gradients itself).
    Fewer passes over x than autodiff of the forward ops.
    """
    rank = x.shape.rank
    axes = [i for i in range(rank) if i != self._channel_axis]
    b = lambda v: self._broadcast(v, rank)
    context = self._sync_context()

    @tf.custom_gradient
    def forward(x, gamma, beta):
      mean, variance, count = self.batch_moments(x)
      r = tf.math.rsqrt(variance + self.epsilon)
      scale = r * gamma
      y = x * b(scale) + b(beta - mean * scale)

      def grad(dy, unused_dmean, unused_dvariance):
        sum_dy = tf.reduce_sum(dy, axis=axes)
        sum_dy_x = tf.reduce_sum(dy * x, axis=axes)
        dbeta = sum_dy
        dgamma = r * (sum_dy_x - mean * sum_dy)
        if context is not None:
          sum_dy, dgamma_all = context.all_reduce(tf.distribute.ReduceOp.SUM,
                                                  [sum_dy, dgamma])
        else:
          dgamma_all = dgamma
        channels = tf.cast(tf.shape(x)[self._channel_axis], tf.float32)
        s = tf.reduce_sum(gamma * dgamma_all) / (count * channels)
        a = r * gamma
        c = mean * r * r * s - a * sum_dy / count
        dx = dy * b(a) - x * (r * r * s) + b(c)
        return dx, dgamma, dbeta

      return (y, mean, variance), grad

    return forward(x, gamma, beta)

  def call(self, inputs, training=None):
    if not self.trainable:
      training = False
    x = tf.cast(inputs, tf.float32)
    rank = x.shape.rank
    channels = tf.shape(x)[self._channel_axis]
    gamma = (tf.convert_to_tensor(self.gamma) if self.scale
             else tf.ones([channels], tf.float32))
    beta = (tf.convert_to_tensor(self.beta) if self.center
            else tf.zeros([channels], tf.float32))
    if training:
      y, mean, variance = self._normalize_batch(x, gamma, beta)
      decay = 1.0 - self.momentum
      self.moving_mean.assign_sub((self.moving_mean - mean) * decay)
      self.moving_variance.assign_sub((self.moving_variance - variance) * decay)
    else:
      # y = x * scale_c + shift_c: one multiply-add over x.
      scale = tf.math.rsqrt(self.moving_variance + self.epsilon) * gamma
      y = (x * self._broadcast(scale, rank)
           + self._broadcast(beta - self.moving_mean * scale, rank))
    return tf.cast(y, inputs.dtype)

  def compute_output_shape(self, input_shape):
    return input_shape

  def get_config(self):
    serialize = tf_keras.initializers.serialize
    return dict(super().get_config(), axis=self.axis, momentum=self.momentum,
                epsilon=self.epsilon, center=self.center, scale=self.scale,
                synchronized=self.synchronized,
                beta_initializer=serialize(self.beta_initializer),
                gamma_initializer=serialize(self.gamma_initializer),
                moving_mean_initializer=serialize(self.moving_mean_initializer),
                moving_variance_initializer=serialize(self.moving_variance_initializer))


def _is_batch_norm(layer):
  return isinstance(layer, tf_keras.layers.BatchNormalization)


def swap_batch_norm(model, synchronized=True):
  """A copy of functional/sequential `model` with every BatchNormalization an EBN.

  Every weight is carried over: gamma, beta and the moving means as they are, and
  EBN's scalar moving variance as the mean of BN's per-channel ones (exactly the
  pooled within-channel variance when those are the channels' variances). Nested
  models are swapped too. `model` itself is left untouched.
  """
  if not any(_is_batch_norm(layer) for layer in _all_layers(model)):
    raise ValueError(f"model {model.name!r} has no BatchNormalization layer to swap for "
                     "Extended BN; switch the trick off for this model")

  def clone(layer):
    if isinstance(layer, tf_keras.Model) and not isinstance(layer, tf_keras.Sequential) \
        and any(_is_batch_norm(inner) for inner in _all_layers(layer)):
      return swap_batch_norm(layer, synchronized)
    if _is_batch_norm(layer):
      config = layer.get_config()
      return ExtendedBatchNormalization(
          axis=config["axis"], momentum=config["momentum"], epsilon=config["epsilon"],
          center=config["center"], scale=config["scale"], synchronized=synchronized,
          name=layer.name, trainable=layer.trainable, dtype=layer.dtype_policy)
    return layer.__class__.from_config(layer.get_config())

  swapped = tf_keras.models.clone_model(model, clone_function=clone)
  for old, new in zip(model.layers, swapped.layers):
    if isinstance(old, tf_keras.Model) and new is not old and \
        any(_is_batch_norm(inner) for inner in _all_layers(old)):
      continue  # weights carried by the recursive swap
    if _is_batch_norm(old):
      values = {w.name.split("/")[-1].split(":")[0]: w.numpy() for w in old.weights}
      if "moving_variance" in values:
        values["moving_variance"] = values["moving_variance"].mean()
      for weight in new.weights:
        weight.assign(values[weight.name.split("/")[-1].split(":")[0]])
    else:
      new.set_weights(old.get_weights())
  return swapped


def _all_layers(model):
  for layer in model.layers:
    yield layer
    if isinstance(layer, tf_keras.Model):
      yield from _all_layers(layer)
