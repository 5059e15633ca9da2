"""A peer of //benchmarks:input: NVIDIA DALI's CPU pipeline, run by an interpreter that
has DALI (`nvidia-dali-cuda120` or `-cuda130` from PyPI; not a project dependency:
`--dali_python` names it). No GPU is needed: `device_id=None` runs CPU operators only.

    python peer_dali.py ROOT BATCH [SIZE]

The protocol of peer_torchvision.py: prints "ready ...", then for each stdin line
"PIPELINE THREADS BATCHES" builds the pipeline over ROOT (`fn.readers.file`, the
ImageFolder layout, shuffled) with THREADS as DALI's `num_threads`, the whole process
pinned to THREADS cores (DALI's executor and reader run threads of their own beside
that pool), runs one untimed batch (the build and the prefetch queue's fill), then
prints the seconds for the next BATCHES batches, each copied out as one dense NCHW
float32 array (as the DataLoader's collate makes one tensor).

train: `decoders.image_random_crop` (libjpeg-turbo decoding only the box, as ours: area
uniform in [0.08, 1], aspect ratio log-uniform in [3/4, 4/3], 10 attempts, as
torchvision; its fallback box is placed at random where torchvision centres it),
`resize` to SIZE x SIZE (antialiased linear, DALI's default), a random horizontal
flip, normalised by ImageNet's mean and std. eval: decoded whole, the shorter side
resized to round(SIZE / 0.875), the centred SIZE x SIZE crop, normalised. Other
pipelines (RandAugment, colour jitter: DALI's ops are not torchvision's) print "nan".
"""

import os
import sys
import time

import nvidia.dali as dali  # pylint: disable=import-error
from nvidia.dali import fn  # pylint: disable=import-error
from nvidia.dali import pipeline_def  # pylint: disable=import-error
from nvidia.dali import types  # pylint: disable=import-error

MEAN = [0.485 * 255, 0.456 * 255, 0.406 * 255]
STD = [0.229 * 255, 0.224 * 255, 0.225 * 255]
PIPELINES = ("train", "eval")
ALL_CORES = sorted(os.sched_getaffinity(0))  # restored after each pinned measurement


def build(root, batch, name, threads, size):
  @pipeline_def(batch_size=batch, num_threads=threads, device_id=None, seed=0)
  def pipe():
    jpegs, labels = fn.readers.file(file_root=root, random_shuffle=True, name="reader")
    if name == "train":
      images = fn.decoders.image_random_crop(
          jpegs, device="cpu", output_type=types.RGB, random_area=[0.08, 1.0],
          random_aspect_ratio=[0.75, 4.0 / 3.0], num_attempts=10)
      images = fn.resize(images, resize_x=size, resize_y=size)
      extra = dict(mirror=fn.random.coin_flip(probability=0.5))
    else:
      images = fn.decoders.image(jpegs, device="cpu", output_type=types.RGB)
      images = fn.resize(images, resize_shorter=round(size / 0.875))
      extra = dict(crop=(size, size))
    images = fn.crop_mirror_normalize(images, dtype=types.FLOAT, output_layout="CHW",
                                      mean=MEAN, std=STD, **extra)
    return images, labels

  p = pipe()
  p.build()
  return p


def one_batch(p):
  images, labels = p.run()
  return images.as_array(), labels.as_array()


def seconds(root, batch, name, threads, batches, size):
  if name not in PIPELINES:
    return float("nan")
  os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:threads])
  try:
    p = build(root, batch, name, threads, size)
    one_batch(p)
    start = time.perf_counter()
    for _ in range(batches):
      one_batch(p)
    elapsed = time.perf_counter() - start
    del p
  finally:
    os.sched_setaffinity(0, ALL_CORES)
  return elapsed


def main(root, batch, size=224):
  print(f"ready dali {dali.__version__} (CPU only)", flush=True)
  for line in sys.stdin:
    name, threads, batches = line.split()
    print(seconds(root, batch, name, int(threads), int(batches), size), flush=True)


if __name__ == "__main__":
  main(sys.argv[1], int(sys.argv[2]), *(int(a) for a in sys.argv[3:4]))
