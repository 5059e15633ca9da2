"""The one trainer every recipe configures: a custom, distribution-aware train loop.

`train_and_evaluate` validates everything (data, model, model_dir) before it writes a
byte, then trains with a custom step so that gradient transforms (AGC), loss scaling
and cross-replica reduction compose:

    per-example loss -> sum / global batch -> (scale) -> grads -> (unscale)
    -> all-reduce SUM across replicas -> transforms -> apply (no second aggregation)

Checkpoints are written every epoch and restored on start, and every epoch's data is
a function of (seed, epoch), so rerunning a command on the same model_dir resumes and
finishes exactly as an uninterrupted run would.
"""

import os
import tempfile
import time

import gin
import numpy as np
import tensorflow as tf
import tf_keras

from recipes import evaluation
from recipes import losses
from recipes import report
from recipes import schedules
from recipes.data import pipeline as pipeline_lib
from recipes.errors import ConfigError
from tricks import layer_lr
from tricks import layer_rng
from tricks import weight_ema
from zoo import export
from zoo import finetune
from zoo import nfnet_checkpoint
from zoo import pretrained


def check_model_dir_writable(model_dir):
  """Raises ConfigError unless `model_dir` exists as a writable directory or can be made."""
  path = os.path.abspath(model_dir)
  probe = path
  while not os.path.exists(probe):
    probe = os.path.dirname(probe)
  if not os.path.isdir(probe):
    raise ConfigError(
        f"model_dir {model_dir!r} cannot be created: {probe!r} is a file; choose "
        "another --model_dir")
  try:
    os.rmdir(tempfile.mkdtemp(dir=probe, prefix=".model_zoo-write-check-"))
  except OSError as e:
    raise ConfigError(
        f"model_dir {model_dir!r} is not writable ({e.strerror} in {probe!r}); choose "
        "a writable --model_dir") from None


def check_resume_config(model_dir, config_text):
  """A model_dir holds one run: refuse to resume it under another configuration."""
  path = os.path.join(model_dir, "config.gin")
  if not os.path.exists(path):
    return
  with open(path) as f:
    saved = f.read()
  if saved == config_text:
    return
  old = [l for l in saved.splitlines() if l and not l.startswith("#")]
  new = [l for l in config_text.splitlines() if l and not l.startswith("#")]
  was = next((l for l in old if l not in new), None)
  now = next((l for l in new if l not in old), None)
  raise ConfigError(
      f"model_dir {model_dir!r} holds a run with another configuration (its config.gin "
      f"has {was!r} where this run has {now!r}); rerun with the same flags to resume, "
      "or pick a new --model_dir")


def check_model_fits(keras_model, num_classes, image_sizes):
  outputs = keras_model.output_shape[-1]
  if outputs != num_classes:
    raise ConfigError(
        f"the data set has {num_classes} classes but the model outputs {outputs}; "
        f"bind the model's num_classes to {num_classes} (e.g. NUM_CLASSES = {num_classes})")
  height, width = keras_model.input_shape[1:3]
  for size in image_sizes:
    if (height, width) != (None, None) and (height, width) != (size, size):
      raise ConfigError(
          f"the model takes {height}x{width} images but the pipeline feeds {size}x{size}; "
          "make InputPipeline.image_size / eval_image_size match the model's input_shape")


def layer_lr_error(e):
  return ConfigError("train_and_evaluate.layer_learning_rates: "
                     + str(e).removeprefix("layer learning rates: "))


