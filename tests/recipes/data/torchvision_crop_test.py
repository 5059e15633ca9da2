"""The "torchvision" random resized crop sampler is torchvision's RandomResizedCrop.

Against a transcription of torchvision's get_params (torchvision/transforms/
transforms.py, `RandomResizedCrop.get_params`), written here from its source, with the
uniform draws injected: the same box for the same draws. Over many draws, its
distribution is the transcription's under independent uniform draws, and Model
Garden's sampler (TF's sample_distorted_bounding_box, the pipeline's other sampler)
is told apart from it by the same test. With a torch interpreter (ZOO_TORCH_PYTHON;
tests/torch_python.py), the same against torchvision itself: its get_params with the
draws injected, and its own generator's boxes.

The distribution test: two-sample Kolmogorov-Smirnov tests, one per statistic (the
crop's area fraction, its log aspect ratio, its height and width as fractions of the
image's, and its row and column offsets as fractions (i + 1/2) / (H - h + 1)), each at
alpha = 0.001, on N draws a sampler at 375 x 500 (the benchmark's typical image). Its
power against Model Garden's sampler,
from the area fraction alone: the two samplers' area fractions are D = 0.128 apart in
the KS distance (mean 0.371 against 0.434; 200,000 draws each, so D is within +-0.009
with probability 0.998 and D >= 0.119). With equal samples of N, the test rejects when
the empirical distance exceeds c sqrt(2 / N), c = sqrt(ln(2 / alpha) / 2) = 1.95; by
the Dvoretzky-Kiefer-Wolfowitz inequality (Massart's constant), each empirical CDF is
within eps = sqrt(ln(400) / (2 N)) of its own with probability >= 0.995, so the
empirical distance exceeds D - 2 eps with probability >= 0.99, and the power is >= 0.99
once D >= (c sqrt(2) + 2 sqrt(ln(400) / 2)) / sqrt(N) = 6.22 / sqrt(N): N >= 2,731 at
D = 0.119. N = 4,000 here (`required_draws` checks the arithmetic). (Their log aspect
ratios differ by D = 0.010 only: not a statistic this N tells apart.) Model Garden's
offsets never reach the bottom or right edge unless the box spans the image; the test
counts the boxes that do (torchvision's: 3.2%).
"""

import json
import math
import os
import subprocess

from absl.testing import parameterized
import numpy as np
from scipy import stats
import tensorflow as tf

from recipes.data import augment
from recipes.data import pipeline
from tests import torch_python

ALPHA = 0.001
DRAWS = 4000
# Model Garden's against torchvision's area fraction at 375 x 500, (0.08, 1), (3/4, 4/3):
# the KS distance's lower bound from 200,000 draws each (0.128 - 0.009).
MODEL_GARDEN_DISTANCE = 0.119
HEIGHT, WIDTH = 375, 500
SCALE, RATIO = (0.08, 1.0), (3 / 4, 4 / 3)


# -- torchvision's get_params, transcribed ----------------------------------------------


def reference_box(height, width, scale, ratio, fractions, log_ratios, offsets):
  """torchvision's RandomResizedCrop.get_params (transforms.py), line by line, with
  `torch.empty(1).uniform_(scale[0], scale[1]).item()` the k-th of `fractions`,
  `torch.empty(1).uniform_(log_ratio[0], log_ratio[1])` the k-th of `log_ratios` (both
  float32, as torch draws them) and `torch.randint(0, n, size=(1,))` floor(u n) of the
  next of `offsets`."""
  del scale  # in the draws
  area = height * width
  offsets = list(offsets)
  for k in range(10):
    target_area = area * float(fractions[k])
    aspect_ratio = float(np.exp(np.float32(log_ratios[k])))  # torch.exp of a float32
    w = int(round(math.sqrt(target_area * aspect_ratio)))
    h = int(round(math.sqrt(target_area / aspect_ratio)))
    if 0 < w <= width and 0 < h <= height:
      i = math.floor(offsets.pop(0) * (height - h + 1))
      j = math.floor(offsets.pop(0) * (width - w + 1))
      return i, j, h, w
  in_ratio = float(width) / float(height)
  if in_ratio < min(ratio):
    w = width
    h = int(round(w / min(ratio)))
  elif in_ratio > max(ratio):
    h = height
    w = int(round(h * max(ratio)))
  else:  # whole image
    w = width
    h = height
  i = (height - h) // 2
  j = (width - w) // 2
  return i, j, h, w


