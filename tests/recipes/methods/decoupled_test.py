"""Decoupled training (Kang et al. 2020) end to end, in real processes: the tiny recipe
runs both stages in one command (stage 1, then cRT); stage 2 must start from stage 1's
final weights (backbone identical, head re-initialised as PyTorch's nn.Linear), change
only the head, and stage 2 alone from the stage-1 checkpoint must reach the same
weights and metrics. LWS and the tau-normalised classifier, alone from the same
checkpoint: LWS changes only its scales; tau-norm's head is the stage-1 head
tau-normalised (bias 0), tau chosen on the validation split.

A SIGTERM in stage 2 saves there; rerunning the command leaves stage 1 as it is and
ends stage 2 as the uninterrupted run did.

Measured here (2 shared CPU cores): the one command ~25-50 s, each stage 2 alone
~20-25 s; the whole test ~2.5-4 min.
"""

import json
import os
import shutil
import tempfile

import numpy as np
import tensorflow as tf

from tests.recipes import cli
from tricks import tau_norm
from zoo import decoupled as decoupled_zoo

TINY = "--gin_file=tests/recipes/configs/nfnet_long_tail_decoupled_tiny.gin"
VALUE = "/.ATTRIBUTES/VARIABLE_VALUE"


def weights(path):
  """{key: value} of the model variables of checkpoint `path`."""
  reader = tf.train.load_checkpoint(path)
  return {n: reader.get_tensor(n) for n in reader.get_variable_to_shape_map()
          if n.startswith("model/") and n.endswith(VALUE)}


def head_keys(values):
  """The keys of the model's last weighted layer (the "logits" head) of stage 1."""
  last = max(int(k.split("/")[1].split("-")[1]) for k in values)
  return {k for k in values if k.startswith(f"model/layer_with_weights-{last}/")}


def checkpoints(stage_dir):
  """The checkpoint prefixes of a run, in step order."""
  names = [n[:-len(".index")] for n in os.listdir(os.path.join(stage_dir, "checkpoints"))
           if n.endswith(".index")]
  return [os.path.join(stage_dir, "checkpoints", n)
          for n in sorted(names, key=lambda n: int(n.split("-")[1]))]


def metrics(stage_dir):
  with open(os.path.join(stage_dir, "metrics.json")) as f:
    return json.load(f)


