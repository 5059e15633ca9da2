"""Recompute (gradient checkpointing): Chen et al. 2016, "Training Deep Nets with
Sublinear Memory Cost", arXiv:1604.06174, section 4.

A segment of the network runs forward without keeping its activations for the
backward pass; only its inputs are kept, and the backward pass runs the segment
forward again to get them (`tf.recompute_grad`). With sqrt(n) segments of a chain of
n layers, activation memory falls from O(n) to O(sqrt(n)) for one extra forward pass.

Made exact for Keras models, where a plain `tf.recompute_grad` is not:
- random layers (Dropout, StochasticDepth) draw the same masks in the recomputation:
  their generators are set back to the state they had when the segment first ran;
- stateful layers (BatchNorm's moving statistics) are updated once a step, not twice:
  their non-trainable variables are set back to their pre-step values before the
  recomputation updates them again, so the step leaves exactly one update.

`recompute(model, pattern, every)` rebuilds a functional model with each group of
`every` consecutive blocks (layers whose names share the key `pattern` captures)
wrapped in a `Recompute` layer. The result shares the layers, hence the weights, of
`model`.
"""

import re

import tensorflow as tf
import tf_keras

from tricks import layer_rng


class Recompute(tf_keras.layers.Layer):
  """Runs `segment` (a Keras model) with its activations recomputed in backward."""

  def __init__(self, segment, **kwargs):
    super().__init__(**kwargs)
    self.segment = segment

  def call(self, inputs, training=None):
    inputs = list(inputs) if isinstance(inputs, (list, tuple)) else [inputs]
    if not training:  # nothing to save memory for
      return self.segment(inputs, training=training)
    generators = layer_rng.layer_random_generators(self.segment)
    rng_vars = [generator.state for generator in generators]
    state_vars = list(self.segment.non_trainable_variables)
    # Values at the segment's first run: the recomputation starts again from these.
    rng_start = [tf.identity(v) for v in rng_vars]
    state_start = [tf.identity(v) for v in state_vars]

    def run(*xs):
      for variable, value in zip(rng_vars + state_vars, rng_start + state_start):
        variable.assign(value)
      outputs = self.segment(list(xs), training=training)
      return outputs

    return tf.recompute_grad(run)(*inputs)

  def get_config(self):
    return dict(super().get_config(),
                segment=tf_keras.layers.serialize(self.segment))

  @classmethod
  def from_config(cls, config):
    config = dict(config)
    config["segment"] = tf_keras.layers.deserialize(config["segment"])
    return cls(**config)


def _is_keras_tensor(value):
  return hasattr(value, "_keras_history")


def block_segments(model, pattern, every=1):
  """Lists of layer names, one a segment: `every` consecutive blocks each.

  A layer belongs to the block named by `pattern`'s first group (or its whole match)
  in the layer's name, e.g. r"^(nf_block_\\d+)/" or r"^(conv\\d_block\\d+)_".
  """
  if every < 1:
    raise ValueError(f"recompute every={every}: use a positive number of blocks")
  blocks = {}
  for layer in model.layers:
    match = re.search(pattern, layer.name)
    if match:
      blocks.setdefault(match.group(1) if match.groups() else match.group(0),
                        []).append(layer.name)
  if not blocks:
    raise ValueError(f"no layer of model {model.name!r} matches the recompute pattern "
                     f"{pattern!r}; its layers are named like {model.layers[-1].name!r}")
  keys = list(blocks)
  return [sum((blocks[key] for key in keys[i:i + every]), [])
          for i in range(0, len(keys), every)]


def recompute(model, pattern, every=1):
  """`model` rebuilt with every `every` blocks matching `pattern` recomputed."""
  return recompute_segments(model, block_segments(model, pattern, every))


def _boundaries(model, nodes, segments, segment_of):
  """Each segment's boundary: ({id(tensor): segment producing it}, the tensors each
  segment takes from outside, the tensors of each segment used outside it)."""
  produced_in = {}
  for node in nodes:
    if node.layer.name in segment_of:
      for tensor in tf.nest.flatten(node.outputs):
        produced_in[id(tensor)] = segment_of[node.layer.name]
  seg_inputs = [[] for _ in segments]
  seg_outputs = [[] for _ in segments]

  def add(listing, tensor):
    if all(t is not tensor for t in listing):
      listing.append(tensor)

  for node in nodes:
    inside = segment_of.get(node.layer.name)
    for tensor in node.keras_inputs:
      source = produced_in.get(id(tensor))
      if inside is not None and source != inside:
        add(seg_inputs[inside], tensor)
      if source is not None and source != inside:
        add(seg_outputs[source], tensor)
  for tensor in tf.nest.flatten(model.outputs):
    if id(tensor) in produced_in:
      add(seg_outputs[produced_in[id(tensor)]], tensor)
  return produced_in, seg_inputs, seg_outputs


def recompute_segments(model, segments):
  """`model` (functional) rebuilt with each list of layer names one `Recompute` layer.

  A segment may take and give any number of tensors; the layers keep their weights.
  """
  if not getattr(model, "_is_graph_network", False):
    raise ValueError(f"recompute needs a functional Keras model; {model.name!r} is "
                     f"a {type(model).__name__}")
  segment_of = {name: i for i, names in enumerate(segments) for name in names}
  nodes = [node for depth in sorted(model._nodes_by_depth, reverse=True)  # pylint: disable=protected-access
           for node in model._nodes_by_depth[depth]]  # pylint: disable=protected-access

  produced_in, seg_inputs, seg_outputs = _boundaries(model, nodes, segments, segment_of)

  wrappers = []
  for i, (ins, outs) in enumerate(zip(seg_inputs, seg_outputs)):
    sub = tf_keras.Model(ins, outs, name=f"segment_{i}")
    wrappers.append(Recompute(sub, name=f"recompute_{i}"))

  mapped = {id(t): t for t in tf.nest.flatten(model.inputs)}

  def resolve(tensor):
    if id(tensor) not in mapped:  # a segment's output: call its wrapper once
      i = produced_in[id(tensor)]
      results = tf.nest.flatten(wrappers[i]([resolve(t) for t in seg_inputs[i]]))
      for old, new in zip(seg_outputs[i], results):
        mapped[id(old)] = new
    return mapped[id(tensor)]

  def rewire(structure):
    return tf.nest.map_structure(
        lambda v: resolve(v) if _is_keras_tensor(v) else v, structure)

  for node in nodes:
    if node.is_input or node.layer.name in segment_of:
      continue
    outputs = node.layer(*rewire(node.call_args), **rewire(node.call_kwargs))
    for old, new in zip(tf.nest.flatten(node.outputs), tf.nest.flatten(outputs)):
      mapped[id(old)] = new
  outputs = tf.nest.map_structure(resolve, model.outputs)
  if len(outputs) == 1 and not isinstance(model.output, (list, tuple)):
    outputs = outputs[0]
  return tf_keras.Model(model.inputs, outputs, name=model.name)
