"""What each of RandAugment's ops costs an image, on one CPU thread.

    ./bazelw run //benchmarks:randaugment_ops
    ./bazelw run //benchmarks:randaugment_ops -- --implementation=model_garden

`--implementation`: "ours" (the pipeline's, `recipes.data.randaugment.RandAugment`:
Model Garden's pixels, its translations as windows, Rotate and ShearX/Y as gathers by
index maps made once, Solarize(Add) in 8-bit arithmetic, AutoContrast, Equalize,
Sharpness and Cutout rewritten) or "model_garden"
(`official.vision.ops.augment.RandAugment` as it is).

`--images` photo-like 224 x 224 uint8 images (as //benchmarks:input's JPEGs), held in
memory; each op of `official.vision.ops.augment.RandAugment` at `--magnitude`, alone
(RandAugment(1, m) with every other op excluded: it draws the op or the identity, each
for about half the images), and the whole RandAugment(2, m) the recipes use, each as a
one-thread tf.data map (TensorFlow's intra-op pool pinned to one thread, as
//benchmarks:input does), alternated over `--rounds` rounds with the order flipped.
A figure is milliseconds an image over the same map doing nothing, the median over
rounds, the first image of each pass untimed (the iterator's set-up); an op's is twice
its excess (it runs on half the images). docs/input.md uses these to say where
RandAugment's time goes.
"""

import functools
import json
import statistics
import time

from absl import app
from absl import flags
import numpy as np
import tensorflow as tf

from benchmarks import cpu_input
from benchmarks import rounds as rounds_lib
from benchmarks import runs
from benchmarks import stats
from official.vision.ops import augment as mg_augment
from recipes.data import randaugment

WHOLE = "RandAugment(2, m)"
IMPLEMENTATIONS = {"ours": randaugment.RandAugment, "model_garden": mg_augment.RandAugment}
OPS = tuple(mg_augment.RandAugment().available_ops)

FLAGS = flags.FLAGS
flags.DEFINE_integer("images", 256, "224 x 224 images a measurement")
flags.DEFINE_integer("magnitude", 9, "RandAugment's magnitude")
flags.DEFINE_integer("rounds", 6, "alternated rounds (6 or more for a 95% interval)")
flags.DEFINE_list("ops", list(OPS), f"of {', '.join(OPS)}")
flags.DEFINE_string("output", None, "write the figures as JSON here")
flags.DEFINE_enum("implementation", "ours", list(IMPLEMENTATIONS),
                  "ours (the pipeline's RandAugment) or model_garden's own")


def photos(count, size=224, seed=0):
  """`count` photo-like size x size uint8 images, in memory."""
  rng = np.random.default_rng(seed)
  pixels = np.stack([cpu_input.photo_like(rng, size, size).numpy()
                     for _ in range(count)])
  return tf.data.Dataset.from_tensor_slices(pixels).cache()


def mapped(images, name, magnitude, implementation="ours"):
  """The one-thread map of `name` (an op, WHOLE, or None: nothing) over `images`."""
  make = IMPLEMENTATIONS[implementation]
  if name is None:
    fn = tf.identity
  elif name == WHOLE:
    fn = make(2, magnitude).distort
  else:
    others = [o for o in OPS if o != name]
    fn = make(1, magnitude, exclude_ops=others).distort
  # A sum of the result, so nothing is pruned and little is kept.
  return cpu_input.threaded(
      images.map(lambda x: tf.reduce_sum(tf.cast(fn(x), tf.int32))), 1)


def seconds(dataset):
  """Seconds for the elements after the first (the iterator's set-up untimed)."""
  iterator = iter(dataset)
  next(iterator)
  start = time.perf_counter()
  for _ in iterator:
    pass
  return time.perf_counter() - start


def measure(names, count, magnitude, rounds, implementation="ours"):
  """{name: [ms an image a round]}: the excess over doing nothing (an op's doubled)."""
  images = photos(count)
  for _ in images:  # fill the cache
    pass
  datasets = {n: mapped(images, n, magnitude, implementation)
              for n in (None,) + tuple(names)}
  for dataset in datasets.values():  # a first, untimed pass of each
    seconds(dataset)
  def excess(name):
    base, took = seconds(datasets[None]), seconds(datasets[name])
    share = 1.0 if name == WHOLE else 0.5
    return (took - base) / share / (count - 1) * 1e3

  def progress(r, name, ms):
    print(f"  round {r + 1}: {name}: {ms:.2f} ms an image", flush=True)

  return rounds_lib.interleave({n: functools.partial(excess, n) for n in names}, rounds,
                               warmup=False, on_result=progress)


def check_flags():
  unknown = [o for o in FLAGS.ops if o not in OPS]
  if unknown:
    raise app.UsageError(f"--ops: {unknown[0]!r} is none of {', '.join(OPS)}")
  for name, least in (("images", 2), ("rounds", 1)):
    if getattr(FLAGS, name) < least:
      raise app.UsageError(f"--{name}={getattr(FLAGS, name)} must be >= {least}")
  if not 0 <= FLAGS.magnitude <= 30:
    raise app.UsageError(f"--magnitude={FLAGS.magnitude} must be in [0, 30]")


def main(argv):
  del argv
  check_flags()
  cpu_input.one_intra_op_thread()
  names = tuple(FLAGS.ops) + (WHOLE,)
  result = measure(names, FLAGS.images, FLAGS.magnitude, FLAGS.rounds, FLAGS.implementation)
  rows = sorted(({"op": n, "ms_per_image": statistics.median(v),
                  "interval": stats.median_interval(v).as_dict(), "rounds": v}
                 for n, v in result.items()), key=lambda row: -row["ms_per_image"])
  print(f"\n{'op':<20}{'ms an image [95% interval]':>30}  (one thread, {FLAGS.images} images "
        f"of 224 x 224, magnitude {FLAGS.magnitude}, median of {FLAGS.rounds} rounds, "
        f"{FLAGS.implementation})")
  for row in rows:
    print(f"{row['op']:<20}{stats.figure_text(row['interval'], digits=2):>30}")
  print(f"({stats.TIMING_RULE})")
  if FLAGS.output:
    with open(FLAGS.output, "w") as f:
      json.dump(dict(**runs.provenance(), images=FLAGS.images, magnitude=FLAGS.magnitude,
                     rounds=FLAGS.rounds,
                     implementation=FLAGS.implementation,
                     tensorflow=tf.__version__, rows=rows), f, indent=1)
    print(f"wrote {FLAGS.output}")


if __name__ == "__main__":
  app.run(main)
