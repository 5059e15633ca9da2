"""The zoo registry: published parameter counts, output shapes, one training step each,
and every model's card."""

from absl.testing import parameterized
import numpy as np
import tensorflow as tf
import tf_keras

from tricks import recompute
import zoo
from zoo import card as card_lib
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

# NFNet train / test resolutions and RandAugment (layers, magnitude): Brock et al.
# 2021, table 1, as DeepMind's nfnets/base.py writes them (RA_level "405" is 4 x 5).
NFNET_PUBLISHED = {
    "nfnet_f0": (192, 256, (4, 5)),
    "nfnet_f1": (224, 320, (4, 10)),
    "nfnet_f2": (256, 352, (4, 10)),
    "nfnet_f3": (320, 416, (4, 15)),
    "nfnet_f4": (384, 512, (4, 15)),
    "nfnet_f5": (416, 544, (4, 15)),
    "nfnet_f6": (448, 576, (4, 15)),
}

# Blocks each card's pattern finds: He et al. 2016 table 1 (ResNet-50: 3 + 4 + 6 + 3
# bottlenecks), section 4.2 (ResNet-20: 3 stages of n = 3), nano's one block a stage.
BLOCKS = {"resnet50": 16, "resnet20_cifar": 9, "nfnet_nano": 4}

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
    resolution = registry.card(name).train_size
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
    with self.assertRaisesRegex(ValueError, "unknown zoo model 'resnet51'.*resnet50, ") as e:
      registry.card("resnet51")
    self.assertNotIn("\n", str(e.exception))  # one line

  def test_every_entry_has_a_card(self):
    for name, entry in registry.MODELS.items():
      self.assertIsInstance(entry.card, card_lib.ModelCard, msg=name)
      self.assertIs(registry.card(name), entry.card)

  @parameterized.parameters(*sorted(NFNET_PUBLISHED))
  def test_nfnet_cards_are_deepmind_recipes(self, name):
    train, test, randaugment = NFNET_PUBLISHED[name]
    c = registry.card(name)
    self.assertEqual((c.train_size, c.test_size, c.randaugment), (train, test, randaugment))
    self.assertAlmostEqual(c.test_crop, test / (test + 32))  # nfnets/dataset.py
    self.assertEqual(c.resize_method, "bicubic")
    self.assertEqual((c.mean, c.std), ((0.485, 0.456, 0.406), (0.229, 0.224, 0.225)))

  def test_other_cards(self):
    imagenet = ((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))
    # Keras's caffe ResNets: BGR means 103.939, 116.779, 123.68 on 0-255 pixels.
    caffe = ((123.68 / 255, 116.779 / 255, 103.939 / 255), (1 / 255,) * 3)
    want = {
        "resnet50": (224, 224, 0.875, caffe, r"^(conv[0-9]_block[0-9]+)_"),
        "resnet152": (224, 224, 0.875, caffe, r"^(conv[0-9]_block[0-9]+)_"),
        "resnet50_v1_5": (224, 224, 0.875, imagenet, None),
        "inception_v3": (299, 299, 0.875, ((0.5,) * 3, (0.5,) * 3), None),  # x/127.5 - 1
        "resnet32_cifar": (32, 32, 1.0, ((0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)),
                           r"^(stage[0-9]/block[0-9]+)/"),
        "nfnet_nano": (64, 64, 1.0, imagenet, r"^(nf_block_[0-9]+)/"),
    }
    for name, (train, test, crop, (mean, std), pattern) in want.items():
      c = registry.card(name)
      self.assertEqual((c.train_size, c.test_size, c.test_crop, c.block_pattern),
                       (train, test, crop, pattern), msg=name)
      self.assertAllClose((c.mean, c.std), (mean, std), msg=name)
      self.assertEqual((c.resize_method, c.randaugment), ("bilinear", None), msg=name)

  @parameterized.parameters(*sorted(BLOCKS))
  def test_block_pattern_finds_the_blocks(self, name):
    model = registry.build(name, num_classes=3, input_shape=(32, 32, 3))
    self.assertIs(registry.card_of(model), registry.card(name))
    segments = recompute.block_segments(model, registry.card(name).block_pattern)
    self.assertLen(segments, BLOCKS[name])

  def test_build_through_the_package(self):
    model = zoo.build("resnet20_cifar", num_classes=4)
    self.assertEqual(model.input_shape, (None, 32, 32, 3))  # the card's train_size
    self.assertIs(zoo.card_of(model), zoo.model_card("resnet20_cifar"))
    self.assertIs(zoo.model_card("nfnet_f0"), registry.MODELS["nfnet_f0"].card)
    # DeepMind's crop, S / (S + 32), at F0's test size and at any other.
    self.assertAllClose(zoo.model_card("nfnet_f0").crop_for(256), 256 / 288)
    self.assertAllClose(zoo.model_card("nfnet_f0").crop_for(171), 171 / 203)
    self.assertEqual(zoo.model_card("resnet50").crop_for(171), 0.875)
    self.assertIsNone(zoo.card_of(tf_keras.Sequential()))

  def test_model_garden_resnet_takes_checkpoints_not_weight_files(self):
    with self.assertRaisesRegex(pretrained.WeightsError,
                                "resnet50_v1_5 takes no weights file but timm's resnet50 "
                                "model.safetensors .* Model Garden checkpoint"):
      registry.build("resnet50_v1_5", num_classes=3, weights="imagenet")
    with self.assertRaisesRegex(pretrained.WeightsError,
                                "resnext50_32x4d takes timm's resnext50_32x4d "
                                "model.safetensors as weights, not '/w.h5'"):
      registry.build("resnext50_32x4d", num_classes=3, weights="/w.h5")


if __name__ == "__main__":
  tf.test.main()
