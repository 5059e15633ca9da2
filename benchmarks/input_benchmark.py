"""The input pipeline against torchvision's DataLoader and the JPEG decode limit.

    ./bazelw run //benchmarks:input
    ./bazelw run //benchmarks:input -- --torch_python=/work/peer/bin/python \
        --output=/tmp/input.json

Data: `--images` JPEGs of ImageNet's typical shapes (3 in 4 landscape about 500 x 375,
1 in 4 portrait 375 x 500, each side scaled by 0.8-1.2), quality 90, of smooth noise
with grain (about 100 KB a file, as ImageNet's 140 GB / 1.28M images), in `--classes`
class folders, written once to `--data_dir` and reused. Read through the project's
`@image_folder` source, in the OS page cache (as a data set on a local disk after
its first epoch).

Pipelines, each at `--threads` CPU threads, batch `--batch_size`, output
`--image_size` (224; the peer's too, its eval resize to image_size / 0.875):
- ours: `recipes.data.pipeline.InputPipeline` as the ImageNet-style recipes bind it:
  `train` (random resized crop to 224, area 0.08-1, its box drawn by torchvision's
  sampler, `random_resized_crop_sampler = 'torchvision'`, as the peer draws it; flip),
  `train_model_garden` (`train` with Model Garden's sampler, TF's
  sample_distorted_bounding_box, whose crops are smaller: mean area 0.37 of a 500 x 375
  image against 0.43; beside `train`, not against torchvision), `train_randaugment` (+
  RandAugment 2 x 9), `train_kang` (+ colour jitter 0.4, Kang et al. 2020's ImageNet-LT
  recipe), `eval` (centred 0.875 crop, resize to 224), `train_no_antialias` (`train`
  resizing the crop without antialiasing, as Model Garden does) and `train_bicubic`
  (plain bicubic, as DeepMind's NFNet input and the brock2021 recipe) (no torchvision
  rows: PIL always antialiases), `train_dct_scaling` (`train` decoding a box at least
  twice the output size on both sides scaled down in libjpeg's IDCT; set against
  `train`: none such at 224 on these shapes, half the boxes at 128); every row but
  `train_uint8` hands float32 batches, normalised on the host, as torchvision's
  `ToTensor` + `Normalize` do (the pipeline's default, uint8 batches, is
  `train_uint8`: `train` handing uint8 batches, normalised later on the device; set
  against `train`, the host's share alone), `train_randaugment_per_image` (`train_randaugment`
  with RandAugment per image, `randaugment_batched = False`: `train_randaugment` is set
  against it); ImageNet mean / std; nothing cached (one epoch's cost); a
  shuffle buffer of one batch (a small share of the data, as 10000 of ImageNet's
  1.28M: a buffer holding the whole folder would decode it all in the untimed first
  batch). `train_decode_whole` and `eval_decode_whole`: `train` and `eval` decoding
  each whole JPEG before cropping it (the pipelines before their fused decodes).
- torchvision (`--torch_python`, benchmarks/peer_torchvision.py): `ImageFolder` +
  `DataLoader` with the same transforms (the same crop sampler) and PIL's decoder.
- the limit: `decode` (`tf.io.decode_jpeg` of the whole file) and `decode_and_crop`
  (`tf.image.decode_and_crop_jpeg` of the same random boxes as `train`), unbatched;
  and where the rest of `train`'s time goes: `decode_and_crop_resize` (+ the
  resize to 224 as `train` does it; flip, normalisation and batching make up the rest).

Threads: tf.data runs every op of a pipeline in a private pool of N threads
(`Options.threading.private_threadpool_size`), each op single-threaded
(`max_intra_op_parallelism = 1`, and TensorFlow's process-wide intra-op pool set to
one thread: the antialiased resize, ScaleAndTranslate, shards over that pool and not
over tf.data's, so without it a 1-thread row borrows every core); torchvision runs N
worker processes (`num_workers=N`; 0 would load in the main process, between training
steps), each with `torch.set_num_threads(1)`. A measurement times `--batches` batches
after an untimed first one (worker start, shuffle buffer fill). Rounds alternate every
pipeline and thread count, the order flipped every round; each figure is the median
over rounds with its noise (the half-width of the median's 95% interval over the
median), and a ratio the median of the per-round ratios with its 95% interval, "ahead"
or "behind" only where the interval leaves out 1.0 (`benchmarks/stats.py`: order
statistics, 6 rounds or more).

Cores to feed a GPU: the published ResNet-50 v1.5 training rate `--accelerator_rate`
(default: NVIDIA's 2470 img/s, one A100 80GB, mixed precision, NVIDIA
DeepLearningExamples, PyTorch/Classification/ConvNets/resnet50v1.5/README.md,
"Training performance: NVIDIA DGX A100 (8x A100 80GB)") divided by the measured rate
of one thread.
"""

