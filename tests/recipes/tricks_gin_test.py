"""Every trick switched on from Gin alone, on the flagship recipe's tiny configuration:
training runs, the training loss falls, and a rerun on the same model_dir restores the
checkpointed state exactly (it trains nothing and reports the same metrics)."""

import ast
import os

from absl.testing import parameterized
import gin
import numpy as np
import tensorflow as tf
import tf_keras

from recipes import strategies
from recipes import train
from recipes import trainer
from tests.recipes import summaries

TINY = "tests/recipes/configs/nfnet_long_tail_tiny.gin"  # the flagship, 2 epochs at 16px

# A BatchNorm model for the tricks that rewrite BN layers (NFNets have none).
RESNET = ["include 'recipes/configs/models/resnet32_cifar.gin'", "NUM_CLASSES = 10",
          "IMAGE_SIZE = 16", "zoo.build.name = 'resnet20_cifar'"]

# trick -> Gin bindings that switch it on (on top of TINY).
TRICKS = {
    "agc": ["Optimization.gradient_transforms = [@AdaptiveGradClip()]",
            "AdaptiveGradClip.clipping = 0.01"],
    "cyclical_lr": ["Optimization.learning_rate = @cyclical",
                    "cyclical.base_lr = 0.01", "cyclical.max_lr = 0.1",
                    "cyclical.step_size_epochs = 1", "cyclical.mode = 'triangular2'"],
    "logit_adjustment": ["Task.loss = @logit_adjusted", "LOGIT_ADJUST_TAU = 1.5"],
    "label_smoothing": ["logit_adjusted.label_smoothing = 0.1"],
    "weight_ema": ["tf_keras.optimizers.SGD.use_ema = True",
                   "tf_keras.optimizers.SGD.ema_momentum = 0.9"],
    "adafactor": ["Optimization.optimizer = @Adafactor",
                  "Optimization.weight_decay_exclude = ()",
                  "warmup_cosine.peak_lr = 0.05"],
    "sm3": ["Optimization.optimizer = @SM3",
            "Optimization.weight_decay_exclude = ()", "SM3.momentum = 0.9"],
    # PyTorch's SGD, decay coupled as theirs (runs/pytorch_sgd.gin's settings).
    "sgd_torch": ["Optimization.optimizer = @SGDTorch", "SGDTorch.momentum = 0.9",
                  "Optimization.l2 = 5e-4", "Optimization.weight_decay_exclude = ()"],
    "data_echoing": ["InputPipeline.echo_factor = 2.0",
                     "InputPipeline.echo_placement = 'after_augmentation'"],
    "mixed_bfloat16": ["Runtime.mixed_precision = 'mixed_bfloat16'"],
    "mixed_float16": ["Runtime.mixed_precision = 'mixed_float16'"],
    "recompute": ["Task.model_transforms = [@recompute]",
                  "recompute.every = 2"],
    "extended_bn": ["Task.model_transforms = [@swap_batch_norm]"]
                   + RESNET,
    "acnet": ["Task.model_transforms = [@acnet_convert]"] + RESNET,
    "mixup": ["InputPipeline.mixup_alpha = 0.2"],
    "remix": ["InputPipeline.remix = @Remix()", "Remix.kappa = 3.0", "Remix.tau = 0.5",
              "Task.loss = @balanced_softmax"],
    "sam": ["Optimization.sam = @SAM()", "SAM.rho = 0.1"],
    "sam_xla": ["Optimization.sam = @SAM()", "SAM.rho = 0.1", "Runtime.jit_compile = True"],
    # ImbSAM under float16 loss scaling (unscaled gradients perturb; the loss scaler
    # skips an overflowing step).
    "imbsam": ["Optimization.sam = @ImbSAM()", "ImbSAM.rho = 0.1", "ImbSAM.eta = 20",
               "Runtime.mixed_precision = 'mixed_float16'"],
    "max_norm": ["Optimization.weight_constraints = [@MaxNorm()]", "MaxNorm.thresh = 1.0",
                 "MaxNorm.relative = False"],
    "cutmix": ["InputPipeline.cutmix_alpha = 1.0", "InputPipeline.mix_prob = 0.5"],
    "randaugment": ["InputPipeline.randaugment = (2, 5)"],
    "l2": ["Optimization.l2 = 5e-4", "tf_keras.optimizers.SGD.weight_decay = None"],
    "xla": ["Runtime.jit_compile = True"],
    # Per-layer-group rates, under float16 loss scaling (the LossScaleOptimizer path).
    "layer_lr": ["Optimization.layer_learning_rates = {'logits': 1.0, '.*': 0.3}",
                 "Runtime.mixed_precision = 'mixed_float16'"],
    # Layer-wise rate decay over NFNet-nano's stem, 4 blocks and head.
    "layer_decay": ["Optimization.layer_decay = 0.7"],
    # A grey input: the stem summed over colour, the pipeline feeding the luma.
    "grey_input": ["zoo.build.input_channels = 1"],
}

