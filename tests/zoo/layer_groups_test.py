"""Each zoo family's layers grouped as timm's group_matcher(coarse=False) groups them
(stem, one group a block, head), against layer ids worked out here from the layer
names and the published architectures, not from the grouping's own code."""

import re

from absl.testing import parameterized
import tensorflow as tf
import tf_keras

from zoo import layer_groups
from zoo import registry


def group_of(groups):
  """{layer name: group index}, each weighted layer in exactly one group."""
  ids = {}
  for i, group in enumerate(groups):
    for layer in group:
      assert layer.name not in ids, layer.name
      ids[layer.name] = i
  return ids


def convs(group):
  return sum(isinstance(layer, tf_keras.layers.Conv2D) for layer in group)


def batch_norms(group):
  return sum(isinstance(layer, tf_keras.layers.BatchNormalization) for layer in group)


class LayerGroupsTest(tf.test.TestCase, parameterized.TestCase):

  def assert_covers(self, model, groups):
    """Every weighted top-level layer is in one group; the head alone is last."""
    ids = group_of(groups)
    weighted = {l.name for l in model.layers if l.weights}
    self.assertEqual(set(ids), weighted)
    self.assertEqual([l.name for l in groups[-1]], ["logits"])

  @parameterized.parameters(
      # name, blocks a stage, a block's layer names (stage, block), the first stage's and
      # block's numbers, the stem's names
      ("resnet50", (3, 4, 6, 3), r"^conv(\d)_block(\d+)_", (2, 1), r"^conv1_"),
      ("resnet20_cifar", (3, 3, 3), r"^stage(\d)/block(\d+)/", (1, 0), r"^stem/"),
      ("resnext50_32x4d", (3, 4, 6, 3), r"^stage(\d)/block(\d+)/", (1, 0), r"^stem/"))
  def test_resnets_one_group_a_block(self, name, blocks, pattern, first, stem):
    model = registry.build(name, num_classes=3, input_shape=(32, 32, 3))
    groups = layer_groups.layer_groups(model)
    self.assert_covers(model, groups)
    self.assertLen(groups, sum(blocks) + 2)
    for layer_name, i in group_of(groups).items():
      match = re.match(pattern, layer_name)
      if match:  # block b of stage s: 1 + the blocks of the stages before + b
        stage, block = int(match.group(1)) - first[0], int(match.group(2)) - first[1]
        self.assertEqual(i, 1 + sum(blocks[:stage]) + block, msg=layer_name)
      elif re.match(stem, layer_name):
        self.assertEqual(i, 0, msg=layer_name)
      else:
        self.assertEqual((layer_name, i), ("logits", sum(blocks) + 1))

  def test_resnet32_menon_final_bn_joins_the_last_block(self):
    # timm's MATCH_PREV_GROUP: a norm after the last block (ResNetV2's `norm`) goes with it.
    model = registry.build("resnet32_menon", num_classes=3, input_shape=(16, 16, 3))
    groups = layer_groups.layer_groups(model)
    self.assert_covers(model, groups)
    ids = group_of(groups)
    self.assertLen(groups, 15 + 2)  # 3 stages of 5 blocks
    self.assertEqual(ids["final_bn"], ids["stage3/block4/3_conv"])
    self.assertEqual(ids["final_bn"], 15)

  def test_nfnet_stem_blocks_and_final_conv(self):
    # timm's nfnet: stem, stages.N.M, final_conv with the last block.
    model = registry.build("nfnet_nano", num_classes=3, input_shape=(32, 32, 3))
    groups = layer_groups.layer_groups(model)
    self.assert_covers(model, groups)
    for layer_name, i in group_of(groups).items():
      match = re.match(r"^nf_block_(\d+)/", layer_name)
      if match:
        self.assertEqual(i, int(match.group(1)) + 1, msg=layer_name)
      elif layer_name.startswith("stem_conv"):
        self.assertEqual(i, 0, msg=layer_name)
      elif layer_name == "final_conv":
        self.assertEqual(i, 4)  # nano has 4 blocks: the last one's group
      else:
        self.assertEqual((layer_name, i), ("logits", 5))

  def test_inception_v3_stem_halves_and_mixed_blocks(self):
    """timm's inception_v3 matcher: Conv2d_1a..2b, then Conv2d_3b..4a, then Mixed_5b ..
    Mixed_7c, then the head. The convolutions a group holds, from the architecture
    (Szegedy et al. 2016; torchvision's Inception3 modules): InceptionA 7 (1x1; 5x5: 2;
    3x3 double: 3; pool: 1), InceptionB 4, InceptionC 10, InceptionD 6, InceptionE 9;
    each with its BatchNorm."""
    model = registry.build("inception_v3", num_classes=3, input_shape=(75, 75, 3))
    groups = layer_groups.layer_groups(model)
    self.assert_covers(model, groups)
    want = [3, 2] + [7] * 3 + [4] + [10] * 4 + [6] + [9] * 2
    self.assertEqual([convs(g) for g in groups[:-1]], want)
    self.assertEqual([batch_norms(g) for g in groups[:-1]], want)
    self.assertEqual(sum(want), 94)
    # The first group starts at the input's convolution.
    self.assertEqual(groups[0][0].input_shape[-1], 3)

  def test_model_garden_resnet_blocks_inside_its_backbone(self):
    from official.vision.modeling.layers import nn_blocks  # pylint: disable=g-import-not-at-top
    model = registry.build("resnet50_v1_5", num_classes=3, input_shape=(32, 32, 3))
    groups = layer_groups.layer_groups(model)
    self.assertLen(groups, 16 + 2)
    self.assertEqual([type(l).__name__ for l in groups[0]], ["Conv2D", "BatchNormalization"])
    for group in groups[1:-1]:
      self.assertLen(group, 1)
      self.assertIsInstance(group[0], nn_blocks.BottleneckBlock)
    grouped = {id(v) for g in groups for l in g for v in l.trainable_weights}
    self.assertEqual(grouped, {id(v) for v in model.trainable_variables})

  def test_a_model_without_blocks_is_refused(self):
    inputs = tf_keras.Input((8, 8, 3))
    x = tf_keras.layers.GlobalAveragePooling2D()(tf_keras.layers.Conv2D(4, 3)(inputs))
    model = tf_keras.Model(inputs, tf_keras.layers.Dense(2, name="logits")(x))
    with self.assertRaisesRegex(ValueError, "cannot tell its blocks"):
      layer_groups.layer_groups(model)
    headless = tf_keras.Model(inputs, tf_keras.layers.Dense(2, name="fc")(x))
    with self.assertRaisesRegex(ValueError, "needs a 'logits' head layer"):
      layer_groups.layer_groups(headless)


if __name__ == "__main__":
  tf.test.main()