import dataclasses
import json
import os
import statistics
import subprocess
import tempfile
import time

from absl import app
from absl import flags
import numpy as np
import tensorflow as tf

from benchmarks import cpu_input
from benchmarks import rounds as rounds_lib
from benchmarks import runs
from benchmarks import stats
from recipes.data import augment
from recipes.data import image_folder
from recipes.data import pipeline

PUBLISHED = ("NVIDIA DeepLearningExamples ResNet-50 v1.5 (PyTorch), 1x A100 80GB, mixed "
             "precision: 2470 img/s (PyTorch/Classification/ConvNets/resnet50v1.5/README.md,"
             " 'Training performance: NVIDIA DGX A100 (8x A100 80GB)')")
PEERED = ("train", "train_randaugment", "train_kang", "eval")  # torchvision has these
OURS = PEERED + ("train_model_garden", "train_no_antialias", "train_bicubic",
                 "train_dct_scaling", "train_uint8", "train_randaugment_per_image")
# Rows whose crops are not `train`'s boxes: no ratio to the decode-and-crop limit.
OTHER_BOXES = ("eval", "train_model_garden")
# `train` and `eval` as they were before their fused decodes: every JPEG decoded whole,
# then cropped; each maps to its fused pipeline.
WHOLE = {"train_decode_whole": "train", "eval_decode_whole": "eval"}
WHOLE_OF = {fused: whole for whole, fused in WHOLE.items()}
# Rows set against the row they change one thing of: {row: (its base, what differs)}.
BASE_OF = {**{fused: (whole, "fused decode-and-crop") for fused, whole in WHOLE_OF.items()},
           "train_dct_scaling": ("train", "DCT-scaled decode"),
           "train_uint8": ("train", "uint8 batches"),
           "train_randaugment": ("train_randaugment_per_image", "RandAugment over batches")}
LIMITS = ("decode", "decode_and_crop", "decode_and_crop_resize")
PEER = "torchvision"
# The peers: {kind: (its script, the flag naming its Python, what that Python needs,
# the pipelines it has)}. torchvision_simd: the same DataLoader on Pillow-SIMD.
PEERS = {
    PEER: ("peer_torchvision.py", "torch_python", "torch and torchvision", PEERED),
    "torchvision_simd": ("peer_torchvision.py", "simd_python",
                         "torch, torchvision and Pillow-SIMD", PEERED),
    "dali": ("peer_dali.py", "dali_python", "NVIDIA DALI", ("train", "eval")),
}
IMAGENET_MEAN, IMAGENET_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
MARKER = "input_benchmark.json"  # what a data directory holds

FLAGS = flags.FLAGS
flags.DEFINE_string("data_dir", os.path.join(tempfile.gettempdir(), "input_benchmark_jpegs"),
                    "where the JPEGs are written (reused when they match --images)")
flags.DEFINE_integer("images", 2560, "JPEGs to generate")
flags.DEFINE_integer("classes", 10, "class folders")
flags.DEFINE_integer("batch_size", 128, "images a batch")
flags.DEFINE_integer("image_size", 224, "output side of every pipeline, ours and the peer's")
flags.DEFINE_integer("batches", 8, "timed batches a measurement")
flags.DEFINE_integer("rounds", 6, "alternated rounds (6 or more for a 95% interval)")
flags.DEFINE_list("threads", ["1", "2"], "CPU threads (tf.data) / workers (torchvision)")
flags.DEFINE_list("pipelines", list(OURS + tuple(WHOLE) + LIMITS),
                  f"of {', '.join(OURS + tuple(WHOLE) + LIMITS)}")
