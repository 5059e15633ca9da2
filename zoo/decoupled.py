"""Stage-2 model transforms of decoupled training (Kang et al. 2020, "Decoupling
Representation and Classifier for Long-Tailed Recognition", arXiv:1910.09217, Sec. 4),
for `Task.model_transforms` of a second stage that starts from a stage-1 checkpoint.

- `load_stage1`: every weight of the stage-1 model (head included) from the trainer's
  checkpoint `checkpoint` (finetune.init_from_checkpoint, scope "all"). The decoupled
  runner (recipes/methods/decoupled.py) binds `stage2/zoo.load_stage1.checkpoint`; list it
  first (after any transform stage 1 also applied, e.g. `@swap_batch_norm`).
- `crt`: classifier re-training: the head re-initialised, everything else frozen
  (BatchNorm in inference mode). Their code (facebookresearch/classifier-balancing,
  run_networks.py `load_model`) skips loading the DotProductClassifier, so the
  classifier is PyTorch's fresh nn.Linear: kernel and bias ~ U(-1/sqrt(d), 1/sqrt(d)),
  d the feature size (kaiming_uniform_(a=sqrt(5)) and its bias rule); drawn here from
  `seed` with numpy, so stage 2 alone and the one-command run start alike.
- `train_head`: stage 1's classifier kept and re-trained, everything else frozen
  (BatchNorm in inference mode): Weight Balancing's stage 2 (Alshammari et al. 2022;
  their demo2 deep-copies the stage-1 model and trains `encoder.fc` weight and bias).
- `lws`: learnable weight scaling: `tricks.lws.LogitScales` (initialised to 1) on the
  logits, every other layer frozen (their TauNormClassifier: `fc(x) * scales`, the fc
  frozen, the feature model `fix: true`).
- `tau_normalize`: the head's kernel tau-normalised and its bias zeroed
  (`tricks.tau_norm`: their tau_norm.py scores features @ pnorm(W)^T, no bias).

Stage 2 trains with `Optimization.phases` empty: the freezing here is the whole story
(finetune.freeze_backbone's mechanism, FREEZE_BACKBONE's).

`crt` and `lws` take `batch_norm`: 'moving' (default; Keras's frozen BatchNorm
normalises with its moving statistics, which stay as stage 1 left them) or 'batch', as
Kang et al.'s code runs stage 2: their networks stay in train() mode, so the frozen
backbone's BatchNorm normalises each class-balanced batch with its own statistics and
updates its running statistics, though no weight of it trains (`train_batch_norm`).
"""

import math

import gin
import numpy as np
import tensorflow as tf
import tf_keras

from tricks import lws as lws_lib
from tricks import tau_norm as tau_norm_lib
from zoo import finetune

SCALES = "logit_scales"  # the LWS layer


def head_of(model):
  try:
    return model.get_layer(finetune.HEAD)
  except ValueError:
    raise ValueError(f"model {model.name!r} has no {finetune.HEAD!r} head layer; decoupled "
                     "training needs a zoo model") from None


@gin.configurable(module="zoo", denylist=["model"])
def load_stage1(model, checkpoint=None):
  """`model` with every weight read from the stage-1 checkpoint `checkpoint` (a
  trainer's ckpt-N prefix or its checkpoints/ directory: the newest there)."""
  if not checkpoint:
    raise ValueError("zoo.load_stage1.checkpoint is not set: stage 2 runs under "
                     "run.procedure = @decoupled, which sets it to stage 1's final "
                     "checkpoint or to decoupled.stage1_checkpoint")
  return finetune.init_from_checkpoint(model, checkpoint, "all")


def pytorch_linear_init(kernel_shape, seed):
  """(kernel, bias) as PyTorch's nn.Linear draws them: U(-1/sqrt(d), 1/sqrt(d)), d the
  input features (kernel [d, classes], Keras layout)."""
  features, classes = kernel_shape
  bound = 1.0 / math.sqrt(features)
  rng = np.random.default_rng(seed)
  kernel = rng.uniform(-bound, bound, size=(classes, features)).T  # drawn as [out, in]
  bias = rng.uniform(-bound, bound, size=(classes,))
  return kernel.astype(np.float32), bias.astype(np.float32)


