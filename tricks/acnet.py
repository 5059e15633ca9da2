"""ACNet: asymmetric convolution blocks and their exact fusion (Ding et al. 2019,
arXiv:1908.03930, section 3).

Training: a k x k convolution runs beside a 1 x k and a k x 1 one on the same input,
each followed by its own batch normalisation, and the three are summed. Inference:
by the additivity of convolution, with each BN folded into its kernel

    W' = W * gamma / sqrt(var + eps),   b' = beta - mean * gamma / sqrt(var + eps),

the 1 x k kernel is added to the centre row of the k x k kernel and the k x 1 kernel
to its centre column: one k x k convolution with a bias gives the same output.

The fusion is exact only when the three convolutions sample aligned windows, so the
block pads explicitly and symmetrically ("symmetric": k // 2 on every side, or
"valid": none) rather than with TF's "same", whose uneven padding at stride 2 would
misalign the 1 x k branch.
"""

import numpy as np
import tensorflow as tf
import tf_keras

PADDINGS = ("symmetric", "valid")


@tf_keras.utils.register_keras_serializable(package="tricks")
class ACConv2D(tf_keras.layers.Layer):
  """k x k + 1 x k + k x 1 convolutions, each with batch norm, summed (k odd)."""

  def __init__(self, filters, kernel_size=3, strides=1, padding="symmetric",
               momentum=0.99, epsilon=1e-3, **kwargs):
    super().__init__(**kwargs)
    if kernel_size % 2 != 1 or kernel_size < 3:
      raise ValueError(f"ACConv2D needs an odd kernel_size >= 3, got {kernel_size}")
    if padding not in PADDINGS:
      raise ValueError(f"ACConv2D padding must be one of {PADDINGS} (TF 'same' pads "
                       f"unevenly and breaks the fusion), got {padding!r}")
    self.filters = filters
    self.kernel_size = kernel_size
    self.strides = strides
    self.padding = padding
    self.momentum = momentum
    self.epsilon = epsilon
    k = kernel_size
    conv = lambda shape, name: tf_keras.layers.Conv2D(
        filters, shape, strides=strides, padding="valid", use_bias=False, name=name)
    bn = lambda name: tf_keras.layers.BatchNormalization(
        momentum=momentum, epsilon=epsilon, name=name)
    self.square, self.square_bn = conv((k, k), "square"), bn("square_bn")
    self.hor, self.hor_bn = conv((1, k), "hor"), bn("hor_bn")
    self.ver, self.ver_bn = conv((k, 1), "ver"), bn("ver_bn")

  @property
  def pad(self):
    return self.kernel_size // 2 if self.padding == "symmetric" else 0

  def _branches_input(self, inputs):
    """The padded input, and its crops that align the 1 x k and k x 1 windows."""
    p, c = self.pad, self.kernel_size // 2
    x = tf.pad(inputs, [[0, 0], [p, p], [p, p], [0, 0]]) if p else inputs
    height, width = tf.shape(x)[1], tf.shape(x)[2]
    return x, x[:, c:height - c, :, :], x[:, :, c:width - c, :]

  def call(self, inputs, training=None):
    x, rows, cols = self._branches_input(inputs)
    return (self.square_bn(self.square(x), training=training)
            + self.hor_bn(self.hor(rows), training=training)
            + self.ver_bn(self.ver(cols), training=training))

  def fused_kernel_and_bias(self):
    """The single k x k kernel and bias equal to the block in inference mode."""
    def fold(conv, bn):
      scale = bn.gamma.numpy() / np.sqrt(bn.moving_variance.numpy() + bn.epsilon)
      return conv.kernel.numpy() * scale, bn.beta.numpy() - bn.moving_mean.numpy() * scale

    c = self.kernel_size // 2
    kernel, bias = fold(self.square, self.square_bn)
    hor_kernel, hor_bias = fold(self.hor, self.hor_bn)
    ver_kernel, ver_bias = fold(self.ver, self.ver_bn)
    kernel = kernel.copy()
    kernel[c:c + 1, :, :, :] += hor_kernel
    kernel[:, c:c + 1, :, :] += ver_kernel
    return kernel, bias + hor_bias + ver_bias

  def fused_block(self, name=None):
    """The unbuilt inference block: explicit padding, one k x k Conv2D with bias."""
    conv = tf_keras.layers.Conv2D(self.filters, self.kernel_size, strides=self.strides,
                                  padding="valid", name=f"{self.name}_fused")
    layers = [tf_keras.layers.ZeroPadding2D(self.pad)] if self.pad else []
    return tf_keras.Sequential(layers + [conv], name=name or f"{self.name}_fused_block")

  def fuse(self):
    """The fused block, built and holding the fused kernel and bias."""
    fused = self.fused_block()
    fused.build((None, None, None, self.square.kernel.shape[2]))
    fused.layers[-1].set_weights(list(self.fused_kernel_and_bias()))
    return fused

  def get_config(self):
    return dict(super().get_config(), filters=self.filters, kernel_size=self.kernel_size,
                strides=self.strides, padding=self.padding, momentum=self.momentum,
                epsilon=self.epsilon)


