"""Fine-tuning a zoo model: new head, frozen backbone, initial weights from a checkpoint.

Every zoo model ends in a Dense layer named "logits" on pooled features; the rest is
the backbone.
- `replace_head(model, num_classes)`: the same backbone layers (weights shared) with a
  fresh "logits" layer for `num_classes`.
- `zero_head(model)`: the head's kernel and bias set to zeros, as BiT fine-tunes
  (Kolesnikov et al. 2020; google-research/big_transfer's new head: `zero_head=True`
  in bit_pytorch, `kernel_initializer="zeros"` in bit_tf2): the logits start at 0 and
  the first step's gradient reaches the head alone (dL/dfeatures = dL/dlogits W^T = 0).
- `freeze_backbone(model)`: every layer but the head non-trainable. In TF2 Keras a
  non-trainable BatchNormalization (and the zoo's Extended BN) normalises with its
  moving statistics, so the frozen backbone runs in inference mode while the head
  trains.
- `init_from_checkpoint(model, path, scope)`: Model Garden's `init_checkpoint`
  semantics: "all" restores every weight; "backbone" every weight but the head,
  whatever class count the checkpoint was trained for. It reads the trainer's
  checkpoints (`model_dir/checkpoints`) and Model Garden's own image-classification
  checkpoints (root objects `backbone`, `model`, `optimizer`, `global_step`, as
  official/core/base_trainer.py writes them) into zoo models with a Model Garden
  backbone (resnet50_v1_5), as official/vision/tasks/image_classification.py does.
- `finetune_model`: the Gin entry gluing these to a zoo builder.
"""

import os

import gin
import tensorflow as tf
import tf_keras

HEAD = "logits"
BACKBONE = "backbone"  # the nested Model Garden backbone of a zoo model
# Model Garden's ClassificationModel: its weighted layers are the backbone, then the head
# (without add_head_batch_norm).
GARDEN_HEAD = "model/layer_with_weights-1/{}/.ATTRIBUTES/VARIABLE_VALUE"


class CheckpointError(ValueError):
  """A checkpoint that cannot initialise the model: the message says why and what to do."""


def replace_head(model, num_classes, head=HEAD):
  """`model`'s backbone (shared layers) with a new `num_classes` Dense head."""
  try:
    old = model.get_layer(head)
  except ValueError:
    raise ValueError(f"model {model.name!r} has no head layer {head!r} to replace") from None
  logits = tf_keras.layers.Dense(num_classes, name=head)(old.input)
  return tf_keras.Model(model.inputs, logits, name=model.name)


def zero_head(model, head=HEAD):
  """Sets the `head` layer's kernel and bias to zeros; returns `model`."""
  try:
    layer = model.get_layer(head)
  except ValueError:
    raise ValueError(f"model {model.name!r} has no head layer {head!r} to zero") from None
  for variable in layer.weights:
    variable.assign(tf.zeros_like(variable))
  return model


def freeze_backbone(model, head=HEAD, frozen=True):
  """Marks every layer but `head` (non-)trainable; returns `model`."""
  for layer in model.layers:
    if layer.name != head:
      layer.trainable = not frozen
  return model


def _checkpoint_path(path):
  if tf.io.gfile.isdir(path):
    latest = tf.train.latest_checkpoint(path)
    if latest is None:  # no "checkpoint" state file: the newest prefix there
      indexes = sorted(tf.io.gfile.glob(os.path.join(path, "*.index")),
                       key=lambda p: tf.io.gfile.stat(p).mtime_nsec)
      latest = indexes[-1][:-len(".index")] if indexes else None
    if latest is None:
      raise CheckpointError(f"no checkpoint in directory {path}; point at a run's "
                            "model_dir/checkpoints or at a checkpoint prefix")
    return latest
  if not tf.io.gfile.exists(path + ".index"):
    raise CheckpointError(f"checkpoint {path} not found (no {path}.index); point at a "
                          "run's model_dir/checkpoints or at a checkpoint prefix")
  return path


def _reader(path):
  try:
    return tf.train.load_checkpoint(path)
  except (tf.errors.OpError, ValueError) as e:
    raise CheckpointError(f"{path} is not a readable TF checkpoint ({type(e).__name__}); "
                          "it may be truncated or another format") from None


def is_model_garden(reader):
  """Whether a checkpoint is Model Garden's (a root `backbone` beside `model`)."""
  return any(k.startswith(BACKBONE + "/") for k in reader.get_variable_to_shape_map())


def _head_classes(path, reader, head_index):
  """The class count of the checkpoint's head (its last weighted layer's bias)."""
  key = f"model/layer_with_weights-{head_index}/bias/.ATTRIBUTES/VARIABLE_VALUE"
  shapes = reader.get_variable_to_shape_map()
  if key not in shapes:
    raise CheckpointError(f"{path} has no model head at {key.split('/.')[0]}; it was not "
                          "written by this trainer for this architecture")
  return shapes[key][0]


