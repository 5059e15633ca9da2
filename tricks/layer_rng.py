"""The random generators Keras layers draw from (Dropout, StochasticDepth, ...).

With `tf_keras.backend.experimental.enable_tf_random_generator()` each random layer
owns a `tf.random.Generator`. Keras keeps their state out of checkpoints and knows
nothing of recomputation; the trainer (exact resumption) and `tricks.recompute`
(the same masks in the backward pass) handle that state through this list.
"""

import tf_keras


def layer_random_generators(keras_model):
  """The tf.random.Generators of every random layer in `keras_model`, nested ones too."""
  generators = []
  for layer in keras_model.submodules:
    if isinstance(layer, tf_keras.__internal__.layers.BaseRandomLayer):
      generator = getattr(layer._random_generator, "_generator", None)  # pylint: disable=protected-access
      if generator is not None:
        generators.append(generator)
  return generators
