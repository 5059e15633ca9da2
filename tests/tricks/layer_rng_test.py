"""layer_random_generators: every random layer's generator, nested models included."""

import tensorflow as tf
import tf_keras

from tricks import layer_rng
from tricks import stochastic_depth


class LayerRngTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    tf_keras.backend.experimental.enable_tf_random_generator()
    tf_keras.utils.set_random_seed(0)

  def test_finds_dropout_and_stochastic_depth_in_nested_models(self):
    inner_in = tf_keras.Input((4,))
    inner = tf_keras.Model(inner_in, stochastic_depth.StochasticDepth(0.5)(
        tf_keras.layers.Dropout(0.2)(inner_in)))
    inputs = tf_keras.Input((4,))
    x = tf_keras.layers.Dropout(0.3)(tf_keras.layers.Dense(4)(inputs))
    model = tf_keras.Model(inputs, inner(x))
    generators = layer_rng.layer_random_generators(model)
    self.assertLen(generators, 3)
    self.assertTrue(all(isinstance(g, tf.random.Generator) for g in generators))
    # Restoring a generator's state replays the layer's mask.
    layer = model.layers[2]
    state = generators[0].state.numpy()
    first = layer(tf.ones((2, 4)), training=True)
    generators[0].state.assign(state)
    self.assertAllEqual(layer(tf.ones((2, 4)), training=True), first)

  def test_none_without_random_layers(self):
    inputs = tf_keras.Input((4,))
    model = tf_keras.Model(inputs, tf_keras.layers.Dense(2)(inputs))
    self.assertEmpty(layer_rng.layer_random_generators(model))


if __name__ == "__main__":
  tf.test.main()
