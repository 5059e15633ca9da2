"""Reproducer: TensorFlow's bfloat16 Conv2DBackpropFilter on CPU (oneDNN) returns
uninitialised memory when the input is narrower than the stride.

Standalone (TensorFlow and NumPy only), for an upstream report. For each of Conv2D,
Conv2DBackpropInput and Conv2DBackpropFilter it runs every small case (input height
and width 1-3, strides 1-3 each way, 1x1 and 3x3 kernels, SAME and VALID, 1 and 2
groups) several times in bfloat16 and compares with the same op in float32 on the same
bfloat16-rounded numbers (a float32 result rounded once to bfloat16 is within 2^-8 of
the largest value; wrong here means off by more than 3%). It does so in a fresh process
with oneDNN on and one with it off (`TF_ENABLE_ONEDNN_OPTS`, read at import), then shows
the smallest failing case tap by tap: the taps that see only padding, expected 0.

    ./bazelw run //benchmarks:grouped_conv_bf16
    ./bazelw run //benchmarks:grouped_conv_bf16 -- --calls=10
"""

import itertools
import json
import os
import subprocess
import sys

from absl import app
from absl import flags
import numpy as np

flags.DEFINE_integer("calls", 5, "calls of each case (the garbage varies from call to "
                     "call; a fresh buffer often holds zeros)")
flags.DEFINE_string("child", None, "internal: run the sweep in this process and print "
                    "JSON (set by the parent, with TF_ENABLE_ONEDNN_OPTS)")
FLAGS = flags.FLAGS

OPS = ("Conv2D", "Conv2DBackpropInput", "Conv2DBackpropFilter")
TOLERANCE = 3e-2  # of the reference's largest magnitude


def run_ops(tf, x, kernel, dy, strides, padding):
  """The three ops on one case; an op TensorFlow refuses gives None."""
  strides = [1, *strides, 1]
  calls = {
      "Conv2D": lambda: tf.raw_ops.Conv2D(input=x, filter=kernel, strides=strides,
                                          padding=padding),
      "Conv2DBackpropInput": lambda: tf.raw_ops.Conv2DBackpropInput(
          input_sizes=x.shape, filter=kernel, out_backprop=dy, strides=strides,
          padding=padding),
      "Conv2DBackpropFilter": lambda: tf.raw_ops.Conv2DBackpropFilter(
          input=x, filter_sizes=kernel.shape, out_backprop=dy, strides=strides,
          padding=padding),
  }
  results = {}
  for name, call in calls.items():
    try:
      results[name] = tf.cast(call(), tf.float32).numpy()
    except (tf.errors.InvalidArgumentError, tf.errors.UnimplementedError):
      results[name] = None
  return results


