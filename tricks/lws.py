"""Learnable weight scaling, LWS (Kang et al. 2020, "Decoupling Representation and
Classifier for Long-Tailed Recognition", arXiv:1910.09217, Sec. 4):

    w~_j = f_j * w_j,

one learnable scale per class on a frozen classifier, trained with class-balanced
sampling. Their released code (facebookresearch/classifier-balancing,
models/TauNormClassifier.py) multiplies the classifier's *output* by the scales,
`x = self.fc(x); x *= self.scales`, with `scales = ones(num_classes)` and the fc's
weight and bias frozen: logit_j = f_j * (w_j . x + b_j), the bias scaled too.
`LogitScales` is that multiplication as a Keras layer on the logits.
"""

import tensorflow as tf
import tf_keras


class LogitScales(tf_keras.layers.Layer):
  """logits * f, f a learnable vector of one scale per class, initialised to 1."""

  def build(self, input_shape):
    self.scales = self.add_weight(name="scales", shape=(int(input_shape[-1]),),
                                  initializer="ones", trainable=True)
    super().build(input_shape)

  def call(self, logits):
    return logits * tf.cast(self.scales, logits.dtype)
