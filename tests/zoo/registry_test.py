"""The zoo registry: published parameter counts, output shapes, one training step each."""

from absl.testing import parameterized
import numpy as np
import tensorflow as tf
import tf_keras

from zoo import pretrained
from zoo import registry

# Published parameter counts in millions, at 1000 classes unless noted, and sources:
# [K] the Keras Applications table (keras.io/api/applications: ResNet50 25.6M,
#     ResNet101 44.7M, ResNet152 60.4M, InceptionV3 23.9M);
# [T] torchvision's resnet50 (v1.5 layout, no conv biases): 25,557,032 = 25.6M;
# [H] He et al. 2016, table 6 (CIFAR, 10 classes); [B] Brock et al. 2021, table 1.
# Keras's table counts every weight (BN moving statistics too), as count_params()
# does; He et al. and Brock et al. count trainable ones.
PUBLISHED_M = {
    "resnet50": (25.6, 1000, "all"),          # [K]
    "resnet101": (44.7, 1000, "all"),         # [K]
    "resnet152": (60.4, 1000, "all"),         # [K]
    "resnet50_v1_5": (25.6, 1000, "all"),     # [T]
    "inception_v3": (23.9, 1000, "all"),      # [K]
    "resnet20_cifar": (0.27, 10, "trainable"),   # [H]
    "resnet32_cifar": (0.46, 10, "trainable"),   # [H]
    "resnet110_cifar": (1.7, 10, "trainable"),   # [H]
    "nfnet_f0": (71.5, 1000, "trainable"),    # [B]; F1-F6 in //tests/zoo:nfnet_test
}

# Small inputs for one training step (InceptionV3 needs 75px at least).
STEP_SIZE = {"inception_v3": 75}


class RegistryTest(tf.test.TestCase, parameterized.TestCase):

  def tearDown(self):
    tf_keras.backend.clear_session()
    super().tearDown()

  @parameterized.named_parameters(*[(name, name, *row)
                                    for name, row in sorted(PUBLISHED_M.items())])
  def test_parameter_count_is_the_published_one(self, name, millions, classes, counted):
    model = registry.build(name, num_classes=classes)
    count = (model.count_params() if counted == "all"
             else sum(v.shape.num_elements() for v in model.trainable_variables))
    digits = 2 if millions < 1 else 1
    self.assertEqual(round(count / 1e6, digits), millions, msg=name)
    resolution = registry.MODELS[name].resolution
    self.assertEqual(model.input_shape[1:3], (resolution, resolution))
    self.assertEqual(model.get_layer("logits").units, classes)

  @parameterized.parameters(*sorted(n for n in registry.MODELS
                                    if not n.startswith("nfnet_f") or n == "nfnet_f0"))
  def test_trains_one_step(self, name):
    size = STEP_SIZE.get(name, 32)
    model = registry.build(name, num_classes=3, input_shape=(size, size, 3))
    x = tf.constant(np.random.default_rng(0).normal(size=(2, size, size, 3)), tf.float32)
    self.assertEqual(model(x).shape, (2, 3))
    before = [v.numpy() for v in model.trainable_variables]
    optimizer = tf_keras.optimizers.SGD(0.01)
    with tf.GradientTape() as tape:
      loss = tf.reduce_mean(tf_keras.losses.sparse_categorical_crossentropy(
          [0, 2], model(x, training=True), from_logits=True))
    grads = tape.gradient(loss, model.trainable_variables)
    self.assertTrue(all(g is not None for g in grads))
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    self.assertTrue(np.isfinite(float(loss)))
    moved = {v.name for b, v in zip(before, model.trainable_variables)
             if not np.array_equal(b, v.numpy())}
    # The head always learns; NFNets' zero-initialised skip gains (SkipInit) keep
    # their residual branches still on the first step, so only some weights move.
    self.assertTrue(any("logits" in n for n in moved), msg=sorted(moved)[:5])
    self.assertGreater(len(moved), 2)

  def test_unknown_name(self):
    with self.assertRaisesRegex(ValueError, "unknown zoo model 'resnet51'.*//zoo:list"):
      registry.build("resnet51")

  def test_model_garden_resnet_takes_checkpoints_not_weight_files(self):
    with self.assertRaisesRegex(pretrained.WeightsError,
                                "resnet50_v1_5 has no weights file .* Model Garden checkpoint"):
      registry.build("resnet50_v1_5", num_classes=3, weights="imagenet")


if __name__ == "__main__":
  tf.test.main()
