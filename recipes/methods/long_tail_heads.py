"""Head rewrites for long-tail losses, for `Task.model_transforms` (any zoo model).

Every zoo model ends in a Dense layer named `finetune.HEAD` ("logits") on pooled
features.
- `normed_head`: that head replaced by `tricks.ldam.NormedLinear` (same name, same
  class count, fresh unit-norm weights, no bias), the classifier LDAM is trained with
  in Cao et al.'s code (`use_norm=True`). Use with `Task.loss = @ldam`:

      Task.model_transforms = [@normed_head]
      Task.loss = @ldam

- `sigmoid_prior_bias`: the head's bias set to -log(K - 1) (every sigmoid starts at
  p = 1 / K), as Cui et al.'s code initialises the classifier for its sigmoid and focal
  losses (richardaecn/class-balanced-loss, src/model_base.py `_fully_connected`). Use
  with `focal` (kind "sigmoid") or `class_balanced.loss = 'sigmoid'` / `'focal'`.
"""

import gin
import numpy as np
import tf_keras

from recipes import hooks
from tricks import ldam
from tricks import posthoc
from zoo import finetune


def _head(model, transform):
  try:
    head = model.get_layer(finetune.HEAD)
  except ValueError:
    raise ValueError(f"{transform}: model {model.name!r} has no {finetune.HEAD!r} head "
                     "layer (use a zoo model)") from None
  if not isinstance(head, tf_keras.layers.Dense):
    raise ValueError(f"{transform}: model {model.name!r}'s head {finetune.HEAD!r} is a "
                     f"{type(head).__name__}, not a Dense layer; apply it once, to a zoo "
                     "model")
  return head


@gin.configurable
def normed_head(model):
  """`model` with its Dense head replaced by a NormedLinear cosine classifier."""
  head = _head(model, "normed_head")
  outputs = ldam.NormedLinear(head.units, name=finetune.HEAD, dtype="float32")(head.input)
  return tf_keras.Model(model.inputs, outputs, name=model.name)


@gin.configurable
def sigmoid_prior_bias(model):
  """`model` with its head's bias set to -log(K - 1); returns `model`."""
  head = _head(model, "sigmoid_prior_bias")
  if head.bias is None or head.units < 2:
    raise ValueError(f"sigmoid_prior_bias: the head of {model.name!r} needs a bias and "
                     "at least 2 classes")
  head.bias.assign(np.full(head.units, -np.log(head.units - 1), np.float32))
  return model


@gin.configurable
@hooks.takes_class_counts
def posthoc_adjusted(model, class_counts, tau=1.0):
  """`model` whose inference logits are post-hoc adjusted by the training priors."""
  _head(model, "posthoc_adjusted")
  adjusted = posthoc.PosthocAdjustment(class_counts, tau, name="posthoc_adjustment")(
      model.outputs[0])
  return tf_keras.Model(model.inputs, adjusted, name=model.name)
