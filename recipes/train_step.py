"""The distributed training step, and an inner loop of N of them in one tf.function.

Each replica computes

    per-example loss -> sum / global batch -> (scale) -> grads -> (unscale)
    -> all-reduce SUM across replicas -> gradient transforms -> apply

so gradient transforms (AGC) see the unscaled, all-reduced gradient and the optimizer
applies it without a second aggregation. With `sam` (tricks/sam.py: SAM, ImbSAM) the
gradient is SAM's: the all-reduced gradient gives the perturbation eps, the variables
move to w + eps for a second forward and backward pass, whose all-reduced gradient is
applied from w. Weight constraints (tricks/max_norm.py) project their variable after
each update, or with `every = "epoch"` after an epoch's last step (`end_epoch`, which
the trainer calls), on every replica alike. `loop(iterator, n)` runs n steps inside one
tf.function call, as Orbit's `steps_per_loop` and Keras's `steps_per_execution` do:
the host talks to the device once per loop, not once per step.

The non-finite guard runs on the device: each step's loss and global gradient norm
are tested with `tf.math.is_finite`, and the first step where one is NaN or Inf is
reported to the host with the loop's results (no host sync per step; the trainer
then rolls the whole loop back). Under float16 loss scaling the gradient norm is not
tested: an overflowing gradient there is the loss scaler's business (it skips the step
and lowers the scale).
"""

import dataclasses
from typing import Any, Callable, Optional, Sequence

import numpy as np
import tensorflow as tf
import tf_keras

from tricks import layer_lr
from tricks import sam as sam_lib


@dataclasses.dataclass(frozen=True)
class LoopResult:
  """One loop's per-step losses and accuracies, and the first step whose loss or
  gradient norm was not finite (`bad_step` -1: none; that step's values in `bad_loss`,
  `bad_grad_norm`)."""
  losses: np.ndarray
  accuracies: np.ndarray
  bad_step: int = -1
  bad_loss: float = 0.0
  bad_grad_norm: float = 0.0


@dataclasses.dataclass(frozen=True, kw_only=True)
class StepParts:
  """What a training step is made of (given by keyword)."""
  strategy: tf.distribute.Strategy
  model: tf_keras.Model
  optimizer: tf_keras.optimizers.Optimizer
  loss_fn: Callable
  global_batch: int
  gradient_transforms: Sequence[Callable] = ()
  l2: float = 0.0
  l2_variables: Sequence[tf.Variable] = ()
  layer_learning_rates: Optional[layer_lr.LayerLearningRates] = None
  jit_compile: bool = False
  sam: Optional[Any] = None  # tricks.sam.SAM / ImbSAM, built with the class counts
  # `.variable`, `.project(value)`, `.every` ("step" or "epoch"), e.g. tricks.MaxNorm
  weight_constraints: Sequence[Any] = ()
  # A batch's images as the model takes them, on the replica's device (the pipeline's
  # `device_inputs`: normalising uint8 batches); None: as they come.
  device_inputs: Optional[Callable] = None


