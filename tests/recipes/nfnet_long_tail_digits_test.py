"""The offline digits demo's default run, `bazel run //recipes:nfnet_long_tail_digits`,
against its golden metrics: the regression check of the whole recipe (about a minute and
a half on 2 quiet cores).

Runs are deterministic: on the machine the goldens were measured on (2026-11-25, "AMD
EPYC", 2 cores, AVX2 without AVX-512) two runs gave bit-identical reports, so there the
test holds every figure exactly. Another CPU (another instruction set, so other oneDNN
kernels) rounds differently and a 480-step run drifts by a few test images: there each
figure is held within 10 of the test images it is measured on, and the test says so.
"""

import json
import os
import subprocess
import sys

import tensorflow as tf

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# The default run (seed 0, logit-adjusted loss), measured twice on MEASURED_ON.
GOLDEN = {"balanced_accuracy": (0.8128571428571428, 700),
          "many_shot_accuracy": (0.9678571428571429, 280),
          "medium_shot_accuracy": (0.9476190476190477, 210),
          "few_shot_accuracy": (0.47142857142857136, 210)}
MEASURED_ON = ("AMD EPYC", ("avx2", "fma"))
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
    print({k: metrics[k] for k in GOLDEN})
    exact = cpu_signature() == MEASURED_ON
    if not exact:
      print(f"CPU {cpu_signature()} is not the goldens' {MEASURED_ON}: each figure held "
            "within 10 test images, not exactly")
    for key, (value, images) in GOLDEN.items():
      self.assertAllClose(metrics[key], value, atol=1e-9 if exact else 10 / images,
                          msg=key)


if __name__ == "__main__":
  tf.test.main()