def reference_draws(rng, scale, ratio):
  """One get_params' draws, as torch makes them: float32 uniforms in the float32
  bounds (`torch.log(torch.tensor(ratio))` is float32), two offsets' u."""
  low, high = np.float32(scale[0]), np.float32(scale[1])
  log_low, log_high = np.log(np.asarray(ratio, np.float32))
  fractions = rng.uniform(low, high, 10).astype(np.float32)
  log_ratios = rng.uniform(log_low, log_high, 10).astype(np.float32)
  return fractions, log_ratios, rng.uniform(0, 1, 2)


def reference_boxes(rng, n, height=HEIGHT, width=WIDTH, scale=SCALE, ratio=RATIO):
  return np.array([reference_box(height, width, scale, ratio, *reference_draws(rng, scale, ratio))
                   for _ in range(n)])


# -- ours -------------------------------------------------------------------------------


def settings(sampler, scale=SCALE, ratio=RATIO):
  return pipeline.InputPipeline(random_resized_crop=scale, random_resized_crop_ratio=ratio,
                                random_resized_crop_sampler=sampler)


def boxes_of_draws(height, width, ratio, fractions, log_ratios, offsets):
  """augment.torchvision_box_of_draws on a batch of draws: [n, 4] (i, j, h, w)."""
  ds = tf.data.Dataset.from_tensor_slices((fractions, log_ratios, offsets)).map(
      lambda f, r, o: augment.torchvision_box_of_draws(
          tf.constant([height, width, 3]), ratio, f, r, o))
  return np.array([[b[0], b[1], e[0], e[1]] for b, e in ds.as_numpy_iterator()])


def sampled_boxes(sampler, n, salt=0, height=HEIGHT, width=WIDTH):
  """The pipeline's boxes for `sampler` at seeds (salt, 0..n-1): [n, 4] (i, j, h, w)."""
  p = settings(sampler)

  def box(k):
    begin, extent = augment.crop_box(p, tf.constant([height, width, 3]),
                                     tf.stack([tf.constant(salt, tf.int64), k]))
    return tf.stack([begin[0], begin[1], extent[0], extent[1]])

  return np.concatenate(list(tf.data.Dataset.range(n).map(box).batch(1000).as_numpy_iterator()))


def statistics(boxes, height=HEIGHT, width=WIDTH):
  """{name: values}: area fraction, log aspect ratio (w / h), height and width
  fractions (which tell apart draws of area and aspect that are not independent),
  offsets' fractions."""
  i, j, h, w = (boxes[:, k].astype(np.float64) for k in range(4))
  return {"area": h * w / (height * width), "log_aspect": np.log(w / h),
          "height": h / height, "width": w / width,
          "row": (i + 0.5) / (height - h + 1), "column": (j + 0.5) / (width - w + 1)}


def edge_reached(boxes, height=HEIGHT, width=WIDTH):
  """Boxes that reach the bottom or right edge without spanning the image's height
  or width."""
  i, j, h, w = boxes.T
  return int(np.sum(((i + h == height) & (h < height)) | ((j + w == width) & (w < width))))


def two_proportion_p(a, b, n):
  """The two-sided p-value of a z-test that a / n and b / n estimate one proportion."""
  pooled = (a + b) / (2 * n)
  z = (a - b) / n / math.sqrt(2 * pooled * (1 - pooled) / n)
  return 2 * stats.norm.sf(abs(z))


def ks_p_values(a, b):
  sa, sb = statistics(a), statistics(b)
  return {name: stats.ks_2samp(sa[name], sb[name]).pvalue for name in sa}