BATCH_NORM_MODES = ("moving", "batch")


def _batch_norm_mode(model, batch_norm):
  if batch_norm not in BATCH_NORM_MODES:
    raise ValueError(f"batch_norm={batch_norm!r}; choose 'moving' (frozen BatchNorm uses "
                     "its moving statistics) or 'batch' (re-estimated in training, as "
                     "Kang et al.'s code)")
  return train_batch_norm(model) if batch_norm == "batch" else model


def train_batch_norm(model):
  """Every BatchNorm layer in `model` (nested ones included) runs as in training
  whenever the model does, frozen or not: it normalises with the batch's statistics and
  moves its moving mean and variance (m <- momentum m + (1 - momentum) batch value),
  while its gamma and beta stay out of the trained variables. As PyTorch's BatchNorm in
  train() mode with requires_grad False. Returns `model` (changed in place).

  Keras ties both behaviours to `layer.trainable` (a frozen BatchNorm calls itself in
  inference mode, and a frozen layer's moving-average updates are dropped), so each
  BatchNorm is marked trainable and its gamma and beta are moved to its non-trainable
  weights; a frozen enclosing block still keeps every other weight out."""
  for layer in model.submodules:
    if isinstance(layer, tf_keras.layers.BatchNormalization):
      # pylint: disable=protected-access
      frozen = list(layer._trainable_weights)
      layer.trainable = True
      # Past Layer.__setattr__, which would track gamma and beta as trainable again.
      object.__setattr__(layer, "_trainable_weights", [])
      object.__setattr__(layer, "_non_trainable_weights", frozen + [
          w for w in layer._non_trainable_weights if all(w is not f for f in frozen)])
  return model


@gin.configurable(module="zoo", denylist=["model"])
def crt(model, seed=0, batch_norm="moving"):
  """Classifier re-training's model: a re-initialised head on the frozen backbone,
  its BatchNorm statistics frozen ('moving') or re-estimated ('batch')."""
  old = head_of(model)
  new = finetune.replace_head(model, old.units)
  head = new.get_layer(finetune.HEAD)
  kernel, bias = pytorch_linear_init(head.kernel.shape.as_list(), seed)
  head.kernel.assign(tf.cast(kernel, head.kernel.dtype))
  head.bias.assign(tf.cast(bias, head.bias.dtype))
  return _batch_norm_mode(finetune.freeze_backbone(new), batch_norm)


@gin.configurable(module="zoo", denylist=["model"])
def train_head(model):
  """Stage 1's head, trained on the frozen backbone (not re-initialised)."""
  head_of(model)
  return finetune.freeze_backbone(model)


@gin.configurable(module="zoo", denylist=["model"])
def lws(model, batch_norm="moving"):
  """Learnable weight scaling's model: logits * f (f a trainable scale per class,
  initialised to 1), every other layer frozen, its BatchNorm statistics frozen
  ('moving') or re-estimated ('batch')."""
  head_of(model)
  scaled = lws_lib.LogitScales(name=SCALES)(model.output)
  new = tf_keras.Model(model.inputs, scaled, name=model.name)
  for layer in new.layers:
    layer.trainable = layer.name == SCALES
  return _batch_norm_mode(new, batch_norm)


def tau_normalize(model, tau):
  """Sets the head's kernel to its tau-normalised kernel and its bias to 0, in place."""
  head = head_of(model)
  kernel = head.kernel.numpy()
  head.kernel.assign(tau_norm_lib.normalize(kernel, tau))
  head.bias.assign(np.zeros(head.bias.shape, head.bias.dtype.as_numpy_dtype))
  return model


def feature_model(model):
  """The model up to the head's input (the pooled features the classifier sees)."""
  return tf_keras.Model(model.inputs, head_of(model).input, name=model.name + "_features")
