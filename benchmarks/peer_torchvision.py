"""The peer of //benchmarks:input: torchvision's ImageFolder + DataLoader, run by an
interpreter that has PyTorch and torchvision (not a project dependency:
`--torch_python` names it).

    python peer_torchvision.py ROOT BATCH [SIZE]

Prints "ready ...", then for each line "PIPELINE WORKERS BATCHES" read from stdin
builds `ImageFolder(ROOT)` with PIPELINE's transforms (PIL's decoder), a shuffling
`DataLoader` of WORKERS worker processes (each `torch.set_num_threads(1)`), takes one
untimed batch (worker start), then prints the seconds for the next BATCHES batches.
Between requests it waits on stdin, so its runs alternate with the project's.

Transforms as Kang et al. 2020's ImageNet-LT code (data/dataloader.py) and
torchvision's reference recipes, at SIZE (224 by default): train:
RandomResizedCrop(SIZE), RandomHorizontalFlip; train_randaugment: + RandAugment(2, 9);
train_kang: + ColorJitter(0.4, 0.4, 0.4); eval: Resize(round(SIZE / 0.875)) (256 at
224), CenterCrop(SIZE); then ToTensor, Normalize(ImageNet). The project's
rows it is set against draw their crops' boxes by the same sampler
(`InputPipeline.random_resized_crop_sampler = 'torchvision'`). Run by
tests/benchmarks/input_benchmark_test.py where ZOO_TORCH_PYTHON names a torch Python.
"""

import subprocess
import sys
import time

import torch  # pylint: disable=import-error


def _stub_missing_ops():
  """A torchvision wheel whose C++ ops were built against a CUDA torch fails to import
  under a CPU-only torch (its fake-tensor registrations need `torchvision::nms`); the
  data-loading code used here needs none of them, so declare the two it registers. A
  torchvision that imports as it is (tried in a child process) is left alone."""
  if subprocess.run([sys.executable, "-c", "import torchvision"], stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL, check=False).returncode == 0:
    return "ops"
  lib = torch.library.Library("torchvision", "DEF")  # pylint: disable=no-member
  lib.define("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
  lib.define("qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
  _stub_missing_ops.keep = lib
  return "no ops (CUDA-built wheel)"


OPS = _stub_missing_ops()
import torchvision  # pylint: disable=import-error,wrong-import-position
from torchvision import datasets  # pylint: disable=import-error,wrong-import-position
from torchvision import transforms as T  # pylint: disable=import-error,wrong-import-position

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def transform(name, size=224):
  if name == "eval":
    steps = [T.Resize(round(size / 0.875)), T.CenterCrop(size)]
  else:
    steps = [T.RandomResizedCrop(size), T.RandomHorizontalFlip()]
    if name == "train_randaugment":
      steps.append(T.RandAugment(num_ops=2, magnitude=9))
    elif name == "train_kang":
      steps.append(T.ColorJitter(0.4, 0.4, 0.4, 0))
  return T.Compose(steps + [T.ToTensor(), T.Normalize(MEAN, STD)])


def one_thread(_):
  torch.set_num_threads(1)


def seconds(root, batch, name, workers, batches, size=224):
  data = datasets.ImageFolder(root, transform=transform(name, size))
  loader = torch.utils.data.DataLoader(
      data, batch_size=batch, shuffle=True, num_workers=workers, drop_last=True,
      worker_init_fn=one_thread)
  iterator = iter(loader)
  next(iterator)
  start = time.perf_counter()
  for _ in range(batches):
    next(iterator)
  elapsed = time.perf_counter() - start
  del iterator  # stops the workers
  return elapsed


def main(root, batch, size=224):
  torch.set_num_threads(1)
  torch.manual_seed(0)
  print(f"ready torch {torch.__version__} torchvision {torchvision.__version__} "
        f"({OPS}) PIL {datasets.folder.Image.__version__}", flush=True)
  for line in sys.stdin:
    name, workers, batches = line.split()
    print(seconds(root, batch, name, int(workers), int(batches), size), flush=True)


if __name__ == "__main__":
  main(sys.argv[1], int(sys.argv[2]), *(int(a) for a in sys.argv[3:4]))
