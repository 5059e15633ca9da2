"""One input pipeline's share of every global batch, when several workers feed replicas.

Given a `tf.distribute.InputContext` (from `distribute_datasets_from_function`), each
input pipeline (one a worker) yields per-replica batches of its own contiguous share of
every global batch: pipeline p of P takes examples [p B/P, (p+1) B/P) of each global
batch of B, so the replicas of all workers together see exactly the global batches of
one process, and an epoch sees every example once across workers. Every worker draws
the same shuffle (it is seeded) and keeps its share before augmenting, as TF's DATA
auto-sharding does (`Share.keep`); with MixUp / CutMix (which mix a global batch) or
data echoing the share is cut from the finished global batch instead (`Share.cut`).
"""

import dataclasses


@dataclasses.dataclass(frozen=True)
class Share:
  """Input pipeline `index` of `count`: its contiguous `size` examples of every global
  batch of `batch`, in per-replica batches of `per_replica`."""
  index: int
  count: int
  batch: int
  per_replica: int

  @classmethod
  def of(cls, context, batch):
    if context is None:
      return cls(0, 1, batch, batch)
    return cls(context.input_pipeline_id, context.num_input_pipelines, batch,
               context.get_per_replica_batch_size(batch))

  @property
  def size(self):
    return self.batch // self.count

  @property
  def whole(self):
    """Whether this pipeline yields whole global batches (one pipeline, one replica)."""
    return self.per_replica == self.batch

  def keep(self, enumerated):
    """(position, example) pairs -> those whose position falls in this share."""
    index, size, batch = self.index, self.size, self.batch
    return enumerated.filter(lambda position, _: position % batch // size == index)

  def cut(self, batches):
    """Global batches -> this share's per-replica batches."""
    begin, end = self.index * self.size, (self.index + 1) * self.size
    return batches.map(lambda *batch: tuple(x[begin:end] for x in batch)).unbatch().batch(
        self.per_replica, drop_remainder=True)
