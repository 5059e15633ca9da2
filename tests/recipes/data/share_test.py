"""recipes/data/share.py: pipeline p of P keeps examples [p B/P, (p+1) B/P) of every
global batch of B; the shares of all pipelines together are the global batches."""

import numpy as np
import tensorflow as tf

from recipes.data import share as share_lib


class ShareTest(tf.test.TestCase):

  def test_keep_and_cut_take_the_contiguous_share(self):
    batch, count = 8, 2
    positions = np.arange(3 * batch)
    kept, cut = [], []
    for index in range(count):
      share = share_lib.Share(index=index, count=count, batch=batch, per_replica=2)
      ds = tf.data.Dataset.from_tensor_slices(positions).enumerate()
      kept.append([int(p) for p, _ in share.keep(ds)])
      cut.append(np.concatenate([b.numpy() for (b,) in share.cut(
          tf.data.Dataset.from_tensor_slices((positions,)).batch(batch))]))
    # Pipeline 0: 0-3, 8-11, 16-19; pipeline 1: 4-7, 12-15, 20-23.
    want = [[g * batch + index * 4 + i for g in range(3) for i in range(4)]
            for index in range(count)]
    self.assertEqual(kept, want)
    self.assertEqual([c.tolist() for c in cut], want)
    self.assertEqual(sorted(sum(kept, [])), positions.tolist())

  def test_one_pipeline_is_whole(self):
    share = share_lib.Share.of(None, 16)
    self.assertTrue(share.whole)
    self.assertEqual((share.size, share.per_replica), (16, 16))
    context = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=1,
                                         num_replicas_in_sync=4)
    share = share_lib.Share.of(context, 16)
    self.assertEqual((share.index, share.size, share.per_replica, share.whole),
                     (1, 8, 4, False))


if __name__ == "__main__":
  tf.test.main()
