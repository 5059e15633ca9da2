"""Per-worker input shards: the per-replica batches of every input pipeline, put in
replica order, are exactly one process's global batches (training and evaluation)."""

from absl.testing import parameterized
import numpy as np
import tensorflow as tf

from recipes.data import pipeline
from tricks import sampling
from tests.recipes.data import pipeline_test


def replica_batches(make, pipelines, replicas_per_pipeline):
  """[global step][replica] (images, labels) from `make(context)` of each pipeline; a
  pipeline's consecutive batches go to its replicas in order (as tf.distribute's
  multi-device iterator hands them out)."""
  replicas = pipelines * replicas_per_pipeline
  streams = []
  for index in range(pipelines):
    context = tf.distribute.InputContext(pipelines, index, replicas)
    streams.append([(x.numpy(), y.numpy()) for x, y in make(context)])
  steps = len(streams[0]) // replicas_per_pipeline
  for stream in streams:
    assert len(stream) == steps * replicas_per_pipeline, (len(stream), steps)
  return [[stream[step * replicas_per_pipeline + r]
           for stream in streams for r in range(replicas_per_pipeline)]
          for step in range(steps)]


def assert_same_batches(test, whole, sharded):
  test.assertLen(sharded, len(whole))
  for (x, y), parts in zip(whole, sharded):
    test.assertAllEqual(np.concatenate([p[1] for p in parts]), y)
    test.assertAllClose(np.concatenate([p[0] for p in parts]), x, atol=0, rtol=0)


class ShardingTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.product(
      layout=[(2, 1), (1, 2), (2, 2), (4, 1)],
      extra=[{}, {"mixup_alpha": 0.2}, {"echo_factor": 2},
             {"sampler": sampling.Sampler("class")}])
  def test_training_shards_rebuild_the_global_batches(self, layout, extra):
    source, _ = pipeline_test.toy_source(n_train=36)
    p = pipeline.InputPipeline(batch_size=8, image_size=8, random_crop_padding=2,
                               random_flip=True, **extra)
    indices = np.arange(2, 36)  # 34 examples: 4 whole global batches, 2 left over
    whole = [(x.numpy(), y.numpy()) for x, y in p.train_dataset(source, indices, 1, 5)]
    self.assertLen(whole, p.steps_per_epoch(len(indices)))
    sharded = replica_batches(lambda c: p.train_dataset(source, indices, 1, 5, c), *layout)
    self.assertEqual(sharded[0][0][0].shape[0], 8 // (layout[0] * layout[1]))
    assert_same_batches(self, whole, sharded)

  def test_a_sampled_epoch_is_drawn_from_the_sampler_after_its_start(self):
    source, _ = pipeline_test.toy_source(n_train=36)
    labels = np.repeat([0, 1, 2], [20, 10, 2])  # a long tail over the toy's 3 classes
    source.train_labels[:32] = labels
    indices = np.arange(32)
    plain = pipeline.InputPipeline(batch_size=8, image_size=6)
    drs = plain.replace(sampler=sampling.Sampler("class", start_epoch=1))

    def labels_in(p, epoch):
      return np.concatenate([y.numpy() for _, y in p.train_dataset(source, indices, epoch, 4)])

    self.assertAllEqual(labels_in(drs, 0), labels_in(plain, 0))  # deferred: as before
    order = drs.sampler.epoch_order(labels, 3, 1, 4)
    self.assertAllEqual(labels_in(drs, 1), labels[order])  # then the sampler's draw

  @parameterized.parameters((2, 1), (1, 2), (2, 2))
  def test_an_epoch_sees_each_example_once_across_workers(self, pipelines, per_pipeline):
    source, _ = pipeline_test.toy_source(n_train=32)
    p = pipeline.InputPipeline(batch_size=8, image_size=6)
    sharded = replica_batches(
        lambda c: p.train_dataset(source, np.arange(32), 0, 3, c), pipelines, per_pipeline)
    images = np.concatenate([x for step in sharded for x, _ in step])
    self.assertLen(images, 32)
    # Every training image once (normalised pixels identify it).
    self.assertLen({x.tobytes() for x in images}, 32)

  @parameterized.parameters((2, 1), (1, 2), (2, 2))
  def test_evaluation_shards_rebuild_the_padded_split(self, pipelines, per_pipeline):
    source, _ = pipeline_test.toy_source(n_test=13)
    p = pipeline.InputPipeline(batch_size=4, image_size=6)
    whole = [(x.numpy(), y.numpy()) for x, y in p.eval_dataset(source)]
    self.assertLen(whole, 4)  # 13 examples padded to 16
    sharded = replica_batches(lambda c: p.eval_dataset(source, context=c), pipelines,
                              per_pipeline)
    assert_same_batches(self, whole, sharded)
    labels = np.concatenate([y for step in sharded for _, y in step])
    self.assertEqual(int((labels == pipeline.PAD_LABEL).sum()), 3)


if __name__ == "__main__":
  tf.test.main()