flags.DEFINE_string("torch_python", None, "a Python with torch and torchvision: adds "
                    "torchvision's ImageFolder + DataLoader (benchmarks/peer_torchvision.py)")
flags.DEFINE_string("simd_python", None, "a Python with torch, torchvision and Pillow-SIMD "
                    "(pillow-simd in place of pillow): adds the DataLoader on it")
flags.DEFINE_string("dali_python", None, "a Python with NVIDIA DALI (nvidia-dali-cuda120 "
                    "from PyPI): adds DALI's CPU pipeline (benchmarks/peer_dali.py)")
flags.DEFINE_float("accelerator_rate", 2470.0, "ResNet-50 training img/s of one "
                   "accelerator, to count the cores that feed it (default: " + PUBLISHED + ")")
flags.DEFINE_string("output", None, "write the figures as JSON here")


# -- data -------------------------------------------------------------------------


def jpeg_shape(rng):
  """(height, width) of an ImageNet-like photo: 3 in 4 landscape ~375 x 500."""
  long, short = 500 * rng.uniform(0.8, 1.2), 375 * rng.uniform(0.8, 1.2)
  size = (short, long) if rng.uniform() < 0.75 else (long, short)
  return int(size[0]), int(size[1])


def make_data(root, count, classes, seed=0):
  """Writes `count` JPEGs into `classes` folders under `root` (kept when a previous
  call wrote the same); returns what was chosen."""
  chosen = dict(images=count, classes=classes, seed=seed, quality=90)
  marker = os.path.join(root, MARKER)
  if os.path.exists(marker):
    with open(marker) as f:
      done = json.load(f)
    if {k: done.get(k) for k in chosen} == chosen:
      return done
  rng = np.random.default_rng(seed)
  sizes, pixels = [], []
  for i in range(count):
    folder = os.path.join(root, f"class_{i % classes:03d}")
    os.makedirs(folder, exist_ok=True)
    height, width = jpeg_shape(rng)
    data = tf.io.encode_jpeg(cpu_input.photo_like(rng, height, width), quality=90).numpy()
    with open(os.path.join(folder, f"{i:06d}.jpg"), "wb") as f:
      f.write(data)
    sizes.append(len(data))
    pixels.append(height * width)
  done = dict(chosen, mean_kb=float(np.mean(sizes)) / 1e3,
              mean_megapixels=float(np.mean(pixels)) / 1e6)
  with open(marker, "w") as f:
    json.dump(done, f)
  return done


# -- ours and the limit -------------------------------------------------------------


def settings(name, batch_size, image_size=224):
  """The project's InputPipeline for pipeline `name`, as ImageNet-style recipes bind it
  (recipes/configs/augment/kang2020_imagenet.gin, RandAugment as the NFNet recipes);
  the crop's box drawn as torchvision draws it, but in `train_model_garden`."""
  base = pipeline.InputPipeline(
      batch_size=batch_size, image_size=image_size, random_resized_crop=(0.08, 1.0),
      random_resized_crop_ratio=(0.75, 1.3333333), random_flip=True, randaugment=(),
      random_resized_crop_sampler="torchvision",
      mean=IMAGENET_MEAN, std=IMAGENET_STD, eval_image_size=image_size,
      eval_crop_fraction=0.875,
      eval_resize_method="bilinear", cache=False, shuffle_buffer=batch_size,
      uint8_batches=False)
  extra = {"train_randaugment": dict(randaugment=(2, 9)),
           "train_randaugment_per_image": dict(randaugment=(2, 9), randaugment_batched=False),
           "train_model_garden": dict(random_resized_crop_sampler="model_garden"),
           "train_no_antialias": dict(random_resized_crop_antialias=False),
           "train_bicubic": dict(random_resized_crop_method="bicubic",
                                 random_resized_crop_antialias=False),
           "train_kang": dict(color_jitter=(0.4, 0.4, 0.4)),
           "train_dct_scaling": dict(random_resized_crop_dct_scaling=True),
           "train_uint8": dict(uint8_batches=True)}.get(name, {})
  return base.replace(**extra)


