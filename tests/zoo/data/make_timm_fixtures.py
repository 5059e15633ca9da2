"""Records timm's side of tests/zoo/timm_checkpoint_test.py (run by hand, not by the
suite: it needs torch and timm, which the project does not lock).

    python3 -m venv /tmp/timmenv
    /tmp/timmenv/bin/pip install torch==2.14.1 torchvision==0.29.1 timm==1.0.29 \
        safetensors==0.8.0 numpy
    cd <repo root> && PYTHONPATH=. /tmp/timmenv/bin/python \
        tests/zoo/data/make_timm_fixtures.py

For each architecture it writes timm's state_dict manifest (keys, dtypes, shapes) to
data/timm_manifests.json.gz and, for those of timm_fixtures.FORWARD, loads the
deterministic weights of tests/zoo/timm_fixtures.py into timm's model (strict), and
records its eval-mode logits on timm_fixtures.images() in float64 (the reference)
and how far its own float32 pass is from them, to data/timm_logits.json; the
config.json timm writes to the hub for the fixture's tag, and every pretrained tag
of each architecture (docs/zoo.md lists them), to data/timm_configs.json.
"""

import gzip
import json
import pathlib
import sys
import tempfile

import numpy as np
import timm
import torch

from timm.models import _hub
from tests.zoo import timm_fixtures


def manifest(model):
  return [[k, str(v.dtype).removeprefix("torch."), list(v.shape)]
          for k, v in model.state_dict().items()]


def forward(model, images, dtype):
  model = model.to(dtype).eval()
  with torch.no_grad():
    x = torch.from_numpy(images.transpose(0, 3, 1, 2).copy()).to(dtype)
    return model(x).numpy().astype(np.float64)


def hub_config(model):
  """The config.json timm writes beside a model pushed to the Hugging Face hub."""
  with tempfile.TemporaryDirectory() as folder:
    path = pathlib.Path(folder) / "config.json"
    _hub.save_config_for_hf(model, path)
    return json.loads(path.read_text())


def main():
  torch.manual_seed(0)
  manifests, logits, configs = {}, {}, {"tags": {}}
  for arch in list(timm_fixtures.FORWARD) + list(timm_fixtures.NAMES_ONLY):
    configs["tags"][arch] = timm.list_pretrained(f"{arch}.*")
    spec = timm_fixtures.FORWARD.get(arch)
    classes = spec["classes"] if spec else 1000
    name = f"{arch}.{spec['tag']}" if spec else arch
    # Names and shapes only: on the meta device, no weights drawn.
    with torch.device("cpu" if spec else "meta"):
      model = timm.create_model(name, pretrained=False, num_classes=classes)
    tensors = manifest(model)
    manifests[arch] = {"classes": classes, "tensors": tensors}
    print(arch, len(tensors), "tensors", file=sys.stderr, flush=True)
    if not spec:
      continue
    configs[arch] = hub_config(model)
    weights = timm_fixtures.state(tensors)
    model.load_state_dict({k: torch.from_numpy(v) for k, v in weights.items()}, strict=True)
    images = timm_fixtures.images(arch)
    want = forward(model, images, torch.float64)
    got32 = forward(model, images, torch.float32)
    logits[arch] = {
        "image": list(timm_fixtures.FORWARD[arch]["image"]),
        "logits": want.tolist(),
        "float32_error": float(np.abs(got32 - want).max()),
        "digest": timm_fixtures.digest(weights),
    }
    print(arch, "max |logit|", np.abs(want).max(), "float32 error",
          logits[arch]["float32_error"], file=sys.stderr, flush=True)
  versions = {"timm": timm.__version__, "torch": torch.__version__}
  # mtime=0: the same manifests give the same bytes.
  with open(timm_fixtures.MANIFESTS, "wb") as raw, gzip.GzipFile(
      fileobj=raw, mode="wb", compresslevel=9, mtime=0) as f:
    f.write(json.dumps({"made_with": versions, **manifests}, separators=(",", ":"))
            .encode("utf-8"))
  with open(timm_fixtures.LOGITS, "w", encoding="utf-8") as f:
    json.dump({"made_with": versions, **logits}, f, indent=1)
  with open(timm_fixtures.CONFIGS, "w", encoding="utf-8") as f:
    json.dump({"made_with": versions, **configs}, f, indent=1)


if __name__ == "__main__":
  main()
