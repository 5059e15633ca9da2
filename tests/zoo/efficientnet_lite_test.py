"""EfficientNet-Lite0/1/2 with Google's ImageNet weights, offline and without torch.

The weights are the files the hash-locked packages efficientnet-lite{0,1,2}-pytorch-
model install (zoo/efficientnet_lite_checkpoint.py). On scikit-learn's two photos
(tests/zoo/efficientnet_lite_reference.photos) each model's top-5 classes must be the
reference's (efficientnet-lite-pytorch 0.1.0, float64, recorded by
data/make_efficientnet_lite_fixtures.py) in its order, each probability within 1e-4
of its own: Lite0 698 "palace" (0.32) and 985 "daisy" (0.37). A padding of PyTorch's
symmetric kind for TensorFlow's SAME moves them by more (the torch test checks the
logits themselves: //tests/zoo:efficientnet_lite_torch_test). The same tensors under
timm's tf_efficientnet_lite names, as model.safetensors with timm's config.json
(data/timm_efficientnet_lite.json), load through zoo/timm_checkpoint.py to the same
logits.
"""

import collections
import json
import os

from absl.testing import parameterized
import numpy as np
from safetensors.numpy import save_file
import tensorflow as tf
import tf_keras

from tests.zoo import efficientnet_lite_reference as reference
from tricks import recompute
from zoo import card as card_lib
from zoo import efficientnet_lite
from zoo import efficientnet_lite_checkpoint as checkpoint
from zoo import export
from zoo import layer_groups
from zoo import registry
from zoo import safe_pickle
from zoo import timm_checkpoint

VARIANTS = tuple(efficientnet_lite.VARIANTS)
PHOTOS = reference.load_fixtures()
TIMM = reference.load_fixtures(reference.TIMM)
# Trainable parameters at 1000 classes: timm's tf_efficientnet_lite0/1/2 (4.65M,
# 5.42M, 6.09M), and the float tensors of Google's files less BatchNorm's statistics.
TRAINABLE = {"lite0": 4_652_008, "lite1": 5_416_680, "lite2": 6_092_072}
# Lite2's stage widths (round_filters at width 1.1) and Lite1's repeats (ceil(1.1 r)).
LITE2_WIDTHS = (16, 24, 48, 88, 120, 208, 352)
LITE1_REPEATS = (1, 3, 3, 4, 4, 5, 1)
PROBABILITY_TOLERANCE = 1e-4


def state_dict(variant):
  return safe_pickle.read_torch_legacy(checkpoint.packaged_file(variant))


