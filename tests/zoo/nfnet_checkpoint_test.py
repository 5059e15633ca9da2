"""DeepMind NFNet parameters into the Keras NFNet: every tensor in its layer, exactly."""

import os
import pickle

import numpy as np
import tensorflow as tf

from zoo import nfnet
from zoo import nfnet_checkpoint

SHAPE = (32, 32, 3)


def deepmind_params(variant, classes, seed=0):
  """Random parameters laid out as DeepMind's nfnets/base.py names and shapes them,
  written from the architecture (widths, group size, SE ratio 0.5) alone."""
  spec = nfnet.VARIANTS[variant]
  rng = np.random.default_rng(seed)
  params = {}

  def conv(module, k, cin, cout):
    params[f"NFNet/~/{module}/w"] = rng.normal(size=(k, k, cin, cout)).astype(np.float32)
    params[f"NFNet/~/{module}/b"] = rng.normal(size=(cout,)).astype(np.float32)
    params[f"NFNet/~/{module}/gain"] = rng.uniform(0.5, 2, size=(cout,)).astype(np.float32)

  stem = list(spec.stem_widths) + [spec.widths[0] // 2]
  cin = 3
  for i, cout in enumerate(stem):
    conv(f"stem_conv{i}", 3, cin, cout)
    cin = cout
  block = 0
  for stage, (width, depth) in enumerate(zip(spec.widths, spec.depths)):
    for j in range(depth):
      mid = width // 2
      groups = mid // spec.group_size
      b = f"nf_block_{block}/~/"
      conv(b + "conv0", 1, cin, mid)
      conv(b + "conv1", 3, mid // groups, mid)
      conv(b + "conv1b", 3, mid // groups, mid)
      conv(b + "conv2", 1, mid, width)
      hidden = width // 2  # SE ratio 0.5 of the block's output
      for name, (i, o) in (("linear", (width, hidden)), ("linear_1", (hidden, width))):
        params[f"NFNet/~/{b}squeeze_excite/~/{name}/w"] = rng.normal(size=(i, o)).astype(
            np.float32)
        params[f"NFNet/~/{b}squeeze_excite/~/{name}/b"] = rng.normal(size=(o,)).astype(
            np.float32)
      params[f"NFNet/~/nf_block_{block}/skip_gain"] = np.float32(rng.normal())
      if j == 0:
        conv(b + "conv_shortcut", 1, cin, width)
      cin = width
      block += 1
  final = 2 * spec.widths[-1]
  conv("final_conv", 1, cin, final)
  params["NFNet/~/linear/w"] = rng.normal(size=(final, classes)).astype(np.float32)
  params["NFNet/~/linear/b"] = rng.normal(size=(classes,)).astype(np.float32)
  return params


class NfnetCheckpointTest(tf.test.TestCase):

  def write(self, params, name="dm.npz"):
    path = os.path.join(self.get_temp_dir(), name)
    np.savez(path, **params)
    return path

  def test_every_tensor_lands_in_its_layer(self):
    params = deepmind_params("nano", classes=7)
    model = nfnet.nfnet("nano", num_classes=7, input_shape=SHAPE)
    nfnet_checkpoint.load_deepmind_weights(model, self.write(params))
    self.assertLen(params, len(model.weights))
    get = model.get_layer
    self.assertAllEqual(get("stem_conv0").kernel, params["NFNet/~/stem_conv0/w"])  # HWIO
    self.assertAllEqual(get("stem_conv3").gain, params["NFNet/~/stem_conv3/gain"])
    self.assertAllEqual(get("nf_block_2/conv1b").kernel,
                        params["NFNet/~/nf_block_2/~/conv1b/w"])
    self.assertAllEqual(get("nf_block_2/conv1b").bias, params["NFNet/~/nf_block_2/~/conv1b/b"])
    self.assertAllEqual(get("nf_block_1/conv_shortcut").kernel,
                        params["NFNet/~/nf_block_1/~/conv_shortcut/w"])
    self.assertAllEqual(get("nf_block_3/squeeze_excite/fc0").kernel,
                        params["NFNet/~/nf_block_3/~/squeeze_excite/~/linear/w"])
    self.assertAllEqual(get("nf_block_3/squeeze_excite/fc1").bias,
                        params["NFNet/~/nf_block_3/~/squeeze_excite/~/linear_1/b"])
    self.assertAllEqual(get("nf_block_0/skip_gain").weights[0],
                        params["NFNet/~/nf_block_0/skip_gain"])
    self.assertAllEqual(get("final_conv").gain, params["NFNet/~/final_conv/gain"])
    self.assertAllEqual(get("logits").kernel, params["NFNet/~/linear/w"])
    self.assertAllEqual(get("logits").bias, params["NFNet/~/linear/b"])
    x = tf.random.stateless_normal((2, *SHAPE), seed=[0, 1])
    self.assertTrue(np.all(np.isfinite(model(x).numpy())))

  def test_save_npz_writes_deepmind_keys_that_load_back(self):
    params = deepmind_params("nano", classes=7, seed=3)
    model = nfnet.nfnet("nano", num_classes=7, input_shape=SHAPE)
    nfnet_checkpoint.load_deepmind_weights(model, self.write(params))
    path = os.path.join(self.get_temp_dir(), "saved.npz")
    nfnet_checkpoint.save_npz(model, path)
    with np.load(path, allow_pickle=False) as saved:  # DeepMind's names and values
      self.assertCountEqual(saved.files, params)
      for key, value in params.items():
        self.assertAllEqual(saved[key], value, msg=key)
    again = nfnet.nfnet("nano", num_classes=7, input_shape=SHAPE)
    nfnet_checkpoint.load_deepmind_weights(again, path)
    x = tf.random.stateless_normal((2, *SHAPE), seed=[0, 2])
    self.assertAllEqual(again(x), model(x))
    nfnet_checkpoint.save_npz(model, path, head=False)
    with np.load(path, allow_pickle=False) as saved:
      self.assertNotIn("NFNet/~/linear/w", saved.files)
      self.assertLen(saved.files, len(params) - 2)
    self.assertEqual(os.listdir(self.get_temp_dir()).count("saved.npz.tmp.npz"), 0)
    with self.assertRaisesRegex(nfnet_checkpoint.ConversionError, "not an NFNet weight"):
      nfnet_checkpoint.deepmind_key("bn/moving_mean:0")

  def test_backbone_only_for_a_new_head(self):
    params = deepmind_params("nano", classes=1000)
    model = nfnet.nfnet("nano", num_classes=5, input_shape=SHAPE)
    head = model.get_layer("logits").kernel.numpy()
    nfnet_checkpoint.load_deepmind_weights(model, self.write(params), head=False)
    self.assertAllEqual(model.get_layer("logits").kernel, head)
    self.assertAllEqual(model.get_layer("final_conv").kernel, params["NFNet/~/final_conv/w"])
    with self.assertRaisesRegex(nfnet_checkpoint.ConversionError, "class count"):
      nfnet_checkpoint.load_deepmind_weights(model, self.write(params), head=True)
    # By default their head is loaded only where its class count is the model's.
    fresh = nfnet.nfnet("nano", num_classes=5, input_shape=SHAPE)
    head = fresh.get_layer("logits").kernel.numpy()
    nfnet_checkpoint.load_deepmind_weights(fresh, self.write(params))
    self.assertAllEqual(fresh.get_layer("logits").kernel, head)
    self.assertAllEqual(fresh.get_layer("final_conv").kernel, params["NFNet/~/final_conv/w"])

  def test_bad_files(self):
    model = nfnet.nfnet("nano", num_classes=7, input_shape=SHAPE)
    params = deepmind_params("nano", classes=7)
    pickled = os.path.join(self.get_temp_dir(), "F0_haiku.npz")
    with open(pickled, "wb") as f:
      pickle.dump({"NFNet/~/linear": {"w": np.zeros(2)}}, f)
    with self.assertRaisesRegex(nfnet_checkpoint.ConversionError, "pickle, which is not"):
      nfnet_checkpoint.load_deepmind_weights(model, pickled)
    path = self.write(params)
    with open(path, "rb") as f:
      data = f.read()
    cut = os.path.join(self.get_temp_dir(), "cut.npz")
    with open(cut, "wb") as f:
      f.write(data[:len(data) // 2])
    with self.assertRaisesRegex(nfnet_checkpoint.ConversionError, "not an .npz|cannot be read"):
      nfnet_checkpoint.load_deepmind_weights(model, cut)
    del params["NFNet/~/nf_block_1/skip_gain"]
    with self.assertRaisesRegex(nfnet_checkpoint.ConversionError, "lacks 1 of"):
      nfnet_checkpoint.load_deepmind_weights(model, self.write(params, "partial.npz"))
    with self.assertRaisesRegex(nfnet_checkpoint.ConversionError, "not an NFNet parameter"):
      nfnet_checkpoint.keras_weight_name("ResNet/~/conv/w")


if __name__ == "__main__":
  tf.test.main()
