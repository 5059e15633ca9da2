"""What a TPU run needs settled on the host, checked without a TPU: static shapes of
every dataset fed to the replicas, bfloat16 not float16, batch and loop advice."""

import types

import numpy as np
import tensorflow as tf

from recipes import build
from recipes import experiment
from recipes import strategies
from recipes.data import pipeline as pipeline_lib
from recipes.errors import ConfigError
from tests.recipes.data import pipeline_test

EIGHT_CORES = types.SimpleNamespace(num_replicas_in_sync=8)  # a v3-8 / v4-8's replicas


def toy_data():
  source, _ = pipeline_test.toy_source(n_train=40, n_test=13)
  return build.Data(source, np.arange(30), np.arange(30, 40),
                      np.bincount(source.train_labels[:30], minlength=3))


class TpuChecksTest(tf.test.TestCase):

  def test_the_trainers_datasets_are_static_for_eight_replicas(self):
    pipeline = pipeline_lib.InputPipeline(batch_size=16, image_size=8,
                                          random_crop_padding=2, mixup_alpha=0.2)
    runtime = experiment.Runtime(mixed_precision="mixed_bfloat16", steps_per_loop=50)
    self.assertEqual(build.tpu_checks(EIGHT_CORES, runtime, pipeline, toy_data()),
                     ["TPU: 2 examples a replica is not a multiple of 8; XLA pads the "
                      "batch dimension, so a multiple of 8 (128 ideally) wastes nothing"])

  def test_float16_and_a_one_step_loop(self):
    pipeline = pipeline_lib.InputPipeline(batch_size=64, image_size=8)
    with self.assertRaisesRegex(ConfigError, "set Runtime.mixed_precision = "
                                "'mixed_bfloat16'"):
      build.tpu_checks(EIGHT_CORES, experiment.Runtime(mixed_precision="mixed_float16"),
                         pipeline, toy_data())
    advice = build.tpu_checks(EIGHT_CORES, experiment.Runtime(), pipeline, toy_data())
    self.assertLen(advice, 1)
    self.assertIn("steps_per_loop = 1", advice[0])

  def test_a_dynamic_batch_is_refused(self):
    ragged = tf.data.Dataset.from_tensor_slices(np.zeros([10, 4], np.float32)).batch(3)
    with self.assertRaisesRegex(ConfigError, r"the training data's elements have shape "
                                r"\(None, 4\), not static"):
      strategies.tpu_advice(experiment.Runtime(steps_per_loop=10),
                 pipeline_lib.InputPipeline(batch_size=64), 8, {"training": ragged})


if __name__ == "__main__":
  tf.test.main()