class ArchitectureTest(tf.test.TestCase, parameterized.TestCase):

  def tearDown(self):
    tf_keras.backend.clear_session()
    super().tearDown()

  def test_scaling_rules(self):
    self.assertEqual([b.stage for b in efficientnet_lite.blocks("lite0")],
                     [1, 2, 2, 3, 3, 4, 4, 4, 5, 5, 5, 6, 6, 6, 6, 7])
    repeats = collections.Counter(b.stage for b in efficientnet_lite.blocks("lite1"))
    self.assertEqual(tuple(repeats[s] for s in range(1, 8)), LITE1_REPEATS)
    lite2 = efficientnet_lite.blocks("lite2")
    self.assertEqual(tuple(sorted({b.outputs for b in lite2})), LITE2_WIDTHS)
    self.assertEqual(lite2[0].inputs, 32)  # the stem stays 32 wide
    self.assertEqual(efficientnet_lite.round_filters(112, 1.1), 120)  # 123.2 -> 120
    self.assertEqual(efficientnet_lite.round_filters(16, 0.25), 8)  # at least 8
    self.assertEqual(efficientnet_lite.round_repeats(4, 1.2), 5)

  @parameterized.parameters(*VARIANTS)
  def test_parameters_are_the_checkpoints(self, variant):
    model = efficientnet_lite.efficientnet_lite(variant)
    trainable = sum(int(np.prod(w.shape)) for w in model.trainable_weights)
    self.assertEqual(trainable, TRAINABLE[variant])
    state = state_dict(variant)
    self.assertEqual(trainable, sum(a.size for k, a in state.items() if a.dtype ==
                                    np.float32 and "running" not in k))
    self.assertEqual(model.get_layer("head/conv").filters, 1280)  # not scaled
    self.assertEqual(model.input_shape, (None, *(efficientnet_lite.VARIANTS[variant]
                                                 .resolution,) * 2, 3))

  def test_tensorflow_same_padding(self):
    same = efficientnet_lite.same_padding
    self.assertEqual(same(224, 3, 2), (0, 1))  # even side, stride 2: one more after
    self.assertEqual(same(225, 3, 2), (1, 1))
    self.assertEqual(same(112, 5, 2), (1, 2))
    self.assertEqual(same(113, 5, 2), (2, 2))
    self.assertEqual(same(57, 5, 1), (2, 2))
    model = efficientnet_lite.efficientnet_lite("lite0", input_shape=(224, 225, 3))
    self.assertEqual(model.get_layer("stem/pad").padding, ((0, 1), (1, 1)))
    # Stage 3 opens on 56 x 57: a 5x5 stride 2 layer pads (1, 2) and (2, 2).
    self.assertEqual(model.get_layer("stage3/block0/dw_pad").padding, ((1, 2), (2, 2)))
    self.assertEqual(model.get_layer("stem/conv").padding, "valid")

  def test_unknown_sides_pad_alike(self):
    # A None side is padded by the layers' own 'same': the same function.
    tf_keras.utils.set_random_seed(2)
    fixed = efficientnet_lite.efficientnet_lite("lite0", 5, input_shape=(37, 50, 3))
    free = efficientnet_lite.efficientnet_lite("lite0", 5, input_shape=(None, None, 3))
    free.set_weights(fixed.get_weights())
    x = reference.random_images(37, 50)
    want = fixed(x, training=False).numpy()
    self.assertAllClose(free(x, training=False), want, rtol=0,
                        atol=1e-5 * np.abs(want).max())

  def test_drop_connect_and_dropout_train_only(self):
    model = efficientnet_lite.efficientnet_lite("lite0", 3, input_shape=(32, 32, 3),
                                                dropout=0.2, drop_connect_rate=0.2)
    drops = [l for l in model.layers if l.name.endswith("/drop")]
    self.assertLen(drops, 9)  # the blocks with a skip: 16 less the 7 stage openers
    # efficientnet_model.py's rule: the rate times the block's index over 16.
    self.assertEqual(drops[-1].name, "stage6/block3/drop")  # block 14
    self.assertAllClose(drops[-1].rate, 0.2 * 14 / 16)
    x = reference.random_images(32, 32)
    self.assertAllEqual(model(x, training=False), model(x, training=False))
    with self.assertRaisesRegex(ValueError, "drop_connect_rate=1.0 must be in"):
      efficientnet_lite.efficientnet_lite("lite0", drop_connect_rate=1.0)

  def test_cards(self):
    for variant in VARIANTS:
      card = registry.card(f"efficientnet_{variant}")
      size = efficientnet_lite.VARIANTS[variant].resolution
      self.assertEqual((card.train_size, card.test_size), (size, size))
      # Google's (x - 127) / 128 and S / (S + 32) (efficientnet_lite_builder.py,
      # preprocessing.py), not timm's 0.5 / 0.5 and 0.875.
      self.assertAllClose(np.multiply(card.mean, 255), [127.0] * 3, rtol=0, atol=1e-9)
      self.assertAllClose(np.multiply(card.std, 255), [128.0] * 3, rtol=0, atol=1e-9)
      self.assertAllClose(card.crop_for(size), size / (size + 32), rtol=0, atol=1e-12)
      self.assertAllClose(card.crop_for(128), 0.8, rtol=0, atol=1e-12)
      self.assertEqual(card.resize_method, "bicubic")
    self.assertAllClose(registry.card("efficientnet_lite0").test_crop, 0.875)
    self.assertEqual((registry.card("efficientnet_lite1").train_size,
                      registry.card("efficientnet_lite2").train_size), (240, 260))

  def test_recompute_segments_the_blocks_and_the_head(self):
    model = registry.build("efficientnet_lite0", num_classes=3, input_shape=(32, 32, 3))
    pattern = registry.card_of(model).block_pattern
    self.assertLen(recompute.block_segments(model, pattern), 16 + 1)
    rebuilt = recompute.recompute(model, pattern, every=4)
    x = reference.random_images(32, 32)
    self.assertAllClose(rebuilt(x, training=False), model(x, training=False), atol=1e-6)

  def test_layer_groups_stem_blocks_head_conv_and_logits(self):
    model = registry.build("efficientnet_lite0", num_classes=3, input_shape=(32, 32, 3))
    groups = layer_groups.layer_groups(model)
    self.assertLen(groups, 1 + 16 + 1 + 1)
    self.assertEqual([l.name for l in groups[0]], ["stem/conv", "stem/bn"])
    self.assertEqual([l.name for l in groups[1]], [
        "stage1/block0/dw_conv", "stage1/block0/dw_bn", "stage1/block0/project_conv",
        "stage1/block0/project_bn"])
    self.assertEqual([l.name for l in groups[-2]], ["head/conv", "head/bn"])
    self.assertEqual([l.name for l in groups[-1]], ["logits"])