BASE = ["EPOCHS = 3", "warmup_cosine.warmup_epochs = 0", "LEARNING_RATE = 0.05",
        "Runtime.eval_every_epochs = 0"]


def literal(text):
  """A Gin value as Python compares it (numbers, strings, tuples, dicts), else its text
  (references such as `@AdaptiveGradClip()`)."""
  try:
    return ast.literal_eval(text)
  except (ValueError, SyntaxError):
    return text.strip()


def epoch_losses(model_dir):
  """The per-epoch training loss the trainer wrote to TensorBoard."""
  losses = summaries.scalars(os.path.join(model_dir, "train"), "loss")
  return [losses[step] for step in sorted(losses)]


class TricksGinTest(tf.test.TestCase, parameterized.TestCase):

  def tearDown(self):
    gin.clear_config()
    tf_keras.mixed_precision.set_global_policy("float32")
    tf_keras.backend.clear_session()
    super().tearDown()

  def run_recipe(self, model_dir, bindings):
    gin.clear_config()
    tf_keras.backend.clear_session()
    train.parse_config([TINY], BASE + bindings)
    return trainer.train_and_evaluate(model_dir, strategies.make_strategy("one_device"))

  @parameterized.named_parameters(*sorted(TRICKS.items()))
  def test_trick_trains_and_round_trips(self, bindings):
    model_dir = os.path.join(self.get_temp_dir(), "run")
    first = self.run_recipe(model_dir, bindings)
    losses = epoch_losses(model_dir)
    self.assertLen(losses, 3)
    self.assertTrue(np.all(np.isfinite(losses)), msg=losses)
    self.assertLess(losses[-1], losses[0], msg=losses)
    # The operative config records each of the trick's bindings with its value.
    with open(os.path.join(model_dir, "operative_config.gin")) as f:
      operative = f.read()
    recorded = dict(line.split(" = ", 1) for line in operative.splitlines()
                    if " = " in line and not line.startswith("#"))
    for binding in bindings:
      if binding.startswith("include"):
        continue
      name, value = (part.strip() for part in binding.split("=", 1))
      short = ".".join(name.split(".")[-2:])  # tf_keras.optimizers.SGD.x -> SGD.x
      self.assertIn(short, recorded, msg=binding)
      self.assertEqual(literal(recorded[short]), literal(value), msg=binding)
    # Without its report the run is unfinished: restored at epoch 3, nothing left to
    # train, evaluated again from the checkpoint.
    os.remove(os.path.join(model_dir, "metrics.json"))
    again = self.run_recipe(model_dir, bindings)
    for key in ("top1", "balanced_accuracy", "per_class_accuracy", "final_train_loss"):
      self.assertEqual(again[key], first[key], msg=key)


if __name__ == "__main__":
  tf.test.main()