class TrainStep:
  """The step and loop functions of one run; `retrace()` after trainable layers change
  (the functions capture the trainable variables when traced)."""

  def __init__(self, parts: StepParts):
    self.parts = parts
    with parts.strategy.scope():
      self.loss_metric = tf_keras.metrics.Mean("loss")
      self.accuracy_metric = tf_keras.metrics.SparseCategoricalAccuracy("accuracy")
    self.retrace()

  def retrace(self):
    self._forward_backward_fn = (
        tf.function(self._forward_backward, jit_compile=True) if self.parts.jit_compile
        else self._forward_backward)
    self._loop = tf.function(self._loop_fn)

  def reset_metrics(self):
    self.loss_metric.reset_state()
    self.accuracy_metric.reset_state()

  def _forward_backward(self, images, labels, parts=(None,), *, extras=True, l2=True):
    """(unscaled per-replica gradients of each part of the loss, per-example losses,
    logits); XLA-compilable. A part is a per-example 0/1 weight, or None (every
    example); the layers' losses (with `extras`) and the L2 penalty (with `l2`) join
    the first part."""
    p = self.parts
    variables = p.model.trainable_variables
    scaling = isinstance(p.optimizer, tf_keras.mixed_precision.LossScaleOptimizer)
    with tf.GradientTape(persistent=len(parts) > 1) as tape:
      logits = p.model(images, training=True)
      per_example = p.loss_fn(labels, logits)
      losses = []
      for i, weight in enumerate(parts):
        part = per_example if weight is None else per_example * tf.cast(
            weight, per_example.dtype)
        loss = tf.nn.compute_average_loss(part, global_batch_size=p.global_batch)
        if i == 0 and extras and p.model.losses:
          loss += tf.nn.scale_regularization_loss(tf.add_n(p.model.losses))
        if i == 0 and l2:
          decayed = self._decayed()
          if p.l2 and decayed:
            loss += tf.nn.scale_regularization_loss(0.5 * p.l2 * tf.add_n(
                [tf.reduce_sum(tf.square(tf.cast(v, tf.float32))) for v in decayed]))
        losses.append(p.optimizer.get_scaled_loss(loss) if scaling else loss)
    all_grads = []
    for loss in losses:
      grads = tape.gradient(loss, variables)
      if scaling:
        grads = p.optimizer.get_unscaled_gradients(grads)
      all_grads.append([tf.zeros_like(v) if g is None else tf.convert_to_tensor(g)
                        for g, v in zip(grads, variables)])
    del tape
    return all_grads, per_example, logits

  def _decayed(self):
    trained = {v.ref() for v in self.parts.model.trainable_variables}
    return [v for v in self.parts.l2_variables if v.ref() in trained]

  def _shift(self, deltas, sign):
    """Every trainable variable v <- v + sign * delta, on every replica (the deltas are
    computed from all-reduced gradients: the same on each)."""
    variables = self.parts.model.trainable_variables

    def update(strategy, deltas):
      for v, d in zip(variables, deltas):
        strategy.extended.update(
            v, lambda var, d: var.assign_add(sign * tf.cast(d, var.dtype)), args=(d,),
            group=False)

    tf.distribute.get_replica_context().merge_call(update, args=(deltas,))

  def _sam_gradients(self, images, labels):
    """SAM's (or ImbSAM's) all-reduced gradient, the per-example losses and logits at w.
    Coupled L2 (`l2`) is neither perturbed nor perturbs: its gradient at w is added, as
    the papers' PyTorch SGD applies weight decay."""
    p = self.parts
    reduce = lambda g: tf.distribute.get_replica_context().all_reduce(
        tf.distribute.ReduceOp.SUM, g)
    tail = p.sam.tail_mask(labels)
    if tail is None:  # SAM: the whole loss perturbs
      (perturbing,), per_example, logits = self._forward_backward_fn(
          images, labels, (None,), extras=True, l2=False)
      kept, parts, extras = None, (None,), True
    else:  # ImbSAM: the head's loss at w, the tail's at w + eps
      (kept, perturbing), per_example, logits = self._forward_backward_fn(
          images, labels, (1.0 - tail, tail), extras=True, l2=False)
      kept, parts, extras = reduce(kept), (tail,), False
    eps = sam_lib.perturbation(reduce(perturbing), p.sam.rho)
    # A non-finite gradient (float16 overflow) moves nothing; the step reports it.
    eps = [tf.where(tf.math.is_finite(e), e, tf.zeros_like(e)) for e in eps]
    self._shift(eps, 1.0)
    (grads,), _, _ = self._forward_backward_fn(images, labels, parts, extras=extras,
                                               l2=False)
    self._shift(eps, -1.0)
    grads = reduce(grads)
    if kept is not None:
      grads = [a + b for a, b in zip(kept, grads)]
    decayed = {v.ref() for v in self._decayed()}
    if p.l2 and decayed:
      grads = [g + tf.cast(p.l2, g.dtype) * tf.cast(v, g.dtype) if v.ref() in decayed else g
               for g, v in zip(grads, p.model.trainable_variables)]
    return grads, per_example, logits

  def _replica_step(self, images, labels):
    p = self.parts
    if p.device_inputs is not None:
      images = p.device_inputs(images)
    if p.sam is None:
      (grads,), per_example, logits = self._forward_backward_fn(images, labels)
      grads = tf.distribute.get_replica_context().all_reduce(
          tf.distribute.ReduceOp.SUM, grads)
    else:
      grads, per_example, logits = self._sam_gradients(images, labels)
    variables = p.model.trainable_variables
    for transform in p.gradient_transforms:
      grads = transform(grads, variables)
    if p.layer_learning_rates is None:
      p.optimizer.apply_gradients(zip(grads, variables), skip_gradients_aggregation=True)
    else:
      p.layer_learning_rates.apply_gradients(
          p.optimizer, zip(grads, variables), skip_gradients_aggregation=True)
    self.loss_metric.update_state(per_example)
    if labels.shape.rank == 2:  # soft targets (MixUp / CutMix): score their argmax
      labels = tf.argmax(labels, axis=-1, output_type=tf.int32)
    self.accuracy_metric.update_state(labels, logits)
    correct = tf.cast(tf.equal(tf.argmax(logits, -1, output_type=tf.int32),
                               tf.cast(tf.reshape(labels, [-1]), tf.int32)), tf.float32)
    scaling = isinstance(p.optimizer, tf_keras.mixed_precision.LossScaleOptimizer)
    grad_norm = tf.zeros([]) if scaling else tf.cast(tf.linalg.global_norm(grads), tf.float32)
    return (tf.reduce_sum(per_example) / p.global_batch,
            tf.reduce_sum(correct) / p.global_batch, grad_norm)

  def _project(self, every):
    """Applies the weight constraints that project every `every` ("step" / "epoch")."""
    strategy = self.parts.strategy
    for constraint in self.parts.weight_constraints:
      if constraint.every == every:
        strategy.extended.update(
            constraint.variable,
            lambda var, c=constraint: var.assign(c.project(tf.convert_to_tensor(var))),
            group=False)

  def end_epoch(self):
    """After an epoch's last step: the constraints that project once an epoch."""
    self._project("epoch")

  def _step(self, batch):
    """One global step; this batch's (mean loss, accuracy, gradient norm)."""
    strategy = self.parts.strategy
    loss, accuracy, grad_norm = strategy.run(self._replica_step, args=batch)
    self._project("step")  # after the update, on every replica
    return (strategy.reduce(tf.distribute.ReduceOp.SUM, loss, axis=None),
            strategy.reduce(tf.distribute.ReduceOp.SUM, accuracy, axis=None),
            # The same on every replica: the gradients were all-reduced.
            strategy.reduce(tf.distribute.ReduceOp.MEAN, grad_norm, axis=None))

  def _loop_fn(self, iterator, steps):
    losses = tf.TensorArray(tf.float32, size=0, dynamic_size=True)
    accuracies = tf.TensorArray(tf.float32, size=0, dynamic_size=True)
    bad = tf.constant(-1)
    bad_values = tf.zeros([2])
    for i in tf.range(steps):
      loss, accuracy, grad_norm = self._step(next(iterator))
      loss = tf.cast(loss, tf.float32)
      losses = losses.write(i, loss)
      accuracies = accuracies.write(i, tf.cast(accuracy, tf.float32))
      # Recorded, not branched on: a loop condition computed on the device would make
      # the host wait for every step (the run rolls back the whole loop anyway).
      first_bad = tf.logical_and(
          bad < 0, tf.logical_not(tf.math.is_finite(loss) & tf.math.is_finite(grad_norm)))
      bad = tf.where(first_bad, i, bad)
      bad_values = tf.where(first_bad, tf.stack([loss, grad_norm]), bad_values)
    return losses.stack(), accuracies.stack(), bad, bad_values

  def loop(self, iterator, steps):
    """Runs `steps` global steps from `iterator` in one call; a LoopResult."""
    losses, accuracies, bad, bad_values = self._loop(iterator, tf.constant(steps, tf.int32))
    bad_loss, bad_grad_norm = (float(v) for v in bad_values.numpy())
    return LoopResult(losses.numpy(), accuracies.numpy(), int(bad), bad_loss, bad_grad_norm)