def _only_consumer(model, layer):
  """The one layer of `model` that consumes `layer`'s output, or None."""
  consumers = [node.layer for node in layer._outbound_nodes  # pylint: disable=protected-access
               if node.layer in model.layers]
  return consumers[0] if len(consumers) == 1 else None


def _convertible(conv):
  return (type(conv) is tf_keras.layers.Conv2D and conv.groups == 1  # pylint: disable=unidiomatic-typecheck
          and conv.kernel_size[0] == conv.kernel_size[1] and conv.kernel_size[0] % 2 == 1
          and conv.kernel_size[0] >= 3 and conv.strides[0] == conv.strides[1]
          and conv.dilation_rate == (1, 1) and conv.data_format == "channels_last"
          and conv.padding in ("same", "valid"))


def convert(model):
  """A copy of functional `model` with each k x k Conv2D + BatchNorm pair an ACConv2D.

  The square branch takes the pair's weights (a conv bias moves into the BN's
  moving mean); the 1 x k and k x 1 branches start fresh, as in the paper. "same"
  padding becomes the symmetric padding the fusion needs (same output size, windows
  shifted by at most a pixel at stride 2). Other layers keep their weights.
  """
  pairs = {}
  for layer in model.layers:
    bn = _only_consumer(model, layer) if isinstance(layer, tf_keras.layers.Conv2D) else None
    if (_convertible(layer) and isinstance(bn, tf_keras.layers.BatchNormalization)
        and bn.axis in ([3], [-1], 3, -1)):
      pairs[layer.name] = bn
  if not pairs:
    raise ValueError(f"model {model.name!r} has no odd k x k Conv2D followed by "
                     "BatchNormalization for ACNet to convert; switch the trick off for it")
  folded = {bn.name: conv for conv, bn in pairs.items()}

  def clone(layer):
    if layer.name in pairs:
      bn = pairs[layer.name]
      return ACConv2D(layer.filters, layer.kernel_size[0], strides=layer.strides[0],
                      padding="symmetric" if layer.padding == "same" else "valid",
                      momentum=bn.momentum, epsilon=bn.epsilon, name=layer.name)
    if layer.name in folded:  # the BN now lives inside the ACConv2D before it
      return tf_keras.layers.Activation("linear", name=layer.name)
    return layer.__class__.from_config(layer.get_config())

  converted = tf_keras.models.clone_model(model, clone_function=clone)
  for old, new in zip(model.layers, converted.layers):
    if old.name in pairs:
      bn = pairs[old.name]
      gamma, beta, mean, var = [w.numpy() for w in bn.weights]
      if old.use_bias:
        mean = mean - old.bias.numpy()
      new.square.kernel.assign(old.kernel)
      new.square_bn.set_weights([gamma, beta, mean, var])
    elif old.name not in folded:
      new.set_weights(old.get_weights())
  return converted


def fuse_model(model):
  """A copy of `model` with every ACConv2D replaced by its fused convolution."""
  if not any(isinstance(layer, ACConv2D) for layer in model.layers):
    raise ValueError(f"model {model.name!r} has no ACConv2D layer to fuse")

  def clone(layer):
    if isinstance(layer, ACConv2D):
      return layer.fused_block(name=layer.name)
    return layer.__class__.from_config(layer.get_config())

  fused = tf_keras.models.clone_model(model, clone_function=clone)
  for old, new in zip(model.layers, fused.layers):
    if isinstance(old, ACConv2D):
      new.layers[-1].set_weights(list(old.fused_kernel_and_bias()))
    else:
      new.set_weights(old.get_weights())
  return fused
