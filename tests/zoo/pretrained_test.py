"""Pretrained weights: local files with SHA-256 pins, Keras's cache, clear failures."""

import os
from unittest import mock

import numpy as np
import tensorflow as tf
import tf_keras

from zoo import pretrained
from zoo import registry

SHAPE = (32, 32, 3)


class PretrainedTest(tf.test.TestCase):

  def notop_file(self):
    """A no-top ResNet-50 weights file, as Keras ships them, with random weights."""
    tf_keras.utils.set_random_seed(1)
    source = tf_keras.applications.ResNet50(include_top=False, weights=None,
                                            input_shape=SHAPE, pooling="avg")
    path = os.path.join(self.get_temp_dir(), "resnet50_notop.h5")
    source.save_weights(path)
    return source, path

  def test_local_file_is_loaded_and_pinned(self):
    source, path = self.notop_file()
    digest = pretrained.sha256_of(path)
    model = registry.build("resnet50", num_classes=3, input_shape=SHAPE, weights=path,
                           weights_sha256=digest)
    for name in ("conv1_conv", "conv3_block2_2_conv", "conv5_block3_3_bn"):
      for got, want in zip(model.get_layer(name).weights, source.get_layer(name).weights):
        self.assertAllEqual(got, want)
    # The head is new: 2048 -> 3.
    self.assertEqual(model.get_layer("logits").kernel.shape, (2048, 3))

  def test_wrong_sha256_is_refused(self):
    _, path = self.notop_file()
    with self.assertRaisesRegex(pretrained.WeightsError, "has SHA-256 .* not the expected"):
      registry.build("resnet50", num_classes=3, input_shape=SHAPE, weights=path,
                     weights_sha256="0" * 64)

  def test_truncated_file_is_refused(self):
    _, path = self.notop_file()
    with open(path, "rb") as f:
      head = f.read(4096)
    cut = os.path.join(self.get_temp_dir(), "cut.h5")
    with open(cut, "wb") as f:
      f.write(head)
    with self.assertRaisesRegex(pretrained.WeightsError, "not a readable HDF5"):
      registry.build("resnet50", num_classes=3, input_shape=SHAPE, weights=cut)

  def test_weights_of_another_model_are_refused(self):
    other = tf_keras.Sequential([tf_keras.Input((4,)), tf_keras.layers.Dense(2)])
    path = os.path.join(self.get_temp_dir(), "other.h5")
    other.save_weights(path)
    with self.assertRaisesRegex(pretrained.WeightsError, "do not fit"):
      registry.build("resnet50", num_classes=3, input_shape=SHAPE, weights=path)

  def test_missing_file_is_refused(self):
    with self.assertRaisesRegex(pretrained.WeightsError, "does not exist"):
      registry.build("resnet50", num_classes=3, input_shape=SHAPE,
                     weights="/nonexistent/w.h5")

  def test_imagenet_offline_without_a_copy(self):
    cache = os.path.join(self.get_temp_dir(), "keras_cache")
    with mock.patch.object(pretrained.data_utils, "get_file",
                           side_effect=Exception("URL fetch failure")):
      with self.assertRaisesRegex(
          pretrained.WeightsError,
          "not at .*keras_cache/models/resnet50_weights_tf_dim_ordering_tf_kernels_notop.h5"
          ".*copy that file"):
        registry.build("resnet50", num_classes=3, input_shape=SHAPE, weights="imagenet",
                       cache_dir=cache)

  def test_imagenet_goes_through_keras_get_file_with_the_cache_dir(self):
    source, path = self.notop_file()
    with mock.patch.object(pretrained.data_utils, "get_file",
                           return_value=path) as get_file:
      model = registry.build("resnet50", num_classes=3, input_shape=SHAPE,
                             weights="imagenet", cache_dir="/tmp/my_cache")
    name, origin = get_file.call_args.args
    self.assertEqual(name, "resnet50_weights_tf_dim_ordering_tf_kernels_notop.h5")
    self.assertTrue(origin.startswith("https://"))
    self.assertEqual(get_file.call_args.kwargs["cache_dir"], "/tmp/my_cache")
    self.assertLen(get_file.call_args.kwargs["file_hash"], 32)  # Keras's MD5
    self.assertAllEqual(model.get_layer("conv1_conv").kernel,
                        source.get_layer("conv1_conv").kernel)

  def test_nfnet_takes_deepmind_weights_with_a_new_head(self):
    model = registry.build("nfnet_nano", num_classes=4, input_shape=SHAPE)
    params = {}
    for weight in model.weights:  # a DeepMind-named file of this architecture
      name = weight.name.split(":")[0]
      if name.startswith("logits/"):
        continue
      params[name] = weight.numpy() + 1.0
    renamed = {}
    for key in nfnet_checkpoint_keys(params):
      renamed[key[0]] = params[key[1]]
    renamed["NFNet/~/linear/w"] = np.zeros((model.get_layer("logits").kernel.shape[0], 1000),
                                            np.float32)
    renamed["NFNet/~/linear/b"] = np.zeros(1000, np.float32)
    path = os.path.join(self.get_temp_dir(), "F0.npz")
    np.savez(path, **renamed)
    loaded = registry.build("nfnet_nano", num_classes=4, input_shape=SHAPE, weights=path,
                            weights_sha256=pretrained.sha256_of(path))
    self.assertAllEqual(loaded.get_layer("final_conv").kernel,
                        params["final_conv/kernel"])
    self.assertEqual(loaded.get_layer("logits").kernel.shape[1], 4)


def nfnet_checkpoint_keys(params):
  """(DeepMind key, zoo name) for zoo names of a headless NFNet."""
  out = []
  for name in params:
    parts = name.split("/")
    param = {"kernel": "w", "bias": "b", "gain": "gain", "skip_gain": "skip_gain"}[parts[-1]]
    modules = parts[:-1]
    if param == "skip_gain":
      out.append((f"NFNet/~/{modules[0]}/skip_gain", name))
      continue
    if len(modules) == 3:
      modules[2] = {"fc0": "linear", "fc1": "linear_1"}[modules[2]]
    out.append(("NFNet/~/" + "/~/".join(modules) + "/" + param, name))
  return out


if __name__ == "__main__":
  tf.test.main()
