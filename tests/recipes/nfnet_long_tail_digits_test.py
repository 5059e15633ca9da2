"""The offline digits demo's default run, `bazel run //recipes:nfnet_long_tail_digits`,
against its golden metrics: the regression check of the whole recipe (about a minute and
a half on 2 quiet cores).

Runs are deterministic on one CPU, but another instruction set takes other oneDNN
kernels, which round differently, and a 480-step run drifts. So the goldens are per CPU
(model name and instruction sets), each measured by two runs that gave bit-identical
reports, and on those CPUs every figure is held exactly. On a CPU with no goldens the
drift between the measured CPUs is the guide. The two AMD EPYCs moved balanced accuracy
by 1 of the 700 test images, the shot groups by up to 11 of their 210-280 (few-shot
0.471 against 0.524); an Intel Xeon with AVX-512 (2026-11-28) moved it by 42 images
(0.753 against 0.813: few-shot 0.329, many-shot 0.975), the same at the code before and
after that day's changes, none of which touch this recipe. So there balanced accuracy
is held within TOLERANCE_IMAGES (45 images, 6.4 points) of every CPU's and the groups
are printed, not held, and the test says so.

Since uint8 batches became the pipeline's default (2026-11-29, dcb2e47: the model sees
each augmented image rounded to whole levels) the run's figures moved: on the EPYC with
AVX-512 by 2 images in balanced accuracy (0.8143 -> 0.8114). Its goldens are measured
again (GOLDENS); the other two CPUs' could not be (no such machine at hand) and are kept
as the float32 default's (FLOAT32_GOLDENS): not held exactly any more, only as the
drift guide for CPUs with no goldens.
"""
import json
import os
import subprocess
import sys

import tensorflow as tf

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# The default run (seed 0, logit-adjusted loss) on each CPU signature, measured twice.
GOLDENS = {
    # 2026-11-29, 2 cores, with AVX-512: uint8 batches (two runs bit-identical, at
    # a9490bd in the suite and after it).
    ("AMD EPYC", ("avx2", "avx512f", "avx512_bf16", "avx512_vnni", "fma")): {
        "balanced_accuracy": 0.8114285714285714, "many_shot_accuracy": 0.9642857142857143,
        "medium_shot_accuracy": 0.9476190476190477, "few_shot_accuracy": 0.4714285714285715},
}
# The same run when batches were float32 (before dcb2e47), on CPUs not measured since.
FLOAT32_GOLDENS = {
    # 2026-11-25, 2 cores, AVX2 without AVX-512.
    ("AMD EPYC", ("avx2", "fma")): {
        "balanced_accuracy": 0.8128571428571428, "many_shot_accuracy": 0.9678571428571429,
        "medium_shot_accuracy": 0.9476190476190477, "few_shot_accuracy": 0.47142857142857136},
    # 2026-11-27, 2 cores, with AVX-512 (its uint8 goldens above).
    ("AMD EPYC", ("avx2", "avx512f", "avx512_bf16", "avx512_vnni", "fma")): {
        "balanced_accuracy": 0.8142857142857143, "many_shot_accuracy": 0.9428571428571428,
        "medium_shot_accuracy": 0.9333333333333332, "few_shot_accuracy": 0.5238095238095237},
    # 2026-11-28, 2 cores, with AVX-512 (and AMX): two runs bit-identical (at b1caaa1 and 32bbd3d)
    ("Intel(R) Xeon(R) Processor", ("avx2", "avx512f", "avx512_bf16", "avx512_vnni",
                                    "fma")): {
        "balanced_accuracy": 0.7528571428571429, "many_shot_accuracy": 0.975,
        "medium_shot_accuracy": 0.880952380952381, "few_shot_accuracy": 0.32857142857142857},
}
TEST_IMAGES = 700
TOLERANCE_IMAGES = 45  # the measured CPUs' largest drift (42 images) and a little
ISA = ("avx2", "avx512f", "avx512_bf16", "avx512_vnni", "fma")


def cpu_signature():
  """(model name, the instruction-set flags of ISA it has) of this machine's CPU."""
  try:
    with open("/proc/cpuinfo") as f:
      text = f.read()
  except OSError:
    return None
  name = next((l.split(":", 1)[1].strip() for l in text.splitlines()
               if l.startswith("model name")), "")
  flags = next((l.split(":", 1)[1].split() for l in text.splitlines()
                if l.startswith("flags")), [])
  return name, tuple(f for f in ISA if f in flags)


def run_recipe(model_dir, *bindings):
  env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
             TF_CPP_MIN_LOG_LEVEL="2")
  result = subprocess.run(
      [sys.executable, "-m", "recipes.train",
       "--gin_file=recipes/nfnet_long_tail_digits.gin", f"--model_dir={model_dir}",
       *(f"--gin_bindings={b}" for b in bindings)],
      cwd=ROOT, env=env, capture_output=True, text=True, timeout=840, check=False)
  if result.returncode:
    raise AssertionError(result.stderr[-3000:])
  with open(os.path.join(model_dir, "metrics.json")) as f:
    return json.load(f)


class NfnetLongTailDigitsTest(tf.test.TestCase):

  def test_default_run_matches_its_golden_metrics(self):
    metrics = run_recipe(os.path.join(self.get_temp_dir(), "default"))
    self.assertEqual(metrics["train_class_counts"], [108, 64, 38, 23, 13, 8, 5, 3, 1, 1])
    self.assertEqual(metrics["num_test_examples"], 700)
    self.assertEqual(metrics["epochs"], 60)
    figures = {k: metrics[k] for k in GOLDENS[next(iter(GOLDENS))]}
    print(figures)
    golden = GOLDENS.get(cpu_signature())
    if golden is not None:
      self.assertEqual(figures, golden)
      return
    print(f"CPU {cpu_signature()} has no goldens (tests/recipes/nfnet_long_tail_digits_test.py: "
          f"{list(GOLDENS)}): balanced accuracy held within {TOLERANCE_IMAGES} of "
          f"{TEST_IMAGES} test images of each measured CPU's (float32 batches' too), the "
          "shot groups not held")
    for known in (*GOLDENS.values(), *FLOAT32_GOLDENS.values()):
      self.assertAllClose(figures["balanced_accuracy"], known["balanced_accuracy"],
                          atol=TOLERANCE_IMAGES / TEST_IMAGES)

if __name__ == "__main__":
  tf.test.main()