def case_errors(tf, case, seed):
  """{op: max |bfloat16 - float32| / max |float32|} for one call of `case`."""
  (h, w), strides, k, padding, groups = case
  rng = np.random.default_rng(seed)
  channels = 8
  x = tf.cast(rng.normal(size=(2, h, w, channels)), tf.bfloat16)
  kernel = tf.cast(rng.normal(size=(k, k, channels // groups, channels)), tf.bfloat16)
  out = tf.raw_ops.Conv2D(input=tf.cast(x, tf.float32), filter=tf.cast(kernel, tf.float32),
                          strides=[1, *strides, 1], padding=padding)
  dy = tf.cast(rng.normal(size=out.shape), tf.bfloat16)
  got = run_ops(tf, x, kernel, dy, strides, padding)
  want = run_ops(tf, *(tf.cast(t, tf.float32) for t in (x, kernel, dy)), strides, padding)
  errors = {}
  for op in OPS:
    if got[op] is None or want[op] is None:
      errors[op] = None  # unsupported (grouped gradients without oneDNN)
    elif not np.isfinite(got[op]).all():
      errors[op] = float("inf")
    else:
      errors[op] = float(np.abs(got[op] - want[op]).max() / (np.abs(want[op]).max() + 1e-30))
  return errors


def cases():
  sizes = itertools.product((1, 2, 3), repeat=2)
  for size, strides, k, padding, groups in itertools.product(
      sizes, list(itertools.product((1, 2, 3), repeat=2)), (1, 3), ("SAME", "VALID"),
      (1, 2)):
    if padding == "VALID" and min(size) < k:
      continue
    yield size, strides, k, padding, groups


def predicted(case):
  """The condition found here: SAME, a kernel wider than 1, input width < stride."""
  (_, w), (_, sw), k, padding, _ = case
  return padding == "SAME" and k > 1 and w < sw


def sweep(calls):
  """Runs in the child: counts wrong calls per op and case; the smallest case's taps."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  report = {"tensorflow": tf.__version__,
            "onednn_opts": os.environ.get("TF_ENABLE_ONEDNN_OPTS"), "calls": calls,
            "ops": {}}
  for op in OPS:
    report["ops"][op] = {"cases": 0, "unsupported": 0, "wrong": [], "wrong_calls": 0,
                         "calls": 0}
  for case in cases():
    wrong = {op: 0 for op in OPS}
    for seed in range(calls):
      for op, error in case_errors(tf, case, seed).items():
        if error is None:
          wrong[op] = None
        elif wrong[op] is not None and error > TOLERANCE:
          wrong[op] += 1
    for op in OPS:
      stats = report["ops"][op]
      stats["cases"] += 1
      if wrong[op] is None:
        stats["unsupported"] += 1
        continue
      stats["calls"] += calls
      stats["wrong_calls"] += wrong[op]
      if wrong[op]:
        stats["wrong"].append([case, wrong[op], predicted(case)])
  report["predicted_cases"] = sum(predicted(c) for c in cases())
  report["taps"] = smallest_case_taps(tf)
  return report


def smallest_case_taps(tf):
  """N=2, 1x1x8 input, 3x3 kernel, stride 2, SAME: per tap, max |dW| over channels,
  bfloat16 (three calls) against float32; only the centre tap sees the input."""
  rng = np.random.default_rng(0)
  x = tf.cast(rng.normal(size=(2, 1, 1, 8)), tf.bfloat16)
  dy = tf.cast(rng.normal(size=(2, 1, 1, 8)), tf.bfloat16)
  args = dict(filter_sizes=[3, 3, 8, 8], strides=[1, 2, 2, 1], padding="SAME")
  taps = {"float32": np.abs(tf.raw_ops.Conv2DBackpropFilter(
      input=tf.cast(x, tf.float32), out_backprop=tf.cast(dy, tf.float32),
      **args).numpy()).max(axis=(2, 3)).tolist()}
  for call in range(3):
    grad = tf.raw_ops.Conv2DBackpropFilter(input=x, out_backprop=dy, **args)
    taps[f"bfloat16 call {call}"] = np.abs(
        tf.cast(grad, tf.float32).numpy()).max(axis=(2, 3)).tolist()
  return taps


def print_report(report):
  print(f"\nTensorFlow {report['tensorflow']}, TF_ENABLE_ONEDNN_OPTS="
        f"{report['onednn_opts']}; cases where the input is narrower than the stride "
        f"(SAME, kernel > 1): {report['predicted_cases']}")
  for op, stats in report["ops"].items():
    wrong = stats["wrong"]
    outside = [c for c, _, p in wrong if not p]
    print(f"  {op:22s} {len(wrong):3d} wrong of {stats['cases'] - stats['unsupported']} "
          f"cases ({stats['wrong_calls']} of {stats['calls']} calls; "
          f"{stats['unsupported']} unsupported); outside the condition: {len(outside)}")
    for case, count, _ in wrong[:4]:
      (h, w), (sh, sw), k, padding, groups = case
      print(f"    e.g. input {h}x{w}, strides {sh}x{sw}, {k}x{k} {padding}, "
            f"groups {groups}: {count} of {report['calls']} calls wrong")
  print("  Conv2DBackpropFilter, 2x1x1x8 input, 3x3 kernel, stride 2, SAME: max |dW| "
        "per tap (rows: kernel height)")
  for name, taps in report["taps"].items():
    rows = "  ".join("[" + " ".join(f"{v:8.2g}" for v in row) + "]" for row in taps)
    print(f"    {name:16s} {rows}")


def main(argv):
  del argv
  if FLAGS.calls < 1:
    raise app.UsageError(f"--calls={FLAGS.calls}: give at least 1")
  if FLAGS.child:
    print(json.dumps(sweep(FLAGS.calls)))
    return
  for setting in ("1", "0"):
    env = dict(os.environ, TF_ENABLE_ONEDNN_OPTS=setting, TF_CPP_MIN_LOG_LEVEL="3",
               CUDA_VISIBLE_DEVICES="")
    out = subprocess.run([sys.executable, __file__, "--child=1", f"--calls={FLAGS.calls}"],
                         env=env, capture_output=True, text=True, check=False)
    if out.returncode:
      sys.exit(f"the sweep with TF_ENABLE_ONEDNN_OPTS={setting} failed:\n"
               f"{out.stderr[-3000:]}")
    print_report(json.loads(out.stdout.strip().splitlines()[-1]))


if __name__ == "__main__":
  app.run(main)
