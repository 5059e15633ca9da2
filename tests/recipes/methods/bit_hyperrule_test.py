"""BiT-HyperRule against the paper (Kolesnikov et al. 2020, sec. 3.3) and its released
rule (google-research/big_transfer, bit_hyperrule.py), then through the trainer."""

import os

from absl.testing import parameterized
import gin
import numpy as np
import tensorflow as tf
import tf_keras

from recipes import build
from recipes import configurables  # pylint: disable=unused-import  (Gin names)
from recipes import experiment
from recipes import trainer
from recipes.data import pipeline
from recipes.data import source as source_lib
from recipes.methods import bit_hyperrule

# The published supports (steps): warm-up end, three 10x decays, end of training.
PUBLISHED = [(500, (100, 200, 300, 400, 500)),
             (19_999, (100, 200, 300, 400, 500)),
             (20_000, (500, 3000, 6000, 9000, 10_000)),
             (499_999, (500, 3000, 6000, 9000, 10_000)),
             (500_000, (500, 6000, 12_000, 18_000, 20_000)),
             (1_281_167, (500, 6000, 12_000, 18_000, 20_000))]


def released_rate(step, supports, base_lr):
  """big_transfer's get_lr, as released (None past the end)."""
  if step < supports[0]:
    return base_lr * step / supports[0]
  if step >= supports[-1]:
    return None
  for s in supports[1:]:
    if s < step:
      base_lr /= 10
  return base_lr


class BitHyperRuleTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.parameters(*PUBLISHED)
  def test_schedule_length_from_data_size(self, size, supports):
    rule = bit_hyperrule.BitHyperRule()
    self.assertEqual(rule.supports(size), supports)
    self.assertEqual(rule.steps(size), supports[-1])

  @parameterized.parameters(*PUBLISHED[::2])
  def test_rate_is_the_released_rule(self, size, supports):
    schedule = bit_hyperrule.BitHyperRule().learning_rate(size, batch_size=512)
    steps = sorted({0, 1, supports[-1] - 1} | {s + d for s in supports[:-1] for d in (-1, 0, 1)})
    got = [float(schedule(s)) for s in steps]
    want = [released_rate(s, supports, 0.003) for s in steps]
    self.assertAllClose(got, want, rtol=1e-5, atol=1e-12)

  def test_rate_follows_the_batch(self):
    schedule = bit_hyperrule.BitHyperRule().learning_rate(1000, batch_size=128)
    self.assertAllClose(float(schedule(100)), 0.003 / 4)

  @parameterized.parameters(((8, 8), (160, 128)), ((32, 32), (160, 128)),
                            ((95, 97), (160, 128)), ((96, 96), (512, 480)),
                            ((375, 500), (512, 480)))
  def test_resolution_from_image_area(self, size, want):
    self.assertEqual(bit_hyperrule.BitHyperRule().resolution(*size), want)

  def test_mixup_from_twenty_thousand_examples(self):
    rule = bit_hyperrule.BitHyperRule()
    self.assertEqual(rule.mixup_alpha(19_999), 0.0)
    self.assertEqual(rule.mixup_alpha(20_000), 0.1)

  def test_shortened_schedule_keeps_its_shape(self):
    self.assertEqual(bit_hyperrule.BitHyperRule(schedule_scale=0.1).supports(100),
                     (10, 20, 30, 40, 50))
    self.assertEqual(bit_hyperrule.BitHyperRule(schedule_scale=0.001).supports(100),
                     (1, 2, 3, 4, 5))
    with self.assertRaisesRegex(ValueError, "schedule_scale=0 must be in"):
      bit_hyperrule.BitHyperRule(schedule_scale=0)

  def test_plan_takes_length_rate_resolution_and_mixup_from_the_data(self):
    images = np.zeros([1, 40, 40, 3], np.uint8)
    labels = np.arange(20_000) % 10
    big = source_lib.Source(
        "big", [str(c) for c in range(10)], labels, labels[:10],
        lambda split, indices: tf.data.Dataset.from_tensor_slices((images, labels[:1])))
    feed = pipeline.InputPipeline(batch_size=64, image_size=8)
    data = build.Data(big, np.arange(20_000), np.zeros([0], np.int64), np.bincount(labels))
    optimization = experiment.Optimization(hyperrule=bit_hyperrule.BitHyperRule())
    plan = build.plan_run(optimization, experiment.Runtime(), data, feed)
    self.assertEqual(plan.steps, 10_000)
    self.assertEqual(plan.pipeline, dict(train_resize=160, image_size=128, eval_image_size=128,
                                     mixup_alpha=0.1))
    self.assertEqual(plan.derived["Runtime.steps"], 10_000)
    self.assertEqual(plan.derived["InputPipeline.image_size"], 128)
    self.assertEqual(feed.image_size, 8)  # the Gin-built pipeline is left as built
    schedule = plan.learning_rate(total_steps=123, steps_per_epoch=1)
    self.assertAllClose(float(schedule(5000)), 0.003 * 64 / 512 / 10)  # past 3000 only
    self.assertIn("20000 examples (medium) -> 10000 steps", plan.rule_note)
    # A recipe with CutMix keeps its own mixing.
    plan = build.plan_run(optimization, experiment.Runtime(), data,
                          pipeline.InputPipeline(batch_size=64, cutmix_alpha=1.0))
    self.assertNotIn("mixup_alpha", plan.pipeline)

  def test_operative_config_holds_what_the_run_used(self):
    gin.clear_config()
    tf_keras.backend.clear_session()
    gin.parse_config("""
        Task.data = @digits
        Task.model = @zoo.build
        zoo.build.name = 'resnet20_cifar'
        zoo.build.num_classes = 10
        zoo.build.input_shape = (None, None, 3)
        Task.long_tail = @LongTail()
        LongTail.rho = 1
        LongTail.n_max = 20
        InputPipeline.batch_size = 32
        InputPipeline.image_size = 64
        Optimization.hyperrule = @BitHyperRule()
        BitHyperRule.schedule_scale = 0.02
        BitHyperRule.small_resolution = (20, 16)
        Runtime.epochs = 99
        Runtime.eval_every_epochs = 0
    """)
    used = {}
    original = trainer.Trainer.train_epoch

    def train_epoch(self, epoch, *args, **kwargs):
      done = original(self, epoch, *args, **kwargs)
      built = self.built
      used.update(image_size=built.pipeline.image_size,
                  train_resize=built.pipeline.train_resize,
                  rate=float(built.optimizer.learning_rate))
      return done

    model_dir = os.path.join(self.get_temp_dir(), "run")
    with tf.compat.v1.test.mock.patch.object(trainer.Trainer, "train_epoch", train_epoch):
      metrics = trainer.train_and_evaluate(model_dir, tf.distribute.OneDeviceStrategy("/cpu:0"))
    self.assertEqual(metrics["steps"], 10)  # supports (2, 4, 6, 8, 10)
    self.assertEqual(metrics["epochs"], 2)  # 200 examples: 6 steps an epoch
    self.assertIn("8x8 images -> resize 20, crop 16", metrics["hyperrule"])
    self.assertEqual((used["image_size"], used["train_resize"]), (16, 20))
    # After the last step (10): three decays passed.
    self.assertAllClose(used["rate"], 0.003 * 32 / 512 / 1000)
    # The operative config, parsed again, says what the run used.
    gin.clear_config()
    with open(os.path.join(model_dir, "operative_config.gin")) as f:
      gin.parse_config(f.read())
    self.assertEqual(gin.query_parameter("InputPipeline.image_size"), used["image_size"])
    self.assertEqual(gin.query_parameter("InputPipeline.train_resize"), used["train_resize"])
    self.assertEqual(gin.query_parameter("Runtime.steps"), metrics["steps"])
    gin.clear_config()


if __name__ == "__main__":
  tf.test.main()
