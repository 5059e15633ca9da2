"""torchvision's own RandomResizedCrop.get_params, run by a Python with torch and
torchvision (ZOO_TORCH_PYTHON) for torchvision_crop_test.py.

    python torchvision_get_params.py < request.json > boxes.json

The request: {"injected": [case, ...], "sampled": [case, ...]}, each case
{"height", "width", "scale", "ratio"} plus, injected, the draws "fractions" and
"log_ratios" (what get_params' `torch.empty(1).uniform_(...)` calls return, in their
order: area, log ratio, area, ...) and "offsets" (u in [0, 1) for its two
`torch.randint(0, n)` calls: floor(u n)), or, sampled, "n" and "seed": n boxes drawn
by torchvision with its own generator (`torch.manual_seed(seed)`). Prints
{"injected": [[i, j, h, w], ...], "sampled": [[[i, j, h, w], ...], ...], "torchvision":
version}.
"""

import json
import math
import subprocess
import sys
from unittest import mock

import torch  # pylint: disable=import-error


def _declare_missing_ops():
  """As benchmarks/peer_torchvision.py: a torchvision wheel built against a CUDA torch
  fails to import under a CPU-only torch for want of `torchvision::nms`; get_params
  needs none of its C++ ops, so declare the two its import registers."""
  if subprocess.run([sys.executable, "-c", "import torchvision"], stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL, check=False).returncode == 0:
    return
  lib = torch.library.Library("torchvision", "DEF")  # pylint: disable=no-member
  lib.define("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
  lib.define("qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
  _declare_missing_ops.keep = lib


_declare_missing_ops()
import torchvision  # pylint: disable=import-error,wrong-import-position
from torchvision import transforms  # pylint: disable=import-error,wrong-import-position


def injected_box(case):
  """get_params with its uniform draws replaced by the case's."""
  image = torch.zeros(3, case["height"], case["width"])
  uniforms = [v for pair in zip(case["fractions"], case["log_ratios"]) for v in pair]
  offsets = list(case["offsets"])
  real_empty = torch.empty

  class Draw:
    def uniform_(self, low, high):  # within the bounds, to float32 rounding
      value = uniforms.pop(0)
      assert float(low) - 1e-6 <= value <= float(high) + 1e-6, (low, value, high)
      return torch.tensor([value], dtype=torch.float32)

  def empty(*size, **kwargs):
    return Draw() if size == (1,) and not kwargs else real_empty(*size, **kwargs)

  def randint(low, high, size):
    assert low == 0 and tuple(size) == (1,), (low, size)
    return torch.tensor([math.floor(offsets.pop(0) * high)])

  with mock.patch.object(torch, "empty", empty), mock.patch.object(torch, "randint", randint):
    return list(transforms.RandomResizedCrop.get_params(image, case["scale"], case["ratio"]))


def sampled_boxes(case):
  torch.manual_seed(case["seed"])
  image = torch.zeros(3, case["height"], case["width"])
  return [list(transforms.RandomResizedCrop.get_params(image, case["scale"], case["ratio"]))
          for _ in range(case["n"])]


def main():
  request = json.load(sys.stdin)
  json.dump({"injected": [injected_box(c) for c in request.get("injected", [])],
             "sampled": [sampled_boxes(c) for c in request.get("sampled", [])],
             "torchvision": torchvision.__version__}, sys.stdout)


if __name__ == "__main__":
  main()
