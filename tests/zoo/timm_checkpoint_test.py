"""timm checkpoints into zoo models, against timm's own forward pass.

For each architecture of tests/zoo/timm_fixtures.FORWARD, weights drawn
deterministically in NumPy from timm's state_dict manifest are written as a real
model.safetensors (safetensors' NumPy API) with the hub's config.json beside it, and
loaded by `zoo.build(weights=...)`. The zoo model's logits must equal timm's (recorded by
tests/zoo/data/make_timm_fixtures.py with timm 1.0.29 and torch 2.14.1, in float64)
within float32 rounding: |zoo - timm| <= RTOL * max |timm logit|, RTOL = 1e-5, about 80
float32 epsilons and 8 to 17 times timm's own float32 pass's error (recorded with the
fixtures: 0.6 to 1.2e-6 of the largest logit), through 50 to 100 layers summed in
another order. A convention the layout got wrong (BatchNorm epsilon, padding before a
strided convolution, a pool counting its padding, tanh for erf GELU, DeepMind's
weight-standardisation epsilon) moves them by 1e-4 or more of the largest logit.

The larger variants (resnext101_32x8d, dm_nfnet_f1 ... f6) are checked by their
tensors' names and shapes against timm's manifests, from the zoo's weight lists by
formula (`resnext.weight_shapes`, `nfnet.weight_shapes`, each equal to its built model
in //tests/zoo:resnext_test and :nfnet_test, and to ResNeXt-50's and NFNet-F0's here);
their layers are those whose numbers the smaller ones check.
"""

import json
import os
import re

from absl.testing import parameterized
import numpy as np
from safetensors.numpy import save_file
import tensorflow as tf

from tests.zoo import timm_fixtures
from zoo import nfnet
from zoo import registry
from zoo import resnext
from zoo import timm_checkpoint

RTOL = 1e-5
ZOO_NAME = {"resnet50": "resnet50_v1_5", "resnext50_32x4d": "resnext50_32x4d",
            "resnext101_32x8d": "resnext101_32x8d", "inception_v3": "inception_v3",
            **{f"dm_nfnet_f{i}": f"nfnet_f{i}" for i in range(7)}}
MANIFESTS = timm_fixtures.load(timm_fixtures.MANIFESTS)
LOGITS = timm_fixtures.load(timm_fixtures.LOGITS)
CONFIGS = timm_fixtures.load(timm_fixtures.CONFIGS)


def write_checkpoint(folder, arch, weights, config=None):
  """model.safetensors (as timm's save_file: metadata format=pt) and the hub's
  config.json of `arch`'s fixture tag in `folder`; the weights' path."""
  os.makedirs(folder, exist_ok=True)
  path = os.path.join(folder, "model.safetensors")
  save_file(weights, path, metadata={"format": "pt"})
  with open(os.path.join(folder, "config.json"), "w", encoding="utf-8") as f:
    json.dump(config or CONFIGS[arch], f)
  return path


class TimmForwardTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.parameters(*timm_fixtures.FORWARD)
  def test_logits_equal_timms(self, arch):
    zoo_name = ZOO_NAME[arch]
    record = LOGITS[arch]
    weights = timm_fixtures.state(MANIFESTS[arch]["tensors"])
    self.assertEqual(timm_fixtures.digest(weights), record["digest"])  # timm's weights
    path = write_checkpoint(self.create_tempdir().full_path, arch, weights)
    classes = timm_fixtures.FORWARD[arch]["classes"]
    model = registry.build(zoo_name, num_classes=classes,
                           input_shape=(*record["image"], 3), weights=path)
    got = model(timm_fixtures.images(arch), training=False).numpy()
    want = np.array(record["logits"])
    scale = np.abs(want).max()
    self.assertLess(record["float32_error"], RTOL * scale / 5)  # timm's own rounding
    self.assertAllClose(got, want, rtol=0, atol=RTOL * scale)
    self.assertGreater(want.std(axis=1).min(), 0.05 * scale)  # logits that differ

    # Every zoo weight holds its timm tensor, transposed (one of each kind).
    tensors = timm_checkpoint.expected_tensors(model, zoo_name)
    self.assertLen(tensors, len(model.weights))
    for key, (variable, layout, _) in tensors.items():
      if layout != "same" or key.endswith("running_var"):
        self.assertAllEqual(variable, timm_checkpoint.LAYOUTS[layout][1](weights[key]))

    # The card is the checkpoint's timm configuration.
    cfg = CONFIGS[arch]["pretrained_cfg"]
    card = registry.card_of(model)
    self.assertEqual(card.mean, tuple(cfg["mean"]))
    self.assertEqual(card.std, tuple(cfg["std"]))
    self.assertEqual(card.train_size, cfg["input_size"][1])
    self.assertEqual(card.test_size, cfg.get("test_input_size", cfg["input_size"])[1])
    self.assertEqual(card.resize_method, cfg["interpolation"])
    self.assertEqual(card.test_crop, cfg.get("test_crop_pct") or cfg["crop_pct"])
    self.assertIsNone(card.test_crop_padding)
    self.assertTrue(any(re.match(card.block_pattern, layer.name) for layer in model.layers))
    # The weight lists by formula (the larger variants' test) are exact.
    built = {re.sub(r":\d+$", "", w.name): tuple(w.shape) for w in model.weights}
    if arch == "dm_nfnet_f0":
      self.assertEqual(nfnet.weight_shapes("F0", classes), built)
    elif arch != "inception_v3":
      self.assertEqual(resnext.weight_shapes(arch, classes), built)