class EvalStep:
  """Predictions of a padded evaluation dataset, gathered from every replica."""

  def __init__(self, strategy, model, output=None, device_inputs=None):
    """`output(model outputs)`: what `predict` returns of each example (default: the
    predicted class, the argmax of the logits); `device_inputs(images)`: the images as
    the model takes them, on the device (StepParts.device_inputs)."""
    self.strategy = strategy
    self.model = model
    self.device_inputs = device_inputs or (lambda images: images)
    self.output = output or (lambda logits: tf.argmax(logits, axis=-1, output_type=tf.int32))
    self._step = tf.function(self._distributed_step)

  def _replica_step(self, images, labels):
    return self.output(self.model(self.device_inputs(images), training=False)), labels

  def _distributed_step(self, batch):
    predictions, labels = self.strategy.run(self._replica_step, args=batch)
    return (self.strategy.gather(predictions, axis=0),
            self.strategy.gather(labels, axis=0))

  def predict(self, dataset_fn, pad_label):
    """(labels, outputs) over the per-replica batches of `dataset_fn(input_context)`
    (`distribute_datasets_from_function`), gathered from every replica of every worker,
    padding examples removed."""
    all_predictions, all_labels = [], []
    for batch in self.strategy.distribute_datasets_from_function(dataset_fn):
      predictions, labels = self._step(batch)
      all_predictions.append(predictions.numpy())
      all_labels.append(labels.numpy())
    labels = np.concatenate(all_labels)
    keep = labels != pad_label
    return labels[keep], np.concatenate(all_predictions)[keep]