def limit_dataset(name, paths, crop_settings):
  """The decode limit: every file decoded whole, or only a random resized crop's box
  (the same draw as the training pipeline's); unbatched (the sizes differ)."""

  def decode(encoded):  # a pixel of the result: a decode nothing reads is pruned
    return tf.io.decode_jpeg(encoded, channels=3)[0, 0]

  def decode_and_crop(position, encoded):
    seed = tf.random.experimental.stateless_fold_in(tf.constant([0, 0], tf.int64), position)
    crop = augment.decode_and_crop(crop_settings, encoded, seed)
    if name == "decode_and_crop_resize":
      return augment.resize_crop(crop_settings, crop)[0, 0]
    return tf.cast(crop[0, 0], tf.float32)

  ds = tf.data.Dataset.from_tensor_slices(paths).shuffle(len(paths), seed=0).map(
      tf.io.read_file, num_parallel_calls=tf.data.AUTOTUNE)
  if name == "decode":
    ds = ds.map(decode, num_parallel_calls=tf.data.AUTOTUNE)
  else:
    ds = ds.enumerate().map(decode_and_crop, num_parallel_calls=tf.data.AUTOTUNE)
  return ds.prefetch(tf.data.AUTOTUNE)


def ours_dataset(name, folder, epoch, batch_size, image_size=224):
  """The project's pipeline `name` (OURS) over the whole folder, or a limit (LIMITS)."""
  p = settings(WHOLE.get(name, name), batch_size, image_size)
  if name in LIMITS:
    return limit_dataset(name, np.asarray(folder.paths), p)
  source = folder.source
  if name in WHOLE:  # no file bytes: the pipeline decodes whole images
    source = dataclasses.replace(source, read_encoded=None)
  if WHOLE.get(name, name) == "eval":
    return p.eval_dataset(source, "train")
  return p.train_dataset(source, np.arange(len(folder.paths)), epoch, seed=0)


def time_dataset(dataset, elements):
  """Seconds for `elements` elements after an untimed first one."""
  iterator = iter(dataset)
  next(iterator)
  start = time.perf_counter()
  for _ in range(elements):
    next(iterator)
  return time.perf_counter() - start


@dataclasses.dataclass
class Folder:
  """The image folder as the project's source, with its file paths."""
  source: object
  paths: list

  @classmethod
  def read(cls, root):
    source = image_folder.image_folder(root, test_root=root)
    _, paths, _, _ = image_folder.scan(root)
    return cls(source, list(paths))


# -- torchvision ----------------------------------------------------------------------


