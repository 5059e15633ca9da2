"""Signal-propagation pieces of Normalizer-Free networks (Brock et al. 2021).

- `ScaledActivation`: g(x) * gamma with gamma = 1 / sqrt(Var[g(z)]), z ~ N(0, 1)
  (arXiv:2101.08692, section 4.1), so a unit-variance input keeps unit variance.
  The constants are DeepMind's released ones (nfnets/base.py), with which their
  checkpoints were trained; tests check each against the integral. "gelu_exact" is
  the erf GELU of timm's NFNets (timm/models/nfnet.py: F.gelu, gamma in the activation
  for its dm_nfnet models), which scale it by DeepMind's GELU constant.
- `SkipGain`: SkipInit (De & Smith 2020, arXiv:2002.10444): a scalar gain on the
  residual branch, initialised at zero, so each block starts as the identity.
"""

import tensorflow as tf
import tf_keras

# Name -> (function, gamma). "gelu" is the tanh approximation, as in JAX's default;
# "gelu_exact" the erf form, as PyTorch's default (timm's ports of DeepMind's NFNets).
ACTIVATIONS = {
    "identity": (tf.identity, 1.0),
    "relu": (tf.nn.relu, 1.7139588594436646),
    "gelu": (lambda x: tf.nn.gelu(x, approximate=True), 1.7015043497085571),
    "gelu_exact": (lambda x: tf.nn.gelu(x, approximate=False), 1.7015043497085571),
    "silu": (tf.nn.silu, 1.7881293296813965),
    "elu": (tf.nn.elu, 1.2716004848480225),
    "selu": (tf.nn.selu, 1.0008515119552612),
    "softplus": (tf.nn.softplus, 1.9203323125839233),
    "tanh": (tf.tanh, 1.5939117670059204),
    "sigmoid": (tf.sigmoid, 4.803835391998291),
}


@tf_keras.utils.register_keras_serializable(package="tricks")
class ScaledActivation(tf_keras.layers.Layer):
  """gamma * g(x) for a named nonlinearity g (variance preserving at init)."""

  def __init__(self, activation="gelu", **kwargs):
    super().__init__(**kwargs)
    if activation not in ACTIVATIONS:
      raise ValueError(
          f"unknown activation {activation!r}; choose one of {sorted(ACTIVATIONS)}")
    self.activation = activation
    self._fn, self.gamma = ACTIVATIONS[activation]

  def call(self, inputs):
    return self._fn(inputs) * tf.cast(self.gamma, inputs.dtype)

  def get_config(self):
    return dict(super().get_config(), activation=self.activation)


@tf_keras.utils.register_keras_serializable(package="tricks")
class SkipGain(tf_keras.layers.Layer):
  """x * g with one learnable scalar g, initialised to `init` (0 for SkipInit)."""

  def __init__(self, init=0.0, **kwargs):
    super().__init__(**kwargs)
    self.init = init

  def build(self, input_shape):
    self.gain = self.add_weight(
        name="skip_gain", shape=(),
        initializer=tf_keras.initializers.Constant(self.init), trainable=True)
    super().build(input_shape)

  def call(self, inputs):
    return inputs * tf.cast(self.gain, inputs.dtype)

  def get_config(self):
    return dict(super().get_config(), init=self.init)