class WeightsTest(tf.test.TestCase, parameterized.TestCase):

  def tearDown(self):
    tf_keras.backend.clear_session()
    super().tearDown()

  @parameterized.parameters(*VARIANTS)
  def test_imagenet_top5_on_two_photos_are_the_references(self, variant):
    record = PHOTOS[variant]
    model = registry.build(f"efficientnet_{variant}", weights="imagenet")
    images = reference.photos(record["size"], record["size"])
    self.assertEqual(reference.digest(images), record["digest"])  # the same pixels
    probabilities = tf.nn.softmax(model(images, training=False)).numpy()
    top5 = np.argsort(-probabilities, axis=1)[:, :5]
    self.assertEqual(top5.tolist(), record["top5"])
    self.assertAllClose(np.take_along_axis(probabilities, top5, 1),
                        record["probabilities"], rtol=0, atol=PROBABILITY_TOLERANCE)
    self.assertEqual(top5[:, 0].tolist(), [698, 985 if variant == "lite0" else 599])

  @parameterized.parameters(*VARIANTS)
  def test_the_cards_own_preprocessing_keeps_the_references_classes(self, variant):
    # The fixtures' inputs are the reference's (0.5 / 0.5, a 0.875 crop); the card's
    # own evaluation preprocessing (Google's (x - 127) / 128, S / (S + 32), TensorFlow's
    # bicubic) on the same photos gives the reference's top class (its probabilities
    # move by up to 0.11: another resize and crop offset, not the 0.4% of scale).
    from sklearn import datasets  # pylint: disable=g-import-not-at-top
    record = PHOTOS[variant]
    model = registry.build(f"efficientnet_{variant}", weights="imagenet")
    card = registry.card_of(model)
    pixels = tf.stack([card_lib.eval_preprocess(
        image, card.test_size, card.crop_for(card.test_size), card.mean, card.std,
        card.resize_method) for image in datasets.load_sample_images().images])
    probabilities = tf.nn.softmax(model(pixels, training=False)).numpy()
    self.assertEqual(np.argmax(probabilities, 1).tolist(),
                     [row[0] for row in record["top5"]])

  @parameterized.parameters(*VARIANTS)
  def test_every_tensor_is_used(self, variant):
    model = efficientnet_lite.efficientnet_lite(variant)
    with self.assertLogs(level="INFO") as logs:
      done = checkpoint.load_weights(model, variant, "imagenet")
    self.assertTrue(done["head"])
    state = state_dict(variant)
    self.assertEqual(done["skipped"], sorted(k for k in state
                                             if k.endswith(".num_batches_tracked")))
    self.assertLen(done["skipped"], 49 if variant == "lite0" else 64)
    self.assertLen(state, len(model.weights) + len(done["skipped"]))
    self.assertIn(checkpoint.PACKAGES[variant][3], "".join(logs.output))  # the SHA-256
    layout = checkpoint.LAYOUTS
    self.assertAllEqual(model.get_layer("stem/conv").kernel,
                        layout["conv"][1](state["_conv_stem.weight"]))
    self.assertAllEqual(model.get_layer("stage2/block0/dw_conv").depthwise_kernel,
                        layout["depthwise"][1](state["_blocks.1._depthwise_conv.weight"]))
    self.assertAllEqual(model.get_layer("logits").kernel, state["_fc.weight"].T)
    self.assertAllEqual(model.get_layer("head/bn").moving_variance,
                        state["_bn1.running_var"])

  def test_another_class_count_keeps_a_fresh_head(self):
    tf_keras.utils.set_random_seed(0)
    model = registry.build("efficientnet_lite0", num_classes=10, weights="imagenet",
                           input_shape=(64, 64, 3))
    tf_keras.utils.set_random_seed(0)
    fresh = registry.build("efficientnet_lite0", num_classes=10, input_shape=(64, 64, 3))
    self.assertAllEqual(model.get_layer("logits").kernel,
                        fresh.get_layer("logits").kernel)
    self.assertNotAllClose(model.get_layer("stem/conv").kernel,
                           fresh.get_layer("stem/conv").kernel)

  def test_grey_twin_equals_the_rgb_model_on_replicated_grey(self):
    grey_model = registry.build("efficientnet_lite0", input_shape=(64, 64, 3),
                                input_channels=1, weights="imagenet")
    rgb_model = registry.build("efficientnet_lite0", input_shape=(64, 64, 3),
                               weights="imagenet")
    self.assertEqual(grey_model.input_shape, (None, 64, 64, 1))
    x = reference.random_images(64, 64)[..., :1]
    want = rgb_model(np.repeat(x, 3, axis=-1), training=False).numpy()
    self.assertAllClose(grey_model(x, training=False), want, rtol=0,
                        atol=1e-4 * np.abs(want).max())

  def test_export_serves_a_photo_as_evaluation_scores_it(self):
    model = registry.build("efficientnet_lite0", weights="imagenet")
    card = registry.card_of(model)
    path = export.export_saved_model(model, os.path.join(self.get_temp_dir(), "sm"),
                                     card.test_size, card.mean, card.std, card.test_crop,
                                     card.resize_method)
    from sklearn import datasets  # pylint: disable=g-import-not-at-top
    folder = os.path.join(os.path.dirname(datasets.__file__), "images")
    with open(os.path.join(folder, "china.jpg"), "rb") as f:
      jpeg = f.read()
    pixels = card_lib.eval_preprocess_encoded(jpeg, card.test_size, card.test_crop,
                                              card.mean, card.std, card.resize_method)
    want = model(pixels[None], training=False).numpy()
    served = tf.saved_model.load(path).signatures["serving_default"](
        images=tf.constant([jpeg]))
    self.assertAllClose(served["logits"], want, rtol=0, atol=1e-5 * np.abs(want).max())
    self.assertEqual(int(served["classes"][0]), 698)  # palace, as on the fixture's crop