def required_draws(distance, alpha=ALPHA, power=0.99):
  """Draws a sampler for a two-sample KS test at `alpha` to reject with probability
  >= `power` two distributions `distance` apart (the module docstring's bound)."""
  c = math.sqrt(math.log(2 / alpha) / 2)
  eps_factor = math.sqrt(math.log(2 / ((1 - power) / 2)) / 2)
  return math.ceil(((c * math.sqrt(2) + 2 * eps_factor) / distance) ** 2)


# Images and settings for the draw-by-draw comparison: typical, square, long (the
# fallbacks: no attempt fits a 13 x 400 or 400 x 13 image at area >= 8%), the whole
# area (a fallback within the ratios unless an attempt draws 360 / 300 nearly), tiny.
CASES = ((375, 500, SCALE, RATIO), (500, 375, SCALE, RATIO), (64, 64, (0.25, 0.25), (1.0, 1.0)),
         (13, 400, SCALE, RATIO), (400, 13, SCALE, RATIO), (300, 360, (1.0, 1.0), RATIO),
         (30, 31, (0.9, 1.0), RATIO), (3, 2, SCALE, (0.5, 2.0)), (1, 1, SCALE, RATIO),
         (100, 120, (0.5, 1.0), (1.2, 1.2)))


def branch(height, width, ratio, fractions, log_ratios):
  """Which attempt get_params keeps (0-9), or which fallback: "narrower" (the image's
  ratio below the ratios), "wider", "within"."""
  for k, (f, r) in enumerate(zip(fractions, log_ratios)):
    target, aspect = height * width * float(f), float(np.exp(r))
    if (0 < round(math.sqrt(target * aspect)) <= width
        and 0 < round(math.sqrt(target / aspect)) <= height):
      return k
  in_ratio = width / height
  return "narrower" if in_ratio < min(ratio) else "wider" if in_ratio > max(ratio) else "within"


def injected_cases(count=150, seed=0):
  """[(height, width, scale, ratio, fractions, log_ratios, offsets)] over CASES."""
  rng = np.random.default_rng(seed)
  return [(h, w, scale, ratio) + reference_draws(rng, scale, ratio)
          for h, w, scale, ratio in CASES for _ in range(count)]


def ours_of_cases(cases):
  got = []
  for h, w, scale, ratio in CASES:
    mine = [c for c in cases if c[:4] == (h, w, scale, ratio)]
    got.extend(boxes_of_draws(h, w, ratio, *(np.stack([c[k] for c in mine]) for k in (4, 5, 6))))
  return np.array(got)


def run_torchvision(request):
  """torchvision_get_params.py's answer to `request` from the torch interpreter."""
  python = torch_python.interpreter()
  script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "torchvision_get_params.py")
  done = subprocess.run([python, script], input=json.dumps(request), capture_output=True,
                        text=True, check=False, timeout=120)
  if done.returncode:
    raise AssertionError(f"{python} {script} failed:\n{done.stderr[-3000:]}")
  return json.loads(done.stdout)