class DecoupledTest(tf.test.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.tmp = tempfile.mkdtemp(prefix="decoupled_test-")
    cls.both = os.path.join(cls.tmp, "both")
    cls.result = cli.finish(cli.spawn(TINY, f"--model_dir={cls.both}"))

  @classmethod
  def tearDownClass(cls):
    shutil.rmtree(cls.tmp, ignore_errors=True)
    super().tearDownClass()

  def alone(self, name, *args):
    """Stage 2 alone from stage 1's final checkpoint; its stage-2 directory."""
    model_dir = os.path.join(self.tmp, name)
    result = cli.finish(cli.spawn(
        TINY, f"--model_dir={model_dir}", *args,
        f"--gin_bindings=decoupled.stage1_checkpoint = '{self.stage1_final()}'"))
    self.assertEqual(result.returncode, 0, result.stderr[-3000:])
    self.assertFalse(os.path.exists(os.path.join(model_dir, "stage1")))
    return os.path.join(model_dir, "stage2")

  def stage1_final(self):
    return checkpoints(os.path.join(self.both, "stage1"))[-1]

  def test_one_command_runs_both_stages_and_crt_retrains_only_a_fresh_head(self):
    self.assertEqual(self.result.returncode, 0, self.result.stderr[-3000:])
    stage1, stage2 = (os.path.join(self.both, s) for s in ("stage1", "stage2"))
    with open(os.path.join(self.both, "decoupled.json")) as f:
      summary = json.load(f)
    self.assertEqual(summary["stage1_checkpoint"], self.stage1_final())
    self.assertEqual(metrics(stage1)["epochs_trained"], 2)
    self.assertEqual(metrics(stage2)["epochs_trained"], 1)
    self.assertEqual(summary["stage2"]["top1"], metrics(stage2)["top1"])
    final1 = weights(self.stage1_final())
    start2, *_, final2 = (weights(p) for p in checkpoints(stage2))
    self.assertEqual(set(final1), set(start2))
    self.assertEqual(set(final1), set(final2))
    head = head_keys(final1)
    self.assertLen(head, 2)  # kernel and bias
    for key in set(final1) - head:  # the backbone: stage 1's, untouched by stage 2
      self.assertAllEqual(start2[key], final1[key], msg=key)
      self.assertAllEqual(final2[key], final1[key], msg=key)
    kernel_key = next(k for k in head if "/kernel/" in k)
    bias_key = next(k for k in head if "/bias/" in k)
    want_kernel, want_bias = decoupled_zoo.pytorch_linear_init(final1[kernel_key].shape,
                                                               seed=0)  # SEED = 0
    self.assertAllEqual(start2[kernel_key], want_kernel)  # re-initialised, not stage 1's
    self.assertAllEqual(start2[bias_key], want_bias)
    bound = 1 / np.sqrt(final1[kernel_key].shape[0])
    self.assertLessEqual(np.abs(want_kernel).max(), bound)
    for key in head:  # and re-trained
      self.assertNotAllClose(final2[key], start2[key])
    # Stage 2 trained on class-balanced batches, with the stage2/ settings.
    with open(os.path.join(stage2, "operative_config.gin")) as f:
      config = " ".join(f.read().replace("\\\n", " ").split())  # Gin wraps long lines
    self.assertIn("stage2/Sampler.kind = 'class'", config)
    self.assertIn(f"stage2/load_stage1.checkpoint = '{self.stage1_final()}'", config)

  def test_stage2_alone_matches_the_one_command(self):
    self.assertEqual(self.result.returncode, 0, self.result.stderr[-3000:])
    one = os.path.join(self.both, "stage2")
    alone = self.alone("crt_alone")
    one_weights, alone_weights = (weights(checkpoints(d)[-1]) for d in (one, alone))
    self.assertEqual(set(one_weights), set(alone_weights))
    for key in one_weights:
      self.assertAllEqual(one_weights[key], alone_weights[key], msg=key)
    for key in ("top1", "balanced_accuracy", "per_class_accuracy", "final_train_loss"):
      self.assertEqual(metrics(one)[key], metrics(alone)[key], msg=key)

  def test_sigterm_in_stage2_resumes_stage2_exactly(self):
    self.assertEqual(self.result.returncode, 0, self.result.stderr[-3000:])
    model_dir = os.path.join(self.tmp, "preempted")
    # Stage 1 is 14 steps (2 epochs of 7): loop 17 is stage 2's third step.
    result = cli.finish(cli.spawn("term", "17", "--", TINY, f"--model_dir={model_dir}",
                                  module="tests.recipes.interrupt"))
    self.assertEqual(result.returncode, 143, result.stderr[-3000:])
    self.assertRegex(result.said[-1], r"^stopped: preempted \(SIGTERM\) at epoch 1, step 3 "
                     r"of 7: saved .*stage2/checkpoints/ckpt-3")
    self.assertFalse(os.path.exists(os.path.join(model_dir, "stage2", "metrics.json")))
    resumed = cli.finish(cli.spawn(TINY, f"--model_dir={model_dir}"))
    self.assertEqual(resumed.returncode, 0, resumed.stderr[-3000:])
    self.assertIn("stage1 holds a finished run", resumed.stdout)
    self.assertIn("Resumed from", resumed.stdout)
    one = os.path.join(self.both, "stage2")
    again = os.path.join(model_dir, "stage2")
    one_weights, again_weights = (weights(checkpoints(d)[-1]) for d in (one, again))
    for key in one_weights:
      self.assertAllEqual(one_weights[key], again_weights[key], msg=key)
    for key in ("top1", "balanced_accuracy", "final_train_loss"):
      self.assertEqual(metrics(one)[key], metrics(again)[key], msg=key)

  def test_lws_trains_only_the_scales(self):
    self.assertEqual(self.result.returncode, 0, self.result.stderr[-3000:])
    stage2 = self.alone("lws", "--gin_file=recipes/configs/runs/decoupled_lws.gin",
                        "--gin_bindings=STAGE2_EPOCHS = 1")
    final1 = weights(self.stage1_final())
    start2, *_, final2 = (weights(p) for p in checkpoints(stage2))
    scales = [k for k in final2 if "/scales/" in k]
    self.assertLen(scales, 1)
    self.assertEqual(set(final2) - set(final1), set(scales))
    for key in final1:  # backbone and classifier: stage 1's
      self.assertAllEqual(final2[key], final1[key], msg=key)
    self.assertAllEqual(start2[scales[0]], np.ones(10))
    self.assertNotAllClose(final2[scales[0]], np.ones(10))

  def test_weight_balancing_retrains_stage1s_head_inside_the_max_norm_ball(self):
    """Alshammari et al.'s stage 2: stage 1's head (not re-initialised) re-trained on the
    frozen backbone; after training (projected at each epoch's end, as their code) every
    class vector's norm is at most the radius min + 0.1 (max - min) of stage 1's
    per-class norms (their setPerLayerThresh)."""
    self.assertEqual(self.result.returncode, 0, self.result.stderr[-3000:])
    # Two epochs: their per-epoch cosine trains the last epoch at lr 0.
    stage2 = self.alone("wb", "--gin_file=recipes/configs/runs/decoupled_wb.gin",
                        "--gin_bindings=STAGE2_EPOCHS = 2")
    final1 = weights(self.stage1_final())
    start2, *_, final2 = (weights(p) for p in checkpoints(stage2))
    self.assertEqual(set(final2), set(final1))
    head = head_keys(final1)
    kernel_key = next(k for k in head if "/kernel/" in k)
    for key in final1:
      self.assertAllEqual(start2[key], final1[key], msg=key)  # stage 1's, head included
      if key not in head:
        self.assertAllEqual(final2[key], final1[key], msg=key)
    for key in head:
      self.assertNotAllClose(final2[key], final1[key])
    norms1 = np.linalg.norm(final1[kernel_key].astype(np.float64), axis=0)
    radius = norms1.min() + 0.1 * (norms1.max() - norms1.min())
    norms2 = np.linalg.norm(final2[kernel_key].astype(np.float64), axis=0)
    self.assertAllLessEqual(norms2, radius * (1 + 1e-5))
    self.assertGreater(norms1.max(), radius * (1 + 1e-3))  # the ball bit
    with open(os.path.join(stage2, "operative_config.gin")) as f:
      config = " ".join(f.read().replace("\\\n", " ").split())
    self.assertIn("STAGE2_L2 = 0.1", config)
    self.assertIn("stage2/Optimization.l2 = %STAGE2_L2", config)
    self.assertIn("stage2/Optimization.weight_constraints = [@tricks.MaxNorm()]", config)
    self.assertIn("WB_MAX_NORM_EVERY = 'epoch'", config)  # their once-an-epoch PGD
    self.assertIn("stage2/class_balanced.loss = 'softmax_bce'", config)

  def test_tau_norm_rescales_stage1s_head_without_training(self):
    self.assertEqual(self.result.returncode, 0, self.result.stderr[-3000:])
    stage2 = self.alone("tau", "--gin_file=recipes/configs/runs/decoupled_tau_norm.gin")
    report = metrics(stage2)
    self.assertEqual(report["epochs_trained"], 0)
    self.assertEqual(report["tau_norm"]["chosen_on"], "validation")
    tau = report["tau_norm"]["tau"]
    sweep = report["tau_norm"]["validation_balanced_accuracy"]
    self.assertLen(sweep, len(tau_norm.GRID))
    self.assertEqual(sweep[f"{tau:g}"], max(sweep.values()))
    self.assertGreater(max(sweep.values()), min(sweep.values()))  # tau matters here
    # The sweep (features through the head, numpy) agrees with the trainer's own
    # evaluation of the tau-normalised model on the validation split.
    self.assertAlmostEqual(report["final_validation"]["balanced_accuracy"],
                           sweep[f"{tau:g}"])
    final1 = weights(self.stage1_final())
    [saved] = [weights(p) for p in checkpoints(stage2)]
    self.assertEqual(set(saved), set(final1))
    head = head_keys(final1)
    for key in final1:
      if key in head and "/kernel/" in key:
        kernel = final1[key].astype(np.float64)
        want = kernel / np.linalg.norm(kernel, axis=0) ** tau
        self.assertAllClose(saved[key], want, rtol=1e-6)
      elif key in head:
        self.assertAllEqual(saved[key], np.zeros_like(final1[key]))
      else:
        self.assertAllEqual(saved[key], final1[key], msg=key)

  def test_posthoc_shifts_stage1s_bias_by_tau_log_priors(self):
    """Menon et al.'s eq. (9): logits f(x) - tau log(pi), pi = n / sum(n) of the
    training counts, tau the grid's best validation balanced accuracy (ties: the
    smallest)."""
    self.assertEqual(self.result.returncode, 0, self.result.stderr[-3000:])
    stage2 = self.alone("posthoc", "--gin_file=recipes/configs/runs/decoupled_posthoc.gin")
    report = metrics(stage2)
    self.assertEqual(report["epochs_trained"], 0)
    tau = report["posthoc"]["tau"]
    sweep = report["posthoc"]["validation_balanced_accuracy"]
    self.assertLen(sweep, 41)  # 0, 0.05, ..., 2
    best = max(sweep.values())
    self.assertEqual(tau, min(float(k) for k, v in sweep.items() if v == best))
    self.assertAlmostEqual(report["final_validation"]["balanced_accuracy"], best)
    counts = np.asarray(report["train_class_counts"], np.float64)
    final1 = weights(self.stage1_final())
    [saved] = [weights(p) for p in checkpoints(stage2)]
    head = head_keys(final1)
    for key in final1:
      if key in head and "/bias/" in key:
        want = final1[key] - tau * np.log(counts / counts.sum())
        self.assertAllClose(saved[key], want, rtol=1e-6, atol=1e-6)
      else:
        self.assertAllEqual(saved[key], final1[key], msg=key)

  def test_stage2_from_stage1s_best_checkpoint(self):
    model_dir = os.path.join(self.tmp, "from_best")
    best = ["--gin_bindings=decoupled.stage1_weights = 'best'"]
    refused = cli.finish(cli.spawn(TINY, f"--model_dir={model_dir}", *best))
    self.assertEqual(refused.returncode, 2, refused.stderr[-2000:])
    self.assertIn("needs stage 1 to keep its best checkpoint", refused.said[-1])
    self.assertFalse(os.path.exists(os.path.join(model_dir, "stage1")))
    result = cli.finish(cli.spawn(
        TINY, f"--model_dir={model_dir}", *best,
        "--gin_bindings=stage1/Runtime.best_metric = 'balanced_accuracy'"))
    self.assertEqual(result.returncode, 0, result.stderr[-3000:])
    with open(os.path.join(model_dir, "decoupled.json")) as f:
      start = json.load(f)["stage1_checkpoint"]
    self.assertEqual(os.path.dirname(start), os.path.join(model_dir, "stage1", "best"))
    bad = cli.finish(cli.spawn(TINY, f"--model_dir={model_dir}_bad",
                               "--gin_bindings=decoupled.stage1_weights = 'newest'"))
    self.assertEqual(bad.returncode, 2, bad.stderr[-2000:])
    self.assertIn("decoupled.stage1_weights='newest'; use 'final' or 'best'", bad.said[-1])

  def test_stage2_without_stage1s_weights_is_refused(self):
    model_dir = os.path.join(self.tmp, "refused")
    result = cli.finish(cli.spawn(
        TINY, f"--model_dir={model_dir}",
        "--gin_bindings=stage2/Task.model_transforms = [@zoo.crt]",
        f"--gin_bindings=decoupled.stage1_checkpoint = '{model_dir}/nowhere'"))
    self.assertEqual(result.returncode, 2, result.stderr[-2000:])
    self.assertIn("decoupled.stage1_checkpoint", result.said[-1])
    result = cli.finish(cli.spawn(
        TINY, f"--model_dir={model_dir}",
        "--gin_bindings=stage2/Task.model_transforms = [@zoo.crt]",
        f"--gin_bindings=decoupled.stage1_checkpoint = '{self.stage1_final()}'"))
    self.assertEqual(result.returncode, 2, result.stderr[-2000:])
    self.assertIn("@zoo.load_stage1", result.said[-1])
    self.assertFalse(os.path.exists(os.path.join(model_dir, "stage2")))


if __name__ == "__main__":
  tf.test.main()