class TimmTest(tf.test.TestCase, parameterized.TestCase):
  """timm's tf_efficientnet_lite names and configuration (data/timm_efficientnet_lite
  .json, recorded with timm 1.0.31)."""

  def tearDown(self):
    tf_keras.backend.clear_session()
    super().tearDown()

  @parameterized.parameters(*VARIANTS)
  def test_zoo_names_are_timms(self, variant):
    record = TIMM[f"tf_efficientnet_{variant}"]
    model = efficientnet_lite.efficientnet_lite(variant)
    got = {k: s for k, (_, _, s) in timm_checkpoint.expected_tensors(
        model, f"efficientnet_{variant}").items()}
    want = {k: tuple(s) for k, _, s in record["tensors"]
            if not k.endswith("num_batches_tracked")}
    self.assertEqual(got, want)
    # The test's own renaming (apart from the zoo's) gives timm's names too.
    renamed = {reference.timm_key(k, variant) for k in state_dict(variant)}
    self.assertEqual(renamed, {k for k, _, _ in record["tensors"]})

  def test_safetensors_under_timms_names_load_to_the_same_logits(self):
    variant = "lite1"  # its config's crop (0.882) differs from the zoo card's
    record = TIMM[f"tf_efficientnet_{variant}"]
    folder = self.create_tempdir().full_path
    path = os.path.join(folder, "model.safetensors")
    save_file({reference.timm_key(k, variant): v for k, v in state_dict(variant).items()},
              path, metadata={"format": "pt"})
    with open(os.path.join(folder, "config.json"), "w", encoding="utf-8") as f:
      json.dump(record["config"], f)
    x = reference.random_images(61, 75)
    timm_model = registry.build("efficientnet_lite1", weights=path,
                                input_shape=(61, 75, 3))
    want = registry.build("efficientnet_lite1", weights="imagenet",
                          input_shape=(61, 75, 3))(x, training=False).numpy()
    self.assertAllClose(timm_model(x, training=False), want, rtol=0, atol=1e-6)
    card = registry.card_of(timm_model)
    self.assertEqual((card.train_size, card.test_crop, card.resize_method),
                     (240, 0.882, "bicubic"))
    self.assertEqual((card.mean, card.std), ((0.5,) * 3, (0.5,) * 3))
    self.assertEqual(card.block_pattern, efficientnet_lite.BLOCKS)


if __name__ == "__main__":
  tf.test.main()