class TimmFilesTest(tf.test.TestCase):
  """Files that do not fit, or are not timm's: one TimmError line each, saying why."""

  ARCH = "resnet50"  # the cheapest architecture to build (resnet50_v1_5)

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.weights = timm_fixtures.state(MANIFESTS[cls.ARCH]["tensors"])

  def build(self, path, classes=7, **kwargs):
    return registry.build("resnet50_v1_5", num_classes=classes, input_shape=(32, 32, 3),
                          weights=path, **kwargs)

  def checkpoint(self, weights=None, config=None):
    return write_checkpoint(self.create_tempdir().full_path, self.ARCH,
                            self.weights if weights is None else weights, config)

  def assertFails(self, pattern, path, **kwargs):
    with self.assertRaisesRegex(timm_checkpoint.TimmError, pattern) as caught:
      self.build(path, **kwargs)
    # One line (Gin adds its own "In call to configurable" line after it).
    self.assertNotIn("\n", str(caught.exception).split("\n  In call to configurable")[0])

  def test_head_of_another_class_count_is_replaced(self):
    model = self.build(self.checkpoint(), classes=5, dropout=0.25)
    self.assertEqual(model.get_layer("logits").kernel.shape, (2048, 5))
    self.assertEqual(model.get_layer("dropout").rate, 0.25)  # zoo.build's keywords
    self.assertAllEqual(model.get_layer("stage4/block2/3_bn").moving_variance,
                        self.weights["layer4.2.bn3.running_var"])
    self.assertAllEqual(model.get_layer("stem/conv").kernel,
                        self.weights["conv1.weight"].transpose(2, 3, 1, 0))

  def test_unused_and_missing_tensors_are_named(self):
    weights = dict(self.weights)
    del weights["layer3.2.conv2.weight"]
    weights["layer5.0.conv1.weight"] = np.zeros((4, 4, 1, 1), np.float32)
    self.assertFails(
        r"does not fit zoo model resnet50_v1_5 \(timm's resnet50\): 1 tensors of the "
        r"file have no place in it \(layer5.0.conv1.weight\); 1 of its weights are not "
        r"in the file \(layer3.2.conv2.weight\); it is a checkpoint of another "
        "architecture", self.checkpoint(weights))

  def test_a_checkpoint_of_another_architecture(self):
    # dm_nfnet_f0's first tensors, under a config.json that claims resnet50.
    nfnet_tensors = {k: timm_fixtures.tensor(k, d, s)
                     for k, d, s in MANIFESTS["dm_nfnet_f0"]["tensors"][:12]}
    self.assertFails(r"12 tensors of the file have no place in it \(stem.conv1.bias, "
                     r"stem.conv1.gain, stem.conv1.weight, ... \(12 in all\)\); 267 of "
                     r"its weights are not in the file \(bn1.beta|bn1.bias",
                     self.checkpoint(nfnet_tensors))
    # resnext50_32x4d's file has resnet50's names, other shapes.
    other = {k: timm_fixtures.tensor(k, d, s)
             for k, d, s in MANIFESTS["resnext50_32x4d"]["tensors"]}
    self.assertFails(r"layer1.0.bn1.bias has shape \(128,\), but zoo model resnet50_v1_5 "
                     r"needs \(64,\)", self.checkpoint(other))

  def test_a_file_with_non_finite_weights_is_refused(self):
    """Issue 56: NaN or infinite weights load without complaint and would train into
    divergence (exit 3) after writing a run; zoo.build refuses them, naming one."""
    weights = dict(self.weights)
    bad = weights["layer2.1.conv2.weight"].copy()
    bad[0, 0, 1, 1] = np.nan
    weights["layer2.1.conv2.weight"] = bad
    with self.assertRaisesRegex(ValueError, r"weights=.*model.safetensors': the loaded "
                                r"weights hold NaN or infinite values \(first in "
                                r"stage2/block1/2_conv/kernel"):
      self.build(self.checkpoint(weights))
    weights["layer2.1.conv2.weight"] = np.where(np.isnan(bad), np.inf, bad)
    with self.assertRaisesRegex(ValueError, "NaN or infinite"):
      self.build(self.checkpoint(weights))

  def test_a_tensor_of_another_dtype(self):
    weights = dict(self.weights, **{"fc.bias": self.weights["fc.bias"].astype(np.float16)})
    self.assertFails("fc.bias is F16, not float32", self.checkpoint(weights))

  def test_truncated_and_foreign_files(self):
    path = self.checkpoint()
    with open(path, "rb") as f:
      data = f.read()
    for cut in (len(data) // 2, 40):
      with open(path, "wb") as f:
        f.write(data[:cut])
      self.assertFails("model.safetensors is truncated: its safetensors header describes "
                       f"more than the file's {cut} bytes", path)
    for foreign in (b"PK\x03\x04 a PyTorch .pth is a zip" * 40, b"", b"hello\n"):
      with open(path, "wb") as f:
        f.write(foreign)
      self.assertFails("model.safetensors is not a safetensors file .*not a PyTorch .pth",
                       path)
    self.assertFails("weights file .*/nothing.safetensors does not exist",
                     os.path.join(os.path.dirname(path), "nothing.safetensors"))

  def test_config_json(self):
    path = self.checkpoint()
    folder = os.path.dirname(path)
    os.remove(os.path.join(folder, "config.json"))
    self.assertFails("no config.json beside .*model.safetensors: .*hf download "
                     "timm/resnet50.<tag> model.safetensors config.json", path)
    for text, pattern in (
        ("{not json", "config.json is not readable JSON"),
        ('{"architecture": "resnet50"}', "config.json has no pretrained_cfg"),
        (json.dumps(dict(CONFIGS["resnext50_32x4d"])),
         "config.json describes timm's 'resnext50_32x4d', but zoo model resnet50_v1_5 "
         "takes timm's resnet50 checkpoints"),
        (json.dumps({**CONFIGS["resnet50"], "pretrained_cfg": {
            **CONFIGS["resnet50"]["pretrained_cfg"], "input_size": [3, 224, 192]}}),
         r"pretrained_cfg.input_size=\[3, 224, 192\] is not \(3, S, S\)"),
        (json.dumps({**CONFIGS["resnet50"], "pretrained_cfg": {
            **CONFIGS["resnet50"]["pretrained_cfg"], "interpolation": "nearest"}}),
         "pretrained_cfg does not make a model card .*resize_method='nearest'")):
      with open(os.path.join(folder, "config.json"), "w", encoding="utf-8") as f:
        f.write(text)
      self.assertFails(pattern, path)

  def test_nfnet_keeps_timms_activation_and_standardisation(self):
    folder = self.create_tempdir().full_path
    path = write_checkpoint(folder, "dm_nfnet_f0", {"x": np.zeros(1, np.float32)})
    with self.assertRaisesRegex(timm_checkpoint.TimmError,
                                "timm's dm_nfnet_f0 is built with .*'gelu_exact'.*; drop "
                                r"\{'activation': 'relu'\}"):
      registry.build("nfnet_f0", num_classes=7, weights=path, activation="relu")

  def test_pinned_digest_and_models_without_timm_layouts(self):
    path = self.checkpoint()
    self.assertFails("has SHA-256 .* not the expected 000", path, weights_sha256="0" * 64)
    with self.assertRaisesRegex(timm_checkpoint.TimmError,
                                "zoo model resnet50 takes no timm checkpoint; .*"
                                r"resnet50_v1_5 \(resnet50\)"):
      registry.build("resnet50", num_classes=7, weights=path)
    self.assertFalse(timm_checkpoint.is_timm_weights(None))
    self.assertTrue(timm_checkpoint.is_timm_weights("/m/MODEL.SafeTensors"))


class TimmNamesTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.parameters(*(a for a in timm_fixtures.NAMES_ONLY if "nfnet" in a))
  def test_nfnet_tensors_are_timms(self, arch):
    zoo_name = ZOO_NAME[arch]
    manifest = MANIFESTS[arch]
    want = {key: tuple(shape) for key, _, shape in manifest["tensors"]}
    got = {}
    shapes = nfnet.weight_shapes(zoo_name.split("_")[1].upper(), manifest["classes"])
    for name, shape in shapes.items():
      layer, weight = name.rsplit("/", 1)
      key, layout = timm_checkpoint.timm_name(zoo_name, layer, weight, shape)
      got[key] = timm_checkpoint.LAYOUTS[layout][0](shape)
    self.assertEqual(got, want)

  def test_resnext101_tensors_are_timms(self):
    arch = "resnext101_32x8d"
    manifest = MANIFESTS[arch]
    got = {}
    for name, shape in resnext.weight_shapes(arch, manifest["classes"]).items():
      layer, weight = name.rsplit("/", 1)
      key, layout = timm_checkpoint.timm_name(arch, layer, weight, shape)
      got[key] = timm_checkpoint.LAYOUTS[layout][0](shape)
    want = {key: tuple(shape) for key, dtype, shape in manifest["tensors"]
            if dtype == "float32"}
    self.assertEqual(got, want)
    self.assertTrue(all(k.endswith(".num_batches_tracked") for k, d, _ in
                        manifest["tensors"] if d != "float32"))


if __name__ == "__main__":
  tf.test.main()