class Trainer:
  """State of one run: strategy, model, optimizer, data, metrics, checkpoint."""

  def __init__(self, model_dir, strategy, source, indices, train_counts, keras_model,
               optimizer, loss_fn, pipeline, epochs, seed, gradient_transforms, shot_thresholds,
               checkpoint_every_epochs, eval_every_epochs, keep_checkpoints,
               jit_compile=False, l2=0.0, l2_exclude=(), head_epochs=0,
               layer_learning_rates=None, total_steps=None):
    self.model_dir = model_dir
    self.head_epochs = head_epochs
    self.layer_learning_rates = layer_learning_rates
    self.head_only = False
    self.l2 = l2
    self.l2_decayed = [v for v in keras_model.trainable_variables
                       if l2 and not any(p in v.name for p in l2_exclude)]
    self.strategy = strategy
    self.source = source
    self.indices = indices
    self.model = keras_model
    self.optimizer = optimizer
    self.loss_fn = loss_fn
    self.pipeline = pipeline
    self.epochs = epochs
    self.seed = seed
    self.transforms = list(gradient_transforms)
    self.shot_thresholds = shot_thresholds
    self.checkpoint_every_epochs = max(1, checkpoint_every_epochs)
    self.eval_every_epochs = eval_every_epochs
    self.train_counts = train_counts
    self.global_batch = pipeline.batch_size
    self.steps_per_epoch = pipeline.steps_per_epoch(len(indices))
    self.total_steps = total_steps or epochs * self.steps_per_epoch
    with strategy.scope():
      self.epoch = tf.Variable(0, dtype=tf.int64, trainable=False, name="epoch")
      self.train_loss = tf_keras.metrics.Mean("loss")
      self.train_accuracy = tf_keras.metrics.SparseCategoricalAccuracy("accuracy")
    self.checkpoint = tf.train.Checkpoint(
        model=keras_model, optimizer=optimizer, epoch=self.epoch,
        layer_rngs=layer_rng.layer_random_generators(keras_model))
    self.manager = tf.train.CheckpointManager(
        self.checkpoint, os.path.join(model_dir, "checkpoints"),
        max_to_keep=keep_checkpoints)
    self.jit_compile = jit_compile
    self._trace_train_step()
    self._eval_step = tf.function(self._distributed_eval_step)

  def _trace_train_step(self):
    """Fresh step functions: they capture the trainable variables when traced."""
    self._compiled_forward_backward = (
        tf.function(self._forward_backward, jit_compile=True) if self.jit_compile
        else self._forward_backward)
    self._train_step = tf.function(self._distributed_train_step)

  def set_phase(self, epoch):
    """Two-phase fine-tuning: the first `head_epochs` epochs train the head alone, the
    backbone frozen (BatchNorm in inference mode); then every layer trains."""
    head_only = epoch < self.head_epochs
    if head_only != self.head_only:
      finetune.freeze_backbone(self.model, frozen=head_only)
      self.head_only = head_only
      self._trace_train_step()
      print(f"Epoch {epoch + 1}: " + ("head only, backbone frozen" if head_only
                                      else "every layer trains"), flush=True)

  # -- steps -----------------------------------------------------------------

  def _forward_backward(self, images, labels):
    """(unscaled per-replica gradients, per-example losses, logits); XLA-compilable."""
    variables = self.model.trainable_variables
    scaling = isinstance(self.optimizer, tf_keras.mixed_precision.LossScaleOptimizer)
    with tf.GradientTape() as tape:
      logits = self.model(images, training=True)
      per_example = self.loss_fn(labels, logits)
      loss = tf.nn.compute_average_loss(per_example, global_batch_size=self.global_batch)
      if self.model.losses:
        loss += tf.nn.scale_regularization_loss(tf.add_n(self.model.losses))
      trained = {v.ref() for v in variables}
      decayed = [v for v in self.l2_decayed if v.ref() in trained]
      if decayed:
        loss += tf.nn.scale_regularization_loss(0.5 * self.l2 * tf.add_n(
            [tf.reduce_sum(tf.square(tf.cast(v, tf.float32))) for v in decayed]))
      scaled_loss = self.optimizer.get_scaled_loss(loss) if scaling else loss
    grads = tape.gradient(scaled_loss, variables)
    if scaling:
      grads = self.optimizer.get_unscaled_gradients(grads)
    grads = [tf.zeros_like(v) if g is None else tf.convert_to_tensor(g)
             for g, v in zip(grads, variables)]
    return grads, per_example, logits

  def _replica_train_step(self, images, labels):
    grads, per_example, logits = self._compiled_forward_backward(images, labels)
    grads = tf.distribute.get_replica_context().all_reduce(
        tf.distribute.ReduceOp.SUM, grads)
    variables = self.model.trainable_variables
    for transform in self.transforms:
      grads = transform(grads, variables)
    if self.layer_learning_rates is None:
      self.optimizer.apply_gradients(zip(grads, variables), skip_gradients_aggregation=True)
    else:
      self.layer_learning_rates.apply_gradients(
          self.optimizer, zip(grads, variables), skip_gradients_aggregation=True)
    self.train_loss.update_state(per_example)
    if labels.shape.rank == 2:  # soft targets (MixUp / CutMix): score their argmax
      labels = tf.argmax(labels, axis=-1, output_type=tf.int32)
    self.train_accuracy.update_state(labels, logits)
    correct = tf.cast(tf.equal(tf.argmax(logits, -1, output_type=tf.int32),
                               tf.cast(tf.reshape(labels, [-1]), tf.int32)), tf.float32)
    return (tf.reduce_sum(per_example) / self.global_batch,
            tf.reduce_sum(correct) / self.global_batch)

  def _distributed_train_step(self, batch):
    """One step; returns this global batch's (mean loss, accuracy)."""
    loss, accuracy = self.strategy.run(self._replica_train_step, args=batch)
    return (self.strategy.reduce(tf.distribute.ReduceOp.SUM, loss, axis=None),
            self.strategy.reduce(tf.distribute.ReduceOp.SUM, accuracy, axis=None))

  def _replica_eval_step(self, images, labels):
    logits = self.model(images, training=False)
    return tf.argmax(logits, axis=-1, output_type=tf.int32), labels

  def _distributed_eval_step(self, batch):
    predictions, labels = self.strategy.run(self._replica_eval_step, args=batch)
    return (self.strategy.gather(predictions, axis=0),
            self.strategy.gather(labels, axis=0))

  # -- loops -----------------------------------------------------------------

  def train_epoch(self, epoch, on_step=None):
    """Trains one epoch; `on_step(step, loss, accuracy)` sees every global batch."""
    dataset = self.pipeline.train_dataset(self.source, self.indices, epoch, self.seed)
    steps = min(self.steps_per_epoch, self.total_steps - epoch * self.steps_per_epoch)
    if steps < self.steps_per_epoch:  # a run measured in steps ends mid-epoch
      dataset = dataset.take(steps)
    dist = self.strategy.experimental_distribute_dataset(dataset)
    self.train_loss.reset_state()
    self.train_accuracy.reset_state()
    bar = tf_keras.utils.Progbar(
        steps, stateful_metrics=["loss", "accuracy"], unit_name="step")
    for step, batch in enumerate(dist):
      loss, accuracy = self._train_step(batch)
      if on_step is not None:
        on_step(epoch * self.steps_per_epoch + step, float(loss), float(accuracy))
      bar.update(step + 1, values=[("loss", float(self.train_loss.result())),
                                   ("accuracy", float(self.train_accuracy.result()))])

  def predict_test(self):
    """(labels, predictions) on the whole test split, padding removed."""
    dist = self.strategy.experimental_distribute_dataset(
        self.pipeline.eval_dataset(self.source))
    all_predictions, all_labels = [], []
    for batch in dist:
      predictions, labels = self._eval_step(batch)
      all_predictions.append(predictions.numpy())
      all_labels.append(labels.numpy())
    labels = np.concatenate(all_labels)
    keep = labels != pipeline_lib.PAD_LABEL
    return labels[keep], np.concatenate(all_predictions)[keep]

  def evaluate(self):
    """Test metrics, with the optimizer's weight averages if it keeps them."""
    with weight_ema.averaged_weights(self.optimizer, self.model.trainable_variables):
      labels, predictions = self.predict_test()
    return evaluation.long_tail_metrics(
        labels, predictions, self.train_counts, *self.shot_thresholds)

  def run(self, on_step=None):
    """Trains from the latest checkpoint to `epochs`, then evaluates and reports."""
    latest = self.manager.latest_checkpoint
    if latest:
      self.checkpoint.restore(latest).assert_existing_objects_matched()
      print(f"Resumed from {latest} at epoch {int(self.epoch.numpy())} of {self.epochs}",
            flush=True)
    train_writer = tf.summary.create_file_writer(os.path.join(self.model_dir, "train"))
    eval_writer = tf.summary.create_file_writer(os.path.join(self.model_dir, "eval"))
    start = time.time()
    first = int(self.epoch.numpy())
    for epoch in range(first, self.epochs):
      print(f"Epoch {epoch + 1}/{self.epochs}", flush=True)
      self.set_phase(epoch)
      self.train_epoch(epoch, on_step)
      self.epoch.assign(epoch + 1)
      with train_writer.as_default(step=epoch + 1):
        tf.summary.scalar("loss", self.train_loss.result())
        tf.summary.scalar("accuracy", self.train_accuracy.result())
        tf.summary.scalar("learning_rate", self.current_learning_rate())
      if (epoch + 1) % self.checkpoint_every_epochs == 0 or epoch + 1 == self.epochs:
        self.manager.save(checkpoint_number=epoch + 1)
      if self.eval_every_epochs and (epoch + 1) % self.eval_every_epochs == 0:
        self._write_eval_summaries(eval_writer, self.evaluate(), epoch + 1)
    self.set_phase(self.epochs)
    metrics = self.evaluate()
    self._write_eval_summaries(eval_writer, metrics, self.epochs)
    metrics.update(
        epochs=self.epochs, steps=self.total_steps, seed=self.seed, data=self.source.name,
        class_names=[str(name) for name in self.source.class_names],
        num_train_examples=int(len(self.indices)), global_batch_size=self.global_batch,
        num_replicas=self.strategy.num_replicas_in_sync,
        train_seconds_this_run=round(time.time() - start, 1),
        final_train_loss=float(self.train_loss.result()) if first < self.epochs else None)
    return metrics

  def current_learning_rate(self):
    lr = self.optimizer.learning_rate
    if isinstance(lr, tf_keras.optimizers.schedules.LearningRateSchedule):
      return lr(self.optimizer.iterations)
    return lr

  @staticmethod
  def _write_eval_summaries(writer, metrics, step):
    with writer.as_default(step=step):
      for key in ("top1", "balanced_accuracy", "many_shot_accuracy",
                  "medium_shot_accuracy", "few_shot_accuracy"):
        if metrics.get(key) is not None:
          tf.summary.scalar(key, metrics[key])


