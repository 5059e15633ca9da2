"""uint8 batches (`InputPipeline.uint8_batches`, the default unless the batches are
mixed): whole pixels leave the host and the train and eval steps normalise them on the
device. Where the augmentation keeps whole
pixels (pad, crop, flip of uint8 images) the model sees exactly the numbers of the
host-normalised pipeline; after a resize, they differ by the rounding alone."""

import numpy as np
import tensorflow as tf
import tf_keras

from recipes import train_step
from recipes.data import pipeline
from tests.recipes.data import pipeline_test

MEAN, STD = (0.5, 0.4, 0.3), (0.2, 0.25, 0.5)


def batches(dataset):
  return [(x.numpy(), y.numpy()) for x, y in dataset]


class Uint8BatchesTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    self.source, _ = pipeline_test.toy_source(n_train=16, n_test=7, size=6)
    self.plain = pipeline.InputPipeline(
        batch_size=4, image_size=6, eval_image_size=6, eval_crop_fraction=1.0,
        eval_resize_method="bilinear", random_crop_padding=2, random_crop_fill=0,
        random_flip=True, mean=MEAN, std=STD, randaugment=(), uint8_batches=False)
    self.whole = self.plain.replace(uint8_batches=True)

  def test_whole_pixel_augmentation_gives_the_same_numbers(self):
    indices = np.arange(16)
    floats = batches(self.plain.train_dataset(self.source, indices, 1, 3))
    whole = batches(self.whole.train_dataset(self.source, indices, 1, 3))
    self.assertLen(whole, 4)
    for (x, y), (x8, y8) in zip(floats, whole):
      self.assertEqual(x8.dtype, np.uint8)
      self.assertAllEqual(y, y8)
      self.assertAllEqual(self.whole.device_inputs(tf.constant(x8)), x)
    floats = batches(self.plain.eval_dataset(self.source))
    whole = batches(self.whole.eval_dataset(self.source))
    for (x, y), (x8, y8) in zip(floats, whole):
      self.assertEqual(x8.dtype, np.uint8)
      self.assertAllEqual(y, y8)  # the padding examples too
      real = y != pipeline.PAD_LABEL  # the host's eval normalisation, (x / 255 - mean) /
      # std, and the steps' one multiply-add agree to float32 rounding
      self.assertAllClose(self.whole.device_inputs(tf.constant(x8)).numpy()[real], x[real],
                          rtol=0, atol=1e-6)
    self.assertAllEqual(whole[-1][0][3], np.zeros([6, 6, 3]))  # a padding example

  def test_after_a_resize_the_pixels_differ_by_rounding_alone(self):
    plain = self.plain.replace(random_crop_padding=0, random_resized_crop=(0.3, 1.0),
                               eval_image_size=4)
    whole = plain.replace(uint8_batches=True)
    bound = 0.5 / 255 / min(STD) + 1e-6
    for floats, eights in ((plain.train_dataset(self.source, np.arange(16), 0, 1),
                            whole.train_dataset(self.source, np.arange(16), 0, 1)),
                           (plain.eval_dataset(self.source), whole.eval_dataset(self.source))):
      gaps = [np.abs(whole.device_inputs(tf.constant(x8)).numpy() - x)[
          y != pipeline.PAD_LABEL].max() for (x, y), (x8, _) in zip(batches(floats),
                                                                   batches(eights))]
      self.assertLessEqual(max(gaps), bound)
      self.assertGreater(max(gaps), 1e-4)  # the resize left fractions: rounded off

  def test_a_grey_model_takes_the_luma_on_the_device(self):
    grey = self.whole.replace(mean=(0.45,), std=(0.25,))
    x8, _ = next(iter(grey.eval_dataset(self.source)))
    self.assertEqual(x8.shape, (4, 6, 6, 3))  # RGB leaves the host
    x, _ = next(iter(self.plain.replace(mean=(0.45,), std=(0.25,)).eval_dataset(self.source)))
    self.assertAllClose(grey.device_inputs(x8), x, atol=1e-5)
    self.assertEqual(x.shape, (4, 6, 6, 1))

  def test_the_train_and_eval_steps_normalise_on_the_device(self):
    strategy = tf.distribute.OneDeviceStrategy("/cpu:0")

    def make(device_inputs):
      with strategy.scope():
        tf_keras.utils.set_random_seed(0)
        inputs = tf_keras.Input((6, 6, 3))
        model = tf_keras.Model(inputs, tf_keras.layers.Dense(3)(
            tf_keras.layers.Flatten()(inputs)))
        optimizer = tf_keras.optimizers.SGD(0.1)
        optimizer.build(model.trainable_variables)
      step = train_step.TrainStep(train_step.StepParts(
          strategy=strategy, model=model, optimizer=optimizer,
          loss_fn=lambda y, logits: tf_keras.losses.sparse_categorical_crossentropy(
              y, logits, from_logits=True),
          global_batch=4, device_inputs=device_inputs))
      return step, model, train_step.EvalStep(strategy, model, device_inputs=device_inputs)

    results = []
    for p in (self.plain, self.whole):
      step, model, evaluator = make(p.device_inputs)
      dataset = p.train_dataset(self.source, np.arange(16), 0, 3)
      step.loop(iter(strategy.experimental_distribute_dataset(dataset)), 4)
      _, predicted = evaluator.predict(lambda _, p=p: p.eval_dataset(self.source),
                                       pipeline.PAD_LABEL)
      results.append(([v.numpy() for v in model.trainable_variables], predicted))
    (weights, predicted), (weights8, predicted8) = results
    for w, w8 in zip(weights, weights8):
      self.assertAllClose(w, w8, rtol=1e-6, atol=1e-7)
    self.assertAllEqual(predicted, predicted8)
    self.assertNotAllClose(weights[0], make(None)[1].trainable_variables[0].numpy())

  def test_uint8_unless_the_batches_are_mixed_by_default(self):
    default = self.plain.replace(uint8_batches=None)
    self.assertIsNone(pipeline.InputPipeline().uint8_batches)  # the dataclass's default
    x8, _ = next(iter(default.train_dataset(self.source, np.arange(16), 1, 3)))
    self.assertEqual(x8.dtype, tf.uint8)
    self.assertEqual(next(iter(default.eval_dataset(self.source)))[0].dtype, tf.uint8)
    self.assertAllEqual(x8, next(iter(self.whole.train_dataset(
        self.source, np.arange(16), 1, 3)))[0])
    for mixed in (dict(mixup_alpha=0.2), dict(cutmix_alpha=1.0)):
      p = default.replace(**mixed)
      self.assertFalse(p.hands_uint8)
      x, y = next(iter(p.train_dataset(self.source, np.arange(16), 1, 3)))
      self.assertEqual(x.dtype, tf.float32)
      self.assertEqual(y.shape, (4, 3))  # soft labels: the batch was mixed
      self.assertEqual(next(iter(p.eval_dataset(self.source)))[0].dtype, tf.float32)

  def test_refusals(self):
    with self.assertRaisesRegex(ValueError, "uint8_batches=True hands whole pixels, which "
                                "MixUp"):
      self.plain.replace(uint8_batches=True, mixup_alpha=0.2)
    with self.assertRaisesRegex(ValueError, "uint8_batches='yes' must be None, True or "
                                "False"):
      self.plain.replace(uint8_batches="yes").check()


if __name__ == "__main__":
  tf.test.main()
