"""EfficientNet-Lite0/1/2 with Google's weights against the PyTorch reference's own
forward pass (efficientnet-lite-pytorch 0.1.0, in the torch peer's Python:
ZOO_TORCH_PYTHON, tests/torch_python.py; skipped in one line without it).

On the same file, at the card's resolution and at an odd, non-square 131 x 157, on
scikit-learn's two photos and two random inputs, the zoo model's logits must equal
the reference's within RTOL = 1e-5 of the largest logit (both float32; measured 1e-6).
Padding as PyTorch does (symmetric) where TensorFlow's SAME pads one pixel more after
moves them by 0.45 of it (Lite0, 224 pixels). The reference pads for the size it is given
(tests/zoo/efficientnet_lite_reference.py). Also: the file rewritten by torch under
timm's names as model.safetensors loads through zoo/timm_checkpoint.py to the .pth
path's logits, and zoo/safe_pickle.py reads what torch reads, both ways.
"""

import json
import os
import subprocess

from absl.testing import parameterized
import numpy as np
import tensorflow as tf

from tests import torch_python
from tests.zoo import efficientnet_lite_reference as reference
from tests.zoo import pickles
from zoo import efficientnet_lite_checkpoint as checkpoint
from zoo import registry
from zoo import safe_pickle

RTOL = 1e-5
ODD = (131, 157)

# In torch: the state dict at argv[1] renamed by the JSON map argv[2], saved as timm
# saves model.safetensors (argv[3]).
_TO_SAFETENSORS = """
import json, sys
import torch
from safetensors.torch import save_file
state = torch.load(sys.argv[1], weights_only=True)
names = json.load(open(sys.argv[2]))
save_file({names[k]: v.contiguous() for k, v in state.items()}, sys.argv[3],
          metadata={"format": "pt"})
"""

# In torch: views of shared storages saved in the legacy format to argv[2], their
# values to argv[3]; our writer's file argv[1] and Google's argv[4] loaded, their
# values to argv[5] and argv[6] (.npz).
_BOTH_WAYS = """
import sys
import numpy as np
import torch
ours = torch.load(sys.argv[1], weights_only=True)
np.savez(sys.argv[5], **{k: v.numpy() for k, v in ours.items()})
base = torch.arange(24, dtype=torch.float32)
state = {"t": base.view(4, 6).t(), "slice": base[5:17].view(3, 4)[:, 1:3],
         "scalar": torch.tensor(3, dtype=torch.int64), "half": base.half()[:5],
         "flag": torch.tensor([True, False]), "double": base.double().view(2, 12)[1]}
torch.save(state, sys.argv[2], _use_new_zipfile_serialization=False)
np.savez(sys.argv[3], **{k: v.numpy() for k, v in state.items()})
real = torch.load(sys.argv[4], weights_only=True)
np.savez(sys.argv[6], **{k: v.numpy() for k, v in real.items()})
"""


class ReferenceTest(tf.test.TestCase, parameterized.TestCase):

  def setUp(self):
    super().setUp()
    torch_python.skip_unless_available(self)
    self.python = torch_python.interpreter()

  def torch(self, script, *args):
    done = subprocess.run([self.python, "-c", script, *args], capture_output=True,
                          text=True, timeout=240, check=False)
    self.assertEqual(done.returncode, 0, done.stderr[-2000:])

  @parameterized.parameters("lite0", "lite1", "lite2")
  def test_logits_equal_the_references(self, variant):
    card = registry.card(f"efficientnet_{variant}")
    sizes = [(card.train_size, card.train_size), ODD]
    batches = [np.concatenate([reference.photos(*size), reference.random_images(*size)])
               for size in sizes]
    wants = reference.reference_logits(self.python, variant,
                                       checkpoint.packaged_file(variant), batches)
    for size, images, want in zip(sizes, batches, wants):
      model = registry.build(f"efficientnet_{variant}", weights="imagenet",
                             input_shape=(*size, 3))
      got = model(images, training=False).numpy()
      scale = np.abs(want).max()
      self.assertAllClose(got, want, rtol=0, atol=RTOL * scale, msg=f"{variant} {size}")
      self.assertAllEqual(got.argmax(1), want.argmax(1))
    self.assertEqual(wants[0][:2].argmax(1).tolist(),
                     [698, 985 if variant == "lite0" else 599])

  def test_timm_safetensors_written_by_torch_load_to_the_same_logits(self):
    variant = "lite2"
    folder = self.create_tempdir().full_path
    pth = checkpoint.packaged_file(variant)
    names = {k: reference.timm_key(k, variant)
             for k in safe_pickle.read_torch_legacy(pth)}
    with open(os.path.join(folder, "names.json"), "w", encoding="utf-8") as f:
      json.dump(names, f)
    path = os.path.join(folder, "model.safetensors")
    self.torch(_TO_SAFETENSORS, pth, os.path.join(folder, "names.json"), path)
    with open(os.path.join(folder, "config.json"), "w", encoding="utf-8") as f:
      json.dump(reference.load_fixtures(reference.TIMM)["tf_efficientnet_lite2"]
                ["config"], f)
    x = reference.random_images(*ODD)
    want = registry.build("efficientnet_lite2", weights="imagenet",
                          input_shape=(*ODD, 3))(x, training=False).numpy()
    got = registry.build("efficientnet_lite2", weights=path, input_shape=(*ODD, 3))(
        x, training=False).numpy()
    self.assertAllClose(got, want, rtol=0, atol=1e-6)

  def test_torch_and_safe_pickle_read_each_others_files(self):
    folder = self.create_tempdir().full_path
    rng = np.random.default_rng(3)
    ours = {"w": rng.normal(size=(3, 2, 3, 3)).astype(np.float32),
            "count": np.array(9, np.int64), "h": rng.normal(size=4).astype(np.float16)}
    path = os.path.join(folder, "ours.pth")
    with open(path, "wb") as f:
      f.write(pickles.torch_legacy(ours))
    files = [os.path.join(folder, n) for n in ("torch.pth", "torch.npz", "ours.npz",
                                               "real.npz")]
    real = checkpoint.packaged_file("lite0")
    self.torch(_BOTH_WAYS, path, files[0], files[1], real, files[2], files[3])
    with np.load(files[2]) as loaded:  # torch read our writer's file
      for name, value in ours.items():
        self.assertAllEqual(loaded[name], value)
        self.assertEqual(loaded[name].shape, value.shape)
    got = safe_pickle.read_torch_legacy(files[0])  # we read torch's views
    with np.load(files[1]) as want:
      self.assertEqual(sorted(got), sorted(want.files))
      for name in want.files:
        self.assertEqual(got[name].dtype, want[name].dtype, name)
        self.assertAllEqual(got[name], want[name])
    got = safe_pickle.read_torch_legacy(real)  # and Google's file alike
    with np.load(files[3]) as want:
      self.assertEqual(list(got), list(want.files))
      for name in want.files:
        self.assertAllEqual(got[name], want[name])


if __name__ == "__main__":
  tf.test.main()