class TorchvisionCropTest(tf.test.TestCase, parameterized.TestCase):

  def test_the_same_draws_give_torchvisions_box(self):
    cases = injected_cases()
    self.assertAllEqual(ours_of_cases(cases), [reference_box(*c) for c in cases])
    # The cases reach every branch: the first attempt kept, a later one, and each
    # fallback (the image narrower than the ratios, wider, within them).
    self.assertContainsSubset({0, 1, "narrower", "wider", "within"},
                              {branch(*c[:2], c[3], *c[4:6]) for c in cases})

  def test_draws_are_float32_uniforms_in_the_bounds(self):
    fractions, log_ratios, offsets = (t.numpy() for t in augment.torchvision_draws(
        SCALE, RATIO, tf.constant([1, 2], tf.int64)))
    self.assertEqual((fractions.dtype, log_ratios.dtype), (np.float32, np.float32))
    self.assertEqual((fractions.shape, log_ratios.shape, offsets.shape), ((10,), (10,), (2,)))
    self.assertAllInRange(fractions, np.float32(0.08), 1.0)
    self.assertAllInRange(log_ratios, np.log(np.float32(0.75)), np.log(np.float32(4 / 3)))
    self.assertAllInRange(offsets, 0.0, 1.0)

  def test_the_sample_size_has_the_stated_power(self):
    self.assertLessEqual(required_draws(MODEL_GARDEN_DISTANCE), DRAWS)
    self.assertEqual(required_draws(0.119), 2731)

  def test_distribution_is_torchvisions_and_model_gardens_is_not(self):
    reference = reference_boxes(np.random.default_rng(1), DRAWS)
    ours = ks_p_values(sampled_boxes("torchvision", DRAWS), reference)
    self.assertTrue(all(p > ALPHA for p in ours.values()), msg=f"p-values {ours}")
    model_garden = ks_p_values(sampled_boxes("model_garden", DRAWS), reference)
    self.assertLess(model_garden["area"], ALPHA, msg=f"p-values {model_garden}")
    # Its offsets stop short of the bottom and right edges (a box reaches them only
    # when it spans the image); torchvision's reach them as often as uniform integers
    # in [0, H - h] do (a two-proportion z-test at ALPHA).
    reached = {name: edge_reached(boxes) for name, boxes in (
        ("reference", reference), ("torchvision", sampled_boxes("torchvision", DRAWS)),
        ("model_garden", sampled_boxes("model_garden", DRAWS)))}
    self.assertEqual(reached["model_garden"], 0)
    self.assertGreater(reached["reference"], 100)
    self.assertGreater(two_proportion_p(reached["torchvision"], reached["reference"], DRAWS),
                       ALPHA, msg=f"edge reached {reached}")

  def test_boxes_are_inside_the_image_and_depend_on_the_seed_alone(self):
    boxes = sampled_boxes("torchvision", 200, salt=5)
    i, j, h, w = boxes.T
    self.assertAllGreaterEqual(np.concatenate([i, j]), 0)
    self.assertAllGreater(np.concatenate([h, w]), 0)
    self.assertAllLessEqual(i + h, HEIGHT)
    self.assertAllLessEqual(j + w, WIDTH)
    self.assertAllEqual(boxes, sampled_boxes("torchvision", 200, salt=5))  # stateless
    self.assertNotAllEqual(boxes, sampled_boxes("torchvision", 200, salt=6))

  def test_bad_sampler_names_itself(self):
    with self.assertRaisesRegex(ValueError, "random_resized_crop_sampler='pytorch'; use one of "
                                "model_garden, torchvision"):
      augment.check(settings("pytorch").replace(image_size=8))

  # -- against torchvision itself (ZOO_TORCH_PYTHON) ------------------------------------

  def test_torchvision_itself_gives_the_same_box_for_the_same_draws(self):
    torch_python.skip_unless_available(self)
    cases = injected_cases(count=40, seed=2)
    request = {"injected": [dict(height=c[0], width=c[1], scale=list(c[2]), ratio=list(c[3]),
                                 fractions=c[4].tolist(), log_ratios=c[5].tolist(),
                                 offsets=c[6].tolist()) for c in cases]}
    got = np.array(run_torchvision(request)["injected"])
    self.assertAllEqual(ours_of_cases(cases), got)
    self.assertAllEqual([reference_box(*c) for c in cases], got)

  def test_torchvisions_own_draws_are_ours_in_distribution(self):
    torch_python.skip_unless_available(self)
    request = {"sampled": [dict(height=HEIGHT, width=WIDTH, scale=list(SCALE),
                                ratio=list(RATIO), n=DRAWS, seed=0)]}
    theirs = np.array(run_torchvision(request)["sampled"][0])
    ours = ks_p_values(sampled_boxes("torchvision", DRAWS, salt=3), theirs)
    self.assertTrue(all(p > ALPHA for p in ours.values()), msg=f"p-values {ours}")
    model_garden = ks_p_values(sampled_boxes("model_garden", DRAWS, salt=3), theirs)
    self.assertLess(model_garden["area"], ALPHA, msg=f"p-values {model_garden}")


if __name__ == "__main__":
  tf.test.main()
