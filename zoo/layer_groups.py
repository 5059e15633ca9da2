"""A zoo model's layers in depth order, for layer-wise learning-rate decay: the stem,
each block, the head.

The grouping is timm's `group_matcher(coarse=False)` of each family (huggingface/
pytorch-image-models, read through `param_groups_layer_decay`): group 0 the stem,
then one group a block in the order data flows, weighted layers after the last block
(an NFNet's final_conv, resnet32_menon's final_bn) joining the last block as timm's
`MATCH_PREV_GROUP` does, and last the head ("logits").

- Models with a block regex on their card (Keras ResNets `conv2_block1_`, NFNets
  `nf_block_0/`, CIFAR ResNets, resnet32_menon, ResNeXts `stage1/block0/`,
  EfficientNet-Lite `stage1/block0/` and `head/`): the layers before the first block
  are the stem (timm's resnet: conv1, bn1; nfnet: stem; efficientnet: conv_stem, bn1);
  EfficientNet-Lite's head convolution is a group of its own, as timm's conv_head.
- inception_v3 (tf_keras's layers are numbered, not named by block): timm's matcher,
  Conv2d_1a..2b the first group and Conv2d_3b, 4a the second, then one group a
  Mixed block (Mixed_5b..Mixed_7c, tf_keras's concatenations mixed0..mixed10): a
  layer belongs to the block whose concatenation comes after it in the model's layer
  order (tf_keras orders a functional model's layers by depth, so every layer of a
  block lies between the block before's concatenation and its own).
- resnet50_v1_5 (one nested Model Garden backbone): its weighted layers before the
  first residual block are the stem, then one group a block.
"""

import re

import tf_keras

from zoo import card as card_lib

HEAD = "logits"
INCEPTION_BLOCK_END = re.compile(r"^mixed[0-9]+$")  # tf_keras InceptionV3's concatenations
# timm's two stem groups: Conv2d_1a_3x3, 2a, 2b; then Conv2d_3b_1x1, 4a.
INCEPTION_STEM_CONVS = (3, 2)
BACKBONE = "backbone"  # the nested Model Garden backbone


def _weighted(layers):
  return [layer for layer in layers if layer.weights]


def _by_block_pattern(layers, pattern):
  """Stem, one group a block named by `pattern`'s first group, in order; a layer after
  the last block joins it."""
  groups, blocks = [[]], {}
  for layer in layers:
    match = re.match(pattern, layer.name)
    if match:
      if match.group(1) not in blocks:
        blocks[match.group(1)] = len(groups)
        groups.append([])
      groups[blocks[match.group(1)]].append(layer)
    else:  # before the first block: the stem; after a block: that block's
      groups[-1].append(layer)
  return groups


def _inception(model_layers):
  """timm's inception_v3 grouping on tf_keras's InceptionV3."""
  groups = [[], [], []]  # Conv2d_1a..2b, Conv2d_3b..4a, then Mixed_5b
  convs = 0
  for layer in model_layers:
    if INCEPTION_BLOCK_END.match(layer.name):
      groups.append([])  # the next Mixed block
      continue
    if not layer.weights:
      continue
    if isinstance(layer, tf_keras.layers.Conv2D):
      convs += 1
    if convs <= INCEPTION_STEM_CONVS[0]:
      groups[0].append(layer)
    elif convs <= sum(INCEPTION_STEM_CONVS):
      groups[1].append(layer)
    else:
      groups[-1].append(layer)
  if groups[-1]:
    raise ValueError("inception_v3: weighted layers after the last Mixed block")
  return groups[:-1]


def _model_garden(backbone):
  """Stem (the backbone's layers before its first residual block), then each block."""
  from official.vision.modeling.layers import nn_blocks  # pylint: disable=g-import-not-at-top
  blocks = (nn_blocks.BottleneckBlock, nn_blocks.ResidualBlock)
  groups = [[]]
  for layer in _weighted(backbone.layers):
    if isinstance(layer, blocks):
      groups.append([layer])
    else:
      groups[-1].append(layer)
  return groups


def layer_groups(model, head=HEAD):
  """The model's weighted layers as [stem, block 1, ..., block L, head]: lists of
  layers, input to output. Raises ValueError for a model whose blocks it cannot name."""
  top = [layer for layer in model.layers if layer.name != head]
  try:
    head_layer = model.get_layer(head)
  except ValueError:
    raise ValueError(f"layer decay needs a {head!r} head layer; model {model.name!r} has "
                     "none (use a zoo model)") from None
  names = {layer.name for layer in top}
  card = card_lib.card_of(model)
  if BACKBONE in names and isinstance(model.get_layer(BACKBONE), tf_keras.Model):
    outer = [layer for layer in _weighted(top) if layer.name != BACKBONE]
    if outer:
      raise ValueError(f"{model.name}: weighted layers {[l.name for l in outer]} outside "
                       "its backbone and head; layer decay cannot place them")
    groups = _model_garden(model.get_layer(BACKBONE))
  elif any(INCEPTION_BLOCK_END.match(name) for name in names):
    groups = _inception(top)
  elif card is not None and card.block_pattern:
    groups = _by_block_pattern(_weighted(top), card.block_pattern)
  else:
    raise ValueError(f"model {model.name!r} has no block pattern on its zoo card and is "
                     "not inception_v3 or resnet50_v1_5: layer decay cannot tell its "
                     "blocks; use Optimization.layer_learning_rates")
  if len(groups) < 2 or not groups[0]:
    raise ValueError(f"{model.name}: found no stem and blocks for layer decay")
  return groups + [[head_layer]]