class Peer:
  """A peer (PEERS: torchvision's ImageFolder + DataLoader, on Pillow or Pillow-SIMD, or
  DALI's CPU pipeline) in a process of `python`: one measurement a request."""

  def __init__(self, python, root, batch_size, image_size=224, kind=PEER):
    script, flag, needs, _ = PEERS[kind]
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), script)
    try:
      self.process = subprocess.Popen([python, script, root, str(batch_size), str(image_size)],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    except OSError as e:
      raise app.UsageError(f"--{flag}={python} does not run ({e}); name a Python "
                           f"with {needs}, or leave the flag out") from None
    self.version = self.process.stdout.readline().strip()
    if not self.version.startswith("ready"):
      self.close()
      raise app.UsageError(f"--{flag}={python} cannot run the {kind} peer: does it import "
                           f"{needs}? (leave the flag out to measure without it)")

  def seconds(self, name, workers, batches):
    self.process.stdin.write(f"{name} {workers} {batches}\n")
    self.process.stdin.flush()
    return float(self.process.stdout.readline())

  def close(self):
    if self.process.stdin:
      self.process.stdin.close()
    self.process.wait(timeout=120)


# -- the run --------------------------------------------------------------------------


def measure(folder, peers, names, threads, rounds, batches, batch_size, image_size=224):
  """{(pipeline, threads, "ours"|"limit"|a peer's kind): [img/s a round]}, the rounds
  alternated (benchmarks/rounds.py; each measurement's first batch is its warm-up);
  `peers`: {kind: Peer}."""
  cases = [(n, t, "limit" if n in LIMITS else "ours") for n in names for t in threads]
  for kind in peers:
    cases += [(n, t, kind) for n in names if n in PEERS[kind][3] for t in threads]
  images = batches * batch_size

  def run(case):
    name, n_threads, kind = case
    done = []  # this case's rounds so far: each round its own crop seed

    def one_round():
      if kind in peers:
        seconds = peers[kind].seconds(name, n_threads, batches)
      else:
        ds = cpu_input.threaded(
            ours_dataset(name, folder, len(done), batch_size, image_size), n_threads)
        seconds = time_dataset(ds, images if kind == "limit" else batches)
      done.append(seconds)
      return images / seconds
    return one_round

  def progress(r, case, rate):
    name, n_threads, kind = case
    print(f"  round {r + 1}: {kind} {name} x{n_threads}: {rate:.1f} img/s", flush=True)

  return rounds_lib.interleave({case: run(case) for case in cases}, rounds, warmup=False,
                               on_result=progress)


def summary(rates, accelerator_rate):
  """Rows of medians, noise, ratios (the median of the rounds' ratios with its 95%
  interval and verdict: stats.ratio_interval) and cores."""
  rows = []
  for (name, threads, kind), values in rates.items():
    row = dict(pipeline=name, threads=threads, kind=kind,
               images_per_second=statistics.median(values), rounds=values,
               noise=stats.median_interval(values).as_dict()["noise"])
    row["cores_to_feed_accelerator"] = accelerator_rate / (row["images_per_second"] / threads)
    others = {**{f"over_{kind}": (name, threads, kind) for kind in PEERS},
              "over_decode_and_crop": ("decode_and_crop", threads, "limit"),
              "over_decode": ("decode", threads, "limit"),
              "over_base": (BASE_OF.get(name, (None,))[0], threads, "ours")}
    for key, peer_key in others.items():
      if kind == "ours" and peer_key in rates and (
          peer_key[2] in PEERS or key == "over_base" or name not in OTHER_BOXES):
        # Rates in, seconds an image to the rule: ours / theirs in images a second.
        row[key] = stats.ratio_interval(ours=[1 / v for v in values],
                                        theirs=[1 / v for v in rates[peer_key]]).as_dict()
    rows.append(row)
  return rows


def print_table(rows):
  print(f"\n{'pipeline':<24}{'kind':<13}{'threads':>7}{'img/s':>9}{'noise':>7}"
        f"{'cores/GPU':>10}  {'ours/torchvision':<24}{'ours/decode+crop':<22}")
  for row in rows:
    cells = []
    for key in ("over_torchvision", "over_decode_and_crop"):
      ratio = row.get(key)
      verdict = f" {ratio['verdict']}" if ratio and key == "over_torchvision" else ""
      cells.append(stats.ratio_text(ratio) + verdict if ratio else "-")
    print(f"{row['pipeline']:<24}{row['kind']:<13}{row['threads']:>7}"
          f"{row['images_per_second']:>9.1f}{stats.noise_text([row['noise']]):>7}"
          f"{row['cores_to_feed_accelerator']:>10.1f}  {cells[0]:<24}{cells[1]:<22}")
  for row in rows:
    for kind in PEERS:
      if kind != PEER and f"over_{kind}" in row:
        ratio = row[f"over_{kind}"]
        print(f"ours / {kind}: {row['pipeline']} at {row['threads']} threads: "
              f"{stats.ratio_text(ratio)} {ratio['verdict']}")
    if "over_base" in row:
      base, differs = BASE_OF[row["pipeline"]]
      print(f"{differs}: {row['pipeline']} / {base} at {row['threads']} threads: "
            f"{stats.ratio_text(row['over_base'])} {row['over_base']['verdict']}")


def check_flags():
  known = OURS + tuple(WHOLE) + LIMITS
  unknown = [n for n in FLAGS.pipelines if n not in known]
  if unknown:
    raise app.UsageError(f"--pipelines: {unknown[0]!r} is none of {', '.join(known)}")
  if not all(t.isdigit() and int(t) >= 1 for t in FLAGS.threads):
    raise app.UsageError(f"--threads={','.join(FLAGS.threads)}: use whole numbers >= 1")
  for name in ("images", "classes", "batch_size", "batches", "rounds", "image_size"):
    if getattr(FLAGS, name) < 1:
      raise app.UsageError(f"--{name}={getattr(FLAGS, name)} must be >= 1")
  if FLAGS.images < (FLAGS.batches + 1) * FLAGS.batch_size or FLAGS.classes < 2:
    raise app.UsageError(f"--images={FLAGS.images} must be at least (--batches + 1) x "
                         f"--batch_size = {(FLAGS.batches + 1) * FLAGS.batch_size}, in "
                         ">= 2 --classes")
  for _, flag, needs, _ in PEERS.values():
    python = getattr(FLAGS, flag)
    if python and not os.access(python, os.X_OK):
      raise app.UsageError(f"--{flag}={python} is not an executable; name a Python with "
                           f"{needs}, or leave the flag out")


def start_peers():
  """{kind: Peer} of the peers whose Python a flag names, each announced."""
  peers = {}
  try:
    for kind, (_, flag, needs, _) in PEERS.items():
      if getattr(FLAGS, flag):
        peers[kind] = Peer(getattr(FLAGS, flag), FLAGS.data_dir, FLAGS.batch_size,
                           FLAGS.image_size, kind)
        print(f"peer {kind}: {peers[kind].version}")
  except Exception:
    for peer in peers.values():
      peer.close()
    raise
  if PEER not in peers:
    print("peer: no torchvision (give --torch_python=<a Python with torch and "
          "torchvision> to add torchvision's DataLoader)")
  return peers


def main(argv):
  del argv
  check_flags()
  if not cpu_input.one_intra_op_thread():
    print("note: TensorFlow's intra-op pool was already started; antialiased resizes "
          "may use more cores than a row's threads")
  data = make_data(FLAGS.data_dir, FLAGS.images, FLAGS.classes)
  print(f"data: {data['images']} JPEGs in {data['classes']} classes at {FLAGS.data_dir}, "
        f"quality {data['quality']}, mean {data['mean_kb']:.0f} KB, "
        f"{data['mean_megapixels']:.3f} megapixels (ImageNet-like 500 x 375, 1 in 4 portrait)")
  folder = Folder.read(FLAGS.data_dir)
  threads = [int(t) for t in FLAGS.threads]
  peers = start_peers()
  try:
    rates = measure(folder, peers, FLAGS.pipelines, threads, FLAGS.rounds, FLAGS.batches,
                    FLAGS.batch_size, FLAGS.image_size)
  finally:
    for peer in peers.values():
      peer.close()
  rows = summary(rates, FLAGS.accelerator_rate)
  print_table(rows)
  print(f"\ncores/GPU: CPU cores to feed ResNet-50 at {FLAGS.accelerator_rate:.0f} img/s "
        f"on one accelerator at each row's rate a thread (default: {PUBLISHED}); "
        f"{stats.TIMING_RULE}. {os.cpu_count()} CPU cores here.")
  if FLAGS.output:
    result = dict(**runs.provenance(), data=data, batch_size=FLAGS.batch_size,
                  image_size=FLAGS.image_size,
                  batches=FLAGS.batches,
                  rounds=FLAGS.rounds, cpu_count=os.cpu_count(),
                  accelerator_rate=FLAGS.accelerator_rate,
                  accelerator_source=PUBLISHED if FLAGS.accelerator_rate == 2470.0 else
                  "--accelerator_rate",
                  peer=peers[PEER].version if PEER in peers else None,
                  peers={kind: peer.version for kind, peer in peers.items()},
                  tensorflow=tf.__version__, rows=rows)
    with open(FLAGS.output, "w") as f:
      json.dump(result, f, indent=1)
    print(f"wrote {FLAGS.output}")


if __name__ == "__main__":
  app.run(main)