def _read_failed(path, model, e):
  first = (str(e).strip().splitlines() or [type(e).__name__])[0][:300]
  return CheckpointError(f"checkpoint {path} does not fit model {model.name!r}: {first}; "
                         "initialise from a checkpoint of the same architecture")


def init_from_model_garden(model, path, reader, scope="backbone", head=HEAD):
  """Model Garden's `initialize`: its checkpoint's `backbone` into the model's nested
  Model Garden backbone; with scope "all" its head (Dense kernel and bias) too."""
  try:
    backbone = model.get_layer(BACKBONE)
  except ValueError:
    raise CheckpointError(f"{path} is a Model Garden checkpoint; it initialises zoo models "
                          f"with a Model Garden backbone (resnet50_v1_5), not "
                          f"{model.name!r}") from None
  try:
    status = tf.train.Checkpoint(backbone=backbone).read(path)
    status.expect_partial().assert_existing_objects_matched()
  except (AssertionError, ValueError, tf.errors.OpError) as e:
    raise _read_failed(path, model, e) from None
  if scope == "all":
    layer = model.get_layer(head)
    shapes = reader.get_variable_to_shape_map()
    for variable, part in ((layer.kernel, "kernel"), (layer.bias, "bias")):
      key = GARDEN_HEAD.format(part)
      if shapes.get(key) != variable.shape.as_list():
        raise CheckpointError(
            f"{path}: Model Garden head {part} {shapes.get(key)} does not fit the model's "
            f"{variable.shape.as_list()}; use init_scope 'backbone' for a new class count")
      variable.assign(reader.get_tensor(key))
  return model


def init_from_checkpoint(model, path, scope="backbone", head=HEAD):
  """Initialises `model` from the checkpoint at `path` (file prefix or dir): the
  trainer's, or Model Garden's (see `init_from_model_garden`).

  scope "all": every weight, the head included (same class count required).
  scope "backbone": all but `head`: the checkpoint is read into the model's own
  backbone layers behind a stand-in head of the checkpoint's class count.
  """
  if scope not in ("all", "backbone"):
    raise CheckpointError(f"init scope {scope!r}: use 'all' or 'backbone'")
  path = _checkpoint_path(path)
  reader = _reader(path)
  if is_model_garden(reader):
    return init_from_model_garden(model, path, reader, scope, head)
  if scope == "all":
    target = model
  else:  # the same layers (weights shared, same checkpoint keys), the checkpoint's head
    weighted = [l.name for l in model.layers if l.weights]
    if head not in weighted:
      raise CheckpointError(f"model {model.name!r} has no head layer {head!r}")
    target = replace_head(model, _head_classes(path, reader, weighted.index(head)), head)
  try:
    status = tf.train.Checkpoint(model=target).read(path)
    # A trainer checkpoint also holds the optimizer and the run's counters: not wanted.
    status.expect_partial().assert_existing_objects_matched()
  except (AssertionError, ValueError, IndexError, tf.errors.OpError) as e:
    raise _read_failed(path, model, e) from None
  return model


@gin.configurable(module="zoo")
def finetune_model(base=gin.REQUIRED, num_classes=gin.REQUIRED, init_checkpoint=None,
                   init_scope="backbone", freeze=False, zero_init_head=False):
  """A zoo model for fine-tuning.

  Args:
    base: a builder called as `base(num_classes=)` (e.g. `@zoo.build`, with its
      pretrained `weights`).
    num_classes: the new task's classes (a fresh head).
    init_checkpoint: a trainer checkpoint (prefix or directory) to start from.
    init_scope: "backbone" (the checkpoint's head is dropped) or "all".
    freeze: train the head only, the backbone frozen in inference mode.
    zero_init_head: the new head starts at zero (kernel and bias; BiT's), after any
      pretrained weights; not with init_scope "all", whose head is the checkpoint's.
  """
  if not isinstance(zero_init_head, bool):
    raise ValueError(f"finetune_model.zero_init_head={zero_init_head!r} must be True or "
                     "False; check ZERO_INIT_HEAD")
  if zero_init_head and init_checkpoint and init_scope == "all":
    raise ValueError("finetune_model.zero_init_head zeroes the head that init_scope 'all' "
                     "restores from the checkpoint; use init_scope 'backbone' for a new "
                     "zero head, or ZERO_INIT_HEAD = False to keep the checkpoint's")
  model = base(num_classes=num_classes)
  if init_checkpoint:
    init_from_checkpoint(model, init_checkpoint, init_scope)
  if zero_init_head:
    zero_head(model)
  return freeze_backbone(model) if freeze else model
