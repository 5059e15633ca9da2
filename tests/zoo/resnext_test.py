"""ResNeXt-50 32x4d (torchvision's layout, classifier-balancing's init): torchvision's
parameter count, grouped convolutions, shapes and initialisation."""

import numpy as np
import tensorflow as tf
import tf_keras

from zoo import resnext

# torchvision.models.resnext50_32x4d() and resnext101_32x8d(): sum(p.numel() for p
# in model.parameters()), the counts its model table publishes (25.0M, 88.8M);
# trainable weights here.
TORCHVISION_PARAMS = 25_028_904
TORCHVISION_PARAMS_101 = 88_791_336
TORCHVISION_PARAMS_RESNET50 = 25_557_032  # torchvision.models.resnet50(), timm's resnet50


def formula_params(variant, num_classes=1000):
  """Trainable weights from the architecture: convolutions k*k*(cin/groups)*cout,
  BatchNorm gamma and beta, the classifier; no model built."""
  blocks, groups, width_per_group = {**resnext.VARIANTS, **resnext.RESNETS}[variant]
  total = 7 * 7 * 3 * 64 + 2 * 64
  cin = 64
  for stage, count in enumerate(blocks):
    planes = 64 * 2 ** stage
    width, out = planes * width_per_group // 64 * groups, planes * 4
    for block in range(count):
      total += cin * width + 9 * (width // groups) * width + width * out
      total += 2 * (width + width + out)
      if block == 0:
        total += cin * out + 2 * out
      cin = out
  return total + cin * num_classes + num_classes


class ResnextTest(tf.test.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    tf_keras.utils.set_random_seed(0)
    cls.model = resnext.resnext("resnext50_32x4d", num_classes=1000)  # slow on CPU

  @classmethod
  def tearDownClass(cls):
    del cls.model
    tf_keras.backend.clear_session()
    super().tearDownClass()

  def test_parameter_count_is_torchvisions(self):
    trainable = sum(v.shape.num_elements() for v in self.model.trainable_variables)
    self.assertEqual(trainable, TORCHVISION_PARAMS)
    self.assertEqual(formula_params("resnext50_32x4d"), TORCHVISION_PARAMS)
    bns = [l for l in self.model.layers if isinstance(l, tf_keras.layers.BatchNormalization)]
    moving = 2 * sum(l.gamma.shape[0] for l in bns)  # mean, variance
    self.assertEqual(self.model.count_params(), TORCHVISION_PARAMS + moving)
    # 1 stem + 16 blocks * 3 + 4 projections convolutions, as torchvision's 53.
    convs = [l for l in self.model.layers if isinstance(l, tf_keras.layers.Conv2D)]
    self.assertLen(convs, 53)

  def test_weight_shapes_are_the_built_models(self):
    self.assertEqual(resnext.weight_shapes("resnext50_32x4d"),
                     {w.name.split(":")[0]: tuple(w.shape) for w in self.model.weights})

  def test_grouped_convolutions(self):
    for stage, width in enumerate((128, 256, 512, 1024)):
      conv = self.model.get_layer(f"stage{stage + 1}/block0/2_conv")
      self.assertEqual((conv.groups, conv.filters, conv.kernel_size), (32, width, (3, 3)))
      self.assertEqual(conv.strides, (1, 1) if stage == 0 else (2, 2))
      self.assertEqual(conv.kernel.shape, (3, 3, width // 32, width))
      self.assertEqual(self.model.get_layer(f"stage{stage + 1}/block0/1_conv").strides,
                       (1, 1))
      self.assertEqual(self.model.get_layer(f"stage{stage + 1}/block0/0_conv").strides,
                       (1, 1) if stage == 0 else (2, 2))
    with self.assertRaises(ValueError):  # later blocks add the identity
      self.model.get_layer("stage1/block1/0_conv")

  def test_shapes_at_224(self):
    self.assertEqual(self.model.input_shape, (None, 224, 224, 3))
    for layer, shape in [("stem/conv", (112, 112, 64)), ("stem/pool", (56, 56, 64)),
                         ("stage1/block2/out", (56, 56, 256)),
                         ("stage2/block3/out", (28, 28, 512)),
                         ("stage3/block5/out", (14, 14, 1024)),
                         ("stage4/block2/out", (7, 7, 2048))]:
      self.assertEqual(self.model.get_layer(layer).output.shape[1:], shape, msg=layer)
    self.assertEqual(self.model.layers[-1].name, "logits")
    self.assertEqual(self.model.output.shape, (None, 1000))

  def test_small_model_runs(self):
    small = resnext.resnext("resnext50_32x4d", num_classes=2, input_shape=(64, 64, 3))
    x = tf.constant(np.random.default_rng(0).normal(size=(2, 64, 64, 3)), tf.float32)
    logits = small(x, training=False)
    self.assertEqual(logits.shape, (2, 2))
    self.assertTrue(np.all(np.isfinite(logits.numpy())))
    self.assertEqual(small.get_layer("stage4/block2/out").output.shape, (None, 2, 2, 2048))

  def test_initialisation(self):
    # normal(0, sqrt(2 / (k * k * out_channels))), untruncated, on a 1,179,648-weight
    # layer: 3x3, 1024 outputs (32 groups of 32 inputs).
    kernel = self.model.get_layer("stage4/block1/2_conv").kernel.numpy()
    std = np.sqrt(2 / (9 * 1024))
    self.assertAllClose(kernel.std(), std, rtol=0.01)
    self.assertAllClose(kernel.mean(), 0.0, atol=std * 0.01)
    self.assertGreater(np.abs(kernel).max(), 3 * std)  # not truncated at 2 sd
    bn = self.model.get_layer("stage4/block2/3_bn")  # last BN gamma: 1, not zero
    self.assertAllEqual(bn.gamma.numpy(), np.ones(2048))
    self.assertAllEqual(bn.beta.numpy(), np.zeros(2048))
    self.assertEqual((bn.momentum, bn.epsilon), (0.9, 1e-5))
    # nn.Linear: kernel and bias uniform(-1 / sqrt(2048), 1 / sqrt(2048)).
    dense = self.model.get_layer("logits")
    bound = 1 / np.sqrt(2048)
    for w in (dense.kernel.numpy(), dense.bias.numpy()):
      self.assertLessEqual(np.abs(w).max(), bound)
      self.assertGreater(np.abs(w).max(), 0.9 * bound)
    self.assertAllClose(dense.kernel.numpy().std(), bound / np.sqrt(3), rtol=0.01)

  def test_variants(self):
    self.assertEqual(resnext.VARIANTS["resnext101_32x8d"], ((3, 4, 23, 3), 32, 8))
    # Not built here (slow on CPU); //tests/zoo:registry_test builds and trains it.
    self.assertEqual(formula_params("resnext101_32x8d"), TORCHVISION_PARAMS_101)
    # ResNet-50 is the one-group, 64-wide layout (built by //tests/zoo:timm_checkpoint_test).
    self.assertEqual(formula_params("resnet50"), TORCHVISION_PARAMS_RESNET50)
    with self.assertRaisesRegex(ValueError, "unknown ResNeXt variant 'resnext50'"):
      resnext.resnext("resnext50")


if __name__ == "__main__":
  tf.test.main()
