"""Fine-tuning: new heads (zero-initialised as BiT's), a frozen backbone in inference
mode, init from checkpoints."""

import functools
import os

import numpy as np
import tensorflow as tf
import tf_keras

from zoo import finetune
from zoo import registry
from zoo import resnet_cifar

build = functools.partial(resnet_cifar.resnet_cifar, 8, input_shape=(8, 8, 3))


def images(seed=0):
  return tf.constant(np.random.default_rng(seed).normal(size=(4, 8, 8, 3)) + 1.0,
                     tf.float32)


def train_step(model, x, labels):
  optimizer = tf_keras.optimizers.SGD(0.1)
  with tf.GradientTape() as tape:
    loss = tf.reduce_mean(tf_keras.losses.sparse_categorical_crossentropy(
        labels, model(x, training=True), from_logits=True))
  optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables),
                                model.trainable_variables))


class FinetuneTest(tf.test.TestCase):

  def test_replace_head_keeps_the_backbone(self):
    model = build(num_classes=10)
    new = finetune.replace_head(model, 3)
    self.assertEqual(new.output_shape, (None, 3))
    self.assertIs(new.get_layer("stage3/block0/1_conv"), model.get_layer("stage3/block0/1_conv"))
    self.assertIsNot(new.get_layer("logits"), model.get_layer("logits"))
    with self.assertRaisesRegex(ValueError, "no head layer 'fc'"):
      finetune.replace_head(model, 3, head="fc")

  def test_frozen_backbone_runs_batch_norm_in_inference_mode(self):
    model = finetune.freeze_backbone(build(num_classes=3))
    self.assertEqual([v.name.split("/")[0] for v in model.trainable_variables],
                     ["logits", "logits"])
    x = images()
    # BN with trainable=False uses its moving statistics even when training.
    self.assertAllClose(model(x, training=True), model(x, training=False))
    bn = model.get_layer("stage1/block0/1_bn")
    stats = [bn.moving_mean.numpy(), bn.moving_variance.numpy()]
    kernel = model.get_layer("stem/conv").kernel.numpy()
    head = model.get_layer("logits").kernel.numpy()
    train_step(model, x, [0, 1, 2, 0])
    self.assertAllEqual(bn.moving_mean, stats[0])
    self.assertAllEqual(bn.moving_variance, stats[1])
    self.assertAllEqual(model.get_layer("stem/conv").kernel, kernel)
    self.assertNotAllClose(model.get_layer("logits").kernel, head)
    finetune.freeze_backbone(model, frozen=False)
    self.assertGreater(len(model.trainable_variables), 10)

  def pretrained_checkpoint(self, classes=5):
    source = build(num_classes=classes)
    train_step(source, images(1), [i % classes for i in range(4)])  # move weights and BN statistics
    prefix = tf.train.Checkpoint(model=source).write(
        os.path.join(self.get_temp_dir(), "checkpoints", "ckpt-1"))
    return source, prefix

  def test_zero_head_starts_at_zero_logits_and_only_the_head_learns(self):
    """BiT's zero head: logits exactly 0 at step 0; the first step's gradient is 0 for
    every backbone variable (dL/dfeatures = dL/dlogits W^T with W = 0), not for the head
    (dL/db = softmax(0) - y = 1/C - y)."""
    labels = [0, 1, 2, 0]
    nfnet = functools.partial(registry.build, "nfnet_nano", input_shape=(16, 16, 3))
    for base, x in ((build, images()), (nfnet, tf.image.resize(images(), [16, 16]))):
      tf_keras.utils.set_random_seed(0)
      model = finetune.finetune_model(base=base, num_classes=3, zero_init_head=True)
      self.assertAllEqual(model(x, training=False), np.zeros([4, 3]), msg=model.name)
      with tf.GradientTape() as tape:
        logits = model(x, training=True)
        loss = tf.reduce_mean(tf_keras.losses.sparse_categorical_crossentropy(
            labels, logits, from_logits=True))
      self.assertAllEqual(logits, np.zeros([4, 3]), msg=model.name)
      grads = dict(zip((v.name for v in model.trainable_variables),
                       tape.gradient(loss, model.trainable_variables)))
      backbone = [n for n in grads if not n.startswith("logits/")]
      self.assertGreater(len(backbone), 10)
      for name in backbone:
        self.assertAllEqual(grads[name], np.zeros(grads[name].shape), msg=name)
      self.assertAllClose(grads["logits/bias:0"],
                          np.mean(1 / 3 - np.eye(3)[labels], axis=0), atol=1e-6)
      self.assertGreater(float(tf.reduce_max(tf.abs(grads["logits/kernel:0"]))), 0.0)
    # Without the switch the head is the builder's (random: non-zero logits).
    plain = finetune.finetune_model(base=build, num_classes=3)
    self.assertGreater(float(tf.reduce_max(tf.abs(plain(images())))), 0.0)

  def test_zero_head_refuses_to_zero_a_restored_head(self):
    _, prefix = self.pretrained_checkpoint(classes=3)
    with self.assertRaisesRegex(ValueError, "zero_init_head zeroes the head that init_scope "
                                "'all' restores"):
      finetune.finetune_model(base=build, num_classes=3, init_checkpoint=prefix,
                              init_scope="all", zero_init_head=True)
    with self.assertRaisesRegex(ValueError, "zero_init_head='yes' must be True or False"):
      finetune.finetune_model(base=build, num_classes=3, zero_init_head="yes")
    # The backbone from the checkpoint, a new zero head.
    model = finetune.finetune_model(base=build, num_classes=3, init_checkpoint=prefix,
                                    zero_init_head=True)
    self.assertAllEqual(model.get_layer("logits").kernel, np.zeros([64, 3]))

  def test_backbone_scope_takes_all_but_the_head(self):
    source, prefix = self.pretrained_checkpoint(classes=5)
    model = finetune.finetune_model(
        base=build, num_classes=3, init_checkpoint=os.path.dirname(prefix))
    for layer in model.layers:
      if layer.name == "logits":
        self.assertEqual(layer.kernel.shape, (64, 3))
      elif layer.weights:
        for got, want in zip(layer.weights, source.get_layer(layer.name).weights):
          self.assertAllEqual(got, want, msg=layer.name)

  def test_all_scope_restores_the_head_too(self):
    source, prefix = self.pretrained_checkpoint(classes=3)
    model = finetune.finetune_model(base=build, num_classes=3, init_checkpoint=prefix,
                                    init_scope="all")
    self.assertAllEqual(model.get_layer("logits").kernel, source.get_layer("logits").kernel)
    x = images(2)
    self.assertAllClose(model(x), source(x))

  def test_model_garden_checkpoint_initialises_resnet50_v1_5(self):
    from official.vision.modeling import classification_model  # pylint: disable=g-import-not-at-top
    from official.vision.modeling.backbones import resnet  # pylint: disable=g-import-not-at-top
    tf_keras.utils.set_random_seed(1)
    specs = tf_keras.layers.InputSpec(shape=[None, 32, 32, 3])
    garden = classification_model.ClassificationModel(
        resnet.ResNet(model_id=50, input_specs=specs), num_classes=7, input_specs=specs)
    # As official/core/base_trainer.py checkpoints a ClassificationModel.
    path = tf.train.Checkpoint(
        global_step=tf.Variable(5, dtype=tf.int64), model=garden,
        optimizer=tf_keras.optimizers.SGD(0.1), **garden.checkpoint_items).write(
            os.path.join(self.get_temp_dir(), "garden", "ckpt-5"))
    x = images()[:2]
    x = tf.image.resize(x, [32, 32])

    ours = registry.build("resnet50_v1_5", num_classes=7, input_shape=(32, 32, 3))
    finetune.init_from_checkpoint(ours, os.path.dirname(path), scope="all")
    theirs = garden.backbone.weights
    self.assertLen(ours.get_layer("backbone").weights, len(theirs))
    for a, b in zip(ours.get_layer("backbone").weights, theirs):
      self.assertAllEqual(a, b, msg=b.name)
    self.assertAllClose(ours(x, training=False), garden(x, training=False), atol=1e-5)

    other = registry.build("resnet50_v1_5", num_classes=10, input_shape=(32, 32, 3))
    head = other.get_layer("logits").get_weights()
    finetune.init_from_checkpoint(other, path, scope="backbone")
    self.assertAllClose(other.get_layer("backbone")(x, training=False)["5"],
                        garden.backbone(x, training=False)["5"], atol=1e-5)
    for before, after in zip(head, other.get_layer("logits").get_weights()):
      self.assertAllEqual(before, after)
    with self.assertRaisesRegex(finetune.CheckpointError,
                                r"head kernel \[2048, 7\] does not fit .* init_scope 'backbone'"):
      finetune.init_from_checkpoint(other, path, scope="all")
    with self.assertRaisesRegex(finetune.CheckpointError, "is a Model Garden checkpoint"):
      finetune.init_from_checkpoint(build(num_classes=7), path, scope="backbone")

  def test_bad_checkpoints_are_one_clear_error(self):
    _, prefix = self.pretrained_checkpoint(classes=5)
    with self.assertRaisesRegex(finetune.CheckpointError, "does not fit"):
      finetune.finetune_model(base=build, num_classes=3, init_checkpoint=prefix,
                              init_scope="all")
    with self.assertRaisesRegex(finetune.CheckpointError, "not found"):
      finetune.finetune_model(base=build, num_classes=3, init_checkpoint=prefix + "x")
    empty = os.path.join(self.get_temp_dir(), "empty")
    os.makedirs(empty)
    with self.assertRaisesRegex(finetune.CheckpointError, "no checkpoint in directory"):
      finetune.finetune_model(base=build, num_classes=3, init_checkpoint=empty)
    data = tf.io.gfile.glob(prefix + ".data-*")[0]
    with open(data, "r+b") as f:
      f.truncate(100)
    with self.assertRaisesRegex(finetune.CheckpointError, "checkpoint"):
      finetune.finetune_model(base=build, num_classes=3, init_checkpoint=prefix)
    other = tf_keras.Sequential([tf_keras.Input((2,)), tf_keras.layers.Dense(2)])
    other_prefix = tf.train.Checkpoint(model=other).write(
        os.path.join(self.get_temp_dir(), "other", "ckpt-1"))
    with self.assertRaisesRegex(finetune.CheckpointError, "no model head|does not fit"):
      finetune.finetune_model(base=build, num_classes=3, init_checkpoint=other_prefix)


if __name__ == "__main__":
  tf.test.main()