@gin.configurable(denylist=["model_dir", "strategy", "on_step"])
def train_and_evaluate(model_dir, strategy, *, data=gin.REQUIRED, model=gin.REQUIRED,
                       pipeline=None, long_tail=None, model_transforms=(),
                       loss=losses.cross_entropy,
                       optimizer=tf_keras.optimizers.SGD,
                       learning_rate=schedules.warmup_cosine, epochs=30, seed=0,
                       gradient_transforms=(), weight_decay_exclude=(), l2=0.0,
                       mixed_precision=None, jit_compile=False, deterministic_ops=True,
                       shot_thresholds=(100, 20), checkpoint_every_epochs=1,
                       eval_every_epochs=5, keep_checkpoints=3, export_saved_model=False,
                       steps=None, head_epochs=0, unfreeze_lr_scale=0.1,
                       layer_learning_rates=None, hyperrule=None, name=None, on_step=None):
  """Trains `model` on `data` and writes the run's report to `model_dir`.

  Args:
    model_dir: where checkpoints, TensorBoard events, config and report go.
    strategy: a tf.distribute strategy.
    data: a callable returning a `recipes.data.source.Source`.
    model: a callable returning a tf_keras model that outputs logits.
    model_transforms: callables `model -> model` applied in order to the built model
      (e.g. `swap_batch_norm`, `acnet_convert`, `recompute`): tricks that rewrite a
      model, switched on for any zoo model from Gin.
    pipeline: an `InputPipeline`; None builds one from its Gin bindings.
    long_tail: a `LongTail` drawn from the training pool, or None for all of it.
    loss: called as `loss(class_counts=...)`; returns per-example losses.
    optimizer: a tf_keras optimizer class, called with `learning_rate=`.
    learning_rate: called as `learning_rate(total_steps=, steps_per_epoch=)`.
    epochs, seed: length of the run, and the seed of every random choice.
    steps: None, or the run's length in global steps (overrides `epochs`; the last
      epoch is cut short).
    head_epochs: two-phase fine-tuning: the first `head_epochs` epochs train the
      "logits" head alone (backbone frozen, BatchNorm in inference mode) on
      `learning_rate` built for those steps; then every layer trains on
      `unfreeze_lr_scale` x `learning_rate` built for the remaining steps.
    layer_learning_rates: {name regex: multiplier}: per-layer-group learning rates
      (tricks/layer_lr.py), first match wins, unmatched variables keep the rate.
    hyperrule: a rule (e.g. `@BitHyperRule()`) that sets the run's steps, learning
      rate, training resolution and MixUp from the training set's size and image
      resolution, in place of `steps`/`epochs`, `learning_rate` and those pipeline
      bindings.
    gradient_transforms: callables `(grads, variables) -> grads` (e.g. AGC),
      applied to unscaled, all-reduced gradients.
    weight_decay_exclude: variable-name substrings that are not decayed, neither by
      the optimizer's (decoupled) weight_decay nor by `l2`.
    l2: coefficient of an L2 penalty l2 / 2 * sum ||w||^2 added to the loss (coupled
      weight decay), over every trainable variable of the model, nested ones included.
    mixed_precision: None, "mixed_float16" (with dynamic loss scaling) or
      "mixed_bfloat16": the Keras policy for every layer built after it is set.
    jit_compile: XLA-compile each replica's forward and backward pass.
    deterministic_ops: TF's op determinism (same command, same metrics).
    shot_thresholds: (many_shot_above, few_shot_below) training counts.
    checkpoint_every_epochs, eval_every_epochs, keep_checkpoints: bookkeeping.
    export_saved_model: also write model_dir/export, a SavedModel that takes encoded
      images and has the evaluation preprocessing inside (zoo/export.py), with the
      averaged weights when the optimizer keeps an EMA.
    name: the recipe's name, recorded in metrics.json.
    on_step: called as `on_step(step, loss, accuracy)` after every global batch.
  """
  if epochs < 1:
    raise ConfigError(f"train_and_evaluate.epochs must be >= 1, got {epochs}")
  if steps is not None and steps < 1:
    raise ConfigError(f"train_and_evaluate.steps must be >= 1 or None, got {steps}")
  try:
    layer_lrs = (layer_lr.LayerLearningRates(layer_learning_rates)
                 if layer_learning_rates is not None else None)
  except ValueError as e:
    raise layer_lr_error(e) from None
  tf_keras.backend.experimental.enable_tf_random_generator()
  tf_keras.utils.set_random_seed(seed)
  if deterministic_ops:
    tf.config.experimental.enable_op_determinism()
  if mixed_precision not in (None, "mixed_float16", "mixed_bfloat16"):
    raise ConfigError(f"train_and_evaluate.mixed_precision={mixed_precision!r}; use None, "
                      "'mixed_float16' or 'mixed_bfloat16'")
  tf_keras.mixed_precision.set_global_policy(mixed_precision or "float32")

  pipeline = pipeline or pipeline_lib.InputPipeline()
  source = data()
  indices = (long_tail.select(source.train_labels, source.num_classes)
             if long_tail else np.arange(len(source.train_labels)))
  replicas = strategy.num_replicas_in_sync
  if pipeline.batch_size % replicas:
    raise ConfigError(
        f"InputPipeline.batch_size={pipeline.batch_size} does not split over {replicas} "
        "replicas; use a multiple of the replica count")
  if len(indices) < pipeline.batch_size:
    raise ConfigError(
        f"the training split has {len(indices)} examples, fewer than one global batch "
        f"of {pipeline.batch_size}; lower InputPipeline.batch_size")
  rule_note = None
  if hyperrule is not None:
    steps, learning_rate, rule_note = apply_hyperrule(hyperrule, source, indices, pipeline)
  steps_per_epoch = pipeline.steps_per_epoch(len(indices))
  if steps is not None:
    epochs = -(-steps // steps_per_epoch)
  total_steps = steps or epochs * steps_per_epoch
  if not 0 <= head_epochs < epochs:
    raise ConfigError(f"train_and_evaluate.head_epochs={head_epochs} must be in [0, "
                      f"epochs={epochs}): the whole model trains after the head")
  counts = np.bincount(source.train_labels[indices], minlength=source.num_classes)

  with strategy.scope():
    try:
      keras_model = model()
    except (pretrained.WeightsError, finetune.CheckpointError,
            nfnet_checkpoint.ConversionError) as e:
      raise ConfigError(str(e)) from None
    for transform in model_transforms:
      try:
        keras_model = transform(keras_model)
      except ValueError as e:
        raise ConfigError(f"train_and_evaluate.model_transforms: {e}") from None
    check_model_fits(keras_model, source.num_classes,
                     {pipeline.image_size, pipeline.eval_image_size})
    if head_epochs:
      try:
        keras_model.get_layer(finetune.HEAD)
      except ValueError:
        raise ConfigError(f"train_and_evaluate.head_epochs needs a model with a "
                          f"{finetune.HEAD!r} head layer; {keras_model.name!r} has none "
                          "(use a zoo model)") from None
      head = keras_model.get_layer(finetune.HEAD)
      if len(keras_model.trainable_variables) == len(head.trainable_variables):
        raise ConfigError("train_and_evaluate.head_epochs with a frozen backbone: the second "
                          "phase would unfreeze it; use HEAD_EPOCHS (two phases) or "
                          "FREEZE_BACKBONE (head only), not both")
      head_steps = head_epochs * steps_per_epoch
      schedule = schedules.TwoPhaseSchedule(
          head_steps,
          learning_rate(total_steps=head_steps, steps_per_epoch=steps_per_epoch),
          learning_rate(total_steps=total_steps - head_steps,
                        steps_per_epoch=steps_per_epoch),
          scale=unfreeze_lr_scale)
    else:
      schedule = learning_rate(total_steps=total_steps, steps_per_epoch=steps_per_epoch)
    opt = optimizer(learning_rate=schedule)
    if weight_decay_exclude:
      opt.exclude_from_weight_decay(var_names=list(weight_decay_exclude))
    if mixed_precision == "mixed_float16":
      opt = tf_keras.mixed_precision.LossScaleOptimizer(opt)
    # Slots (momenta, weight averages) exist before a checkpoint is restored, so a
    # run resumed at its last epoch evaluates with its averages too.
    getattr(opt, "inner_optimizer", opt).build(keras_model.trainable_variables)
    loss_fn = loss(class_counts=counts)
    if layer_lrs is not None:
      try:
        groups = layer_lrs.build(keras_model.trainable_variables)
      except ValueError as e:
        raise layer_lr_error(e) from None
  transforms = list(gradient_transforms)
  for transform in transforms:
    if hasattr(transform, "build"):
      transform.build(keras_model)

  config_text = gin.config_str()
  check_model_dir_writable(model_dir)
  check_resume_config(model_dir, config_text)

  # Validated: from here on the run writes into model_dir.
  os.makedirs(model_dir, exist_ok=True)
  report.write_text(os.path.join(model_dir, "config.gin"), config_text)
  print(f"{source.name}: {len(indices)} training examples (per class {counts.tolist()}), "
        f"{len(source.test_labels)} test; {steps_per_epoch} steps of {pipeline.batch_size} "
        f"an epoch on {replicas} replica(s); writing to {model_dir}", flush=True)
  if rule_note:
    print(rule_note, flush=True)
  if layer_lrs is not None:
    print("layer learning rates: " + ", ".join(
        f"{n} variables x{m:g}" for m, n in sorted(groups.items())), flush=True)
  trainer = Trainer(model_dir, strategy, source, indices, counts, keras_model, opt, loss_fn,
                    pipeline, epochs, seed, transforms, shot_thresholds,
                    checkpoint_every_epochs, eval_every_epochs, keep_checkpoints,
                    jit_compile=jit_compile, l2=l2, l2_exclude=weight_decay_exclude,
                    head_epochs=head_epochs, layer_learning_rates=layer_lrs,
                    total_steps=total_steps)
  metrics = trainer.run(on_step)
  metrics["recipe"] = name
  if rule_note:
    metrics["hyperrule"] = rule_note
  report.write_json(os.path.join(model_dir, "metrics.json"), metrics)
  report.plot_per_class_accuracy(
      os.path.join(model_dir, "per_class_accuracy.png"), metrics,
      title=f"{name or source.name}: per-class accuracy vs. training count")
  if export_saved_model:
    write_export(os.path.join(model_dir, "export"), keras_model, trainer.optimizer, pipeline)
  report.write_text(os.path.join(model_dir, "operative_config.gin"),
                    gin.operative_config_str())
  return metrics


def apply_hyperrule(rule, source, indices, pipeline):
  """(steps, learning-rate builder, description) from `rule`; sets the pipeline's
  training resolution and MixUp. The first training image stands for the data set's
  resolution."""
  num_examples = len(indices)
  first = next(iter(source.make_dataset("train", np.asarray(indices[:1]))))
  height, width = (int(d) for d in first[0].shape[:2])
  resize, crop = rule.resolution(height, width)
  pipeline.train_resize, pipeline.image_size, pipeline.eval_image_size = resize, crop, crop
  if not pipeline.cutmix_alpha:
    pipeline.mixup_alpha = rule.mixup_alpha(num_examples)
  schedule = rule.learning_rate(num_examples, pipeline.batch_size)

  def learning_rate(total_steps, steps_per_epoch):
    del total_steps, steps_per_epoch
    return schedule

  note = rule.describe(num_examples, height, width, pipeline.batch_size)
  return rule.steps(num_examples), learning_rate, note


def write_export(path, keras_model, optimizer, pipeline):
  """The serving SavedModel, written beside `path` and then moved into place."""
  partial = path + ".partial"
  if tf.io.gfile.exists(partial):
    tf.io.gfile.rmtree(partial)
  with weight_ema.averaged_weights(optimizer, keras_model.trainable_variables):
    export.export_saved_model(keras_model, partial, pipeline.eval_image_size,
                              pipeline.mean.numpy().tolist(), pipeline.std.numpy().tolist(),
                              pipeline.eval_crop_fraction)
  if tf.io.gfile.exists(path):
    tf.io.gfile.rmtree(path)
  tf.io.gfile.rename(partial, path)
