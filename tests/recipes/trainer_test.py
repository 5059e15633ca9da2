"""The trainer: distribution, exact resumption, what a run leaves, and bad input."""

import functools
import json
import os
import re
from unittest import mock

import numpy as np
import tensorflow as tf
import tf_keras

from recipes import build
from recipes import experiment
from recipes import trainer
from recipes.data import digits
from recipes.data import long_tail
from recipes.data import pipeline
from recipes.errors import ConfigError
from recipes.methods import losses
from tests.recipes import summaries
from tricks import agc
from tricks import deferred_reweighting
from zoo import nfnet


def setUpModule():
  cpu = tf.config.list_physical_devices("CPU")[0]
  tf.config.set_logical_device_configuration(
      cpu, [tf.config.LogicalDeviceConfiguration()] * 2)


def run(model_dir, strategy=None, epochs=2, regularise=False, **overrides):
  """A tiny long-tailed digits run: NFNet-nano at 16px, logit-adjusted loss, AGC."""
  tf_keras.backend.clear_session()
  rates = {} if regularise else {"dropout": 0.0, "stochdepth_rate": 0.0}
  kwargs = dict(
      data=digits.digits,
      model=functools.partial(nfnet.nfnet, "nano", num_classes=10,
                              input_shape=(16, 16, 3), **rates),
      pipeline=pipeline.InputPipeline(batch_size=32, image_size=16, random_crop_padding=1),
      long_tail=long_tail.LongTail(rho=100),
      loss=losses.logit_adjusted,
      optimizer=functools.partial(tf_keras.optimizers.SGD, momentum=0.9),
      learning_rate=lambda total_steps, steps_per_epoch: 0.05,
      gradient_transforms=[agc.AdaptiveGradClip(clipping=0.04)],
      epochs=epochs, seed=1, eval_every_epochs=1, shot_thresholds=(20, 5))
  kwargs.update(overrides)
  pipe = kwargs.pop("pipeline")
  on_step = kwargs.pop("on_step", None)
  return trainer.train_and_evaluate(
      model_dir, strategy or tf.distribute.OneDeviceStrategy("/cpu:0"),
      *experiment.split(pipeline=lambda: pipe, **kwargs), on_step=on_step)


def trainer_steps_per_epoch(model_dir):
  with open(os.path.join(model_dir, "metrics.json")) as f:
    metrics = json.load(f)
  return metrics["steps"] // metrics["epochs"]


def checkpoint_weights(model_dir):
  reader = tf.train.load_checkpoint(os.path.join(model_dir, "checkpoints"))
  return {name: reader.get_tensor(name)
          for name in reader.get_variable_to_shape_map()
          if name.startswith("model/") and "OPTIMIZER_SLOT" not in name}


class TrainerTest(tf.test.TestCase):

  def test_mirrored_on_two_devices_matches_one_device(self):
    tmp = self.get_temp_dir()
    run(os.path.join(tmp, "one"), epochs=1)
    mirrored = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    self.assertEqual(mirrored.num_replicas_in_sync, 2)
    metrics = run(os.path.join(tmp, "two"), strategy=mirrored, epochs=1)
    self.assertEqual(metrics["num_replicas"], 2)
    one = checkpoint_weights(os.path.join(tmp, "one"))
    two = checkpoint_weights(os.path.join(tmp, "two"))
    self.assertGreater(len(one), 50)
    self.assertEqual(sorted(one), sorted(two))
    moved = 0
    for name in one:
      self.assertAllClose(one[name], two[name], rtol=1e-4, atol=1e-5, msg=name)
      moved += "skip_gain" in name and abs(float(one[name])) > 0
    self.assertGreater(moved, 0)  # training really changed the weights

  def test_resumed_run_finishes_like_an_uninterrupted_one(self):
    tmp = self.get_temp_dir()
    straight = run(os.path.join(tmp, "straight"), epochs=3, regularise=True)

    resumed_dir = os.path.join(tmp, "resumed")
    original = trainer.Trainer.train_epoch

    def preempted(self, epoch, *args, **kwargs):
      if epoch == 2:
        raise KeyboardInterrupt("preempted")
      return original(self, epoch, *args, **kwargs)

    with mock.patch.object(trainer.Trainer, "train_epoch", preempted):
      with self.assertRaises(KeyboardInterrupt):
        run(resumed_dir, epochs=3, regularise=True)
    self.assertFalse(os.path.exists(os.path.join(resumed_dir, "metrics.json")))
    with mock.patch.object(trainer.Trainer, "train_epoch", autospec=True,
                           side_effect=original) as spy:
      resumed = run(resumed_dir, epochs=3, regularise=True)
    self.assertEqual([call.args[1] for call in spy.call_args_list], [2])  # epoch 3 only

    for key in ("top1", "balanced_accuracy", "per_class_accuracy", "final_train_loss"):
      self.assertEqual(resumed[key], straight[key], msg=key)
    a = checkpoint_weights(os.path.join(tmp, "straight"))
    b = checkpoint_weights(resumed_dir)
    for name in a:
      self.assertAllEqual(a[name], b[name], msg=name)

  def test_exported_saved_model_serves_encoded_images_as_evaluated(self):
    model_dir = os.path.join(self.get_temp_dir(), "run")
    pipe = pipeline.InputPipeline(batch_size=32, image_size=16, random_crop_padding=1)
    run(model_dir, epochs=1, pipeline=pipe, export_saved_model=True)
    self.assertFalse(os.path.exists(os.path.join(model_dir, "export.partial")))
    source = digits.digits()
    images, _ = next(iter(source.make_dataset("test", np.arange(6)).batch(6)))
    encoded = tf.constant([tf.io.encode_png(i).numpy() for i in images.numpy()])
    served = tf.saved_model.load(os.path.join(model_dir, "export")).signatures[
        "serving_default"](images=encoded)
    # The trained weights, restored into the same architecture, on eval preprocessing.
    model = nfnet.nfnet("nano", num_classes=10, input_shape=(16, 16, 3),
                        dropout=0.0, stochdepth_rate=0.0)
    tf.train.Checkpoint(model=model).read(
        tf.train.latest_checkpoint(os.path.join(model_dir, "checkpoints"))).expect_partial()
    used, _ = build.resolve_pipeline(pipe, {}, model, None)  # as the run resolved it
    self.assertTrue(used.hands_uint8)  # the default: evaluated on whole pixels
    want = model(used.device_inputs(tf.stack([used.eval_image(i) for i in images])),
                 training=False)
    self.assertAllClose(served["logits"], want, rtol=1e-4, atol=1e-4)

  def test_run_leaves_its_report(self):
    model_dir = os.path.join(self.get_temp_dir(), "run")
    metrics = run(model_dir, epochs=1, name="tiny")
    files = set(os.listdir(model_dir))
    self.assertContainsSubset(
        {"checkpoints", "train", "eval", "config.gin", "metrics.json",
         "operative_config.gin", "per_class_accuracy.png"}, files)
    self.assertNotEmpty(tf.io.gfile.glob(os.path.join(model_dir, "train", "events.*")))
    with open(os.path.join(model_dir, "metrics.json")) as f:
      saved = json.load(f)
    self.assertEqual(saved["recipe"], "tiny")
    self.assertEqual(saved["seed"], 1)
    self.assertEqual(saved["train_class_counts"], [108, 64, 38, 23, 13, 8, 5, 3, 1, 1])
    self.assertEqual(saved["num_test_examples"], 700)
    for key in ("top1", "balanced_accuracy", "many_shot_accuracy", "medium_shot_accuracy",
                "few_shot_accuracy"):
      self.assertBetween(saved[key], 0.0, 1.0)
    self.assertEqual(metrics["top1"], saved["top1"])

  def test_xla_and_mixed_precision(self):
    tmp = self.get_temp_dir()
    run(os.path.join(tmp, "plain"), epochs=1)
    run(os.path.join(tmp, "xla"), epochs=1, jit_compile=True)
    plain = checkpoint_weights(os.path.join(tmp, "plain"))
    xla = checkpoint_weights(os.path.join(tmp, "xla"))
    for name in plain:
      self.assertAllClose(plain[name], xla[name], rtol=2e-3, atol=2e-4, msg=name)
    for policy in ("mixed_bfloat16", "mixed_float16"):
      metrics = run(os.path.join(tmp, policy), epochs=1, mixed_precision=policy,
                    regularise=True)
      self.assertTrue(np.isfinite(metrics["final_train_loss"]), msg=policy)
      weights = checkpoint_weights(os.path.join(tmp, policy))
      self.assertTrue(all(w.dtype == np.float32 for w in weights.values()), msg=policy)
      moved = [n for n, w in weights.items() if "skip_gain" in n and abs(float(w)) > 0]
      self.assertNotEmpty(moved, msg=policy)  # the loss-scaled steps were applied
    tf_keras.mixed_precision.set_global_policy("float32")

  def test_evaluation_uses_the_weight_average(self):
    model_dir = os.path.join(self.get_temp_dir(), "ema")
    original = trainer.Trainer.predict
    seen = {}

    def spy(self, split="test", evaluator=None):
      seen["evaluated"] = self.built.model.get_layer("logits").kernel.numpy()
      seen["trainer"] = self
      return original(self, split, evaluator)

    with mock.patch.object(trainer.Trainer, "predict", spy):
      run(model_dir, epochs=1, eval_every_epochs=0,
          optimizer=functools.partial(tf_keras.optimizers.SGD, momentum=0.9, use_ema=True,
                                      ema_momentum=0.9))
    model, optimizer = seen["trainer"].built.model, seen["trainer"].built.optimizer
    trained = model.get_layer("logits").kernel.numpy()
    averages = [v.numpy() for v in optimizer.variables
                if re.search(r"(^|/)average/", v.name) and v.shape == trained.shape]
    # Evaluation saw an average, and the trained kernel was put back after it.
    self.assertTrue(any(np.array_equal(a, seen["evaluated"]) for a in averages))
    self.assertFalse(np.allclose(trained, seen["evaluated"]))
    # The averages are in the checkpoint, as optimizer variables.
    reader = tf.train.load_checkpoint(os.path.join(model_dir, "checkpoints"))
    saved = [reader.get_tensor(n) for n in reader.get_variable_to_shape_map()
             if n.startswith("optimizer/_variables/")]
    self.assertTrue(any(s.shape == trained.shape and np.array_equal(s, seen["evaluated"])
                        for s in saved))

  def test_l2_equals_decoupled_decay_for_plain_sgd(self):
    """Loshchilov & Hutter 2019: for SGD without momentum, an L2 penalty lambda/2 ||w||^2
    and decoupled decay w -= lr * lambda * w take the same step."""
    tmp = self.get_temp_dir()
    sgd = lambda **kw: functools.partial(tf_keras.optimizers.SGD, **kw)
    common = dict(epochs=1, gradient_transforms=[], weight_decay_exclude=("gain", "bias"))
    run(os.path.join(tmp, "l2"), optimizer=sgd(), l2=0.01, **common)
    run(os.path.join(tmp, "decoupled"), optimizer=sgd(weight_decay=0.01), **common)
    run(os.path.join(tmp, "none"), optimizer=sgd(), **common)
    l2 = checkpoint_weights(os.path.join(tmp, "l2"))
    decoupled = checkpoint_weights(os.path.join(tmp, "decoupled"))
    none = checkpoint_weights(os.path.join(tmp, "none"))
    changed = 0
    for name in l2:
      self.assertAllClose(l2[name], decoupled[name], rtol=1e-4, atol=1e-6, msg=name)
      changed += not np.allclose(l2[name], none[name], rtol=1e-6, atol=1e-9)
    self.assertGreater(changed, 10)  # the decay did something

  def test_the_loss_is_told_each_epoch_before_it_trains(self):
    """Deferred re-weighting through the trainer: zero class weights from epoch 1 make
    the second epoch's loss and gradient zero, so plain SGD leaves the weights."""
    tmp = self.get_temp_dir()
    drw = deferred_reweighting.DeferredWeights(np.zeros(10), start_epoch=1)
    epochs_told = []

    def weighted_cross_entropy(class_counts):
      del class_counts

      class Loss:
        def set_epoch(self, epoch):
          epochs_told.append(epoch)
          drw.set_epoch(epoch)

        def __call__(self, labels, logits):
          labels = tf.cast(labels, tf.int32)
          per_example = tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits)
          return per_example * tf.gather(drw.variable, labels)
      return Loss()

    model_dir = os.path.join(tmp, "drw")
    run(model_dir, loss=weighted_cross_entropy, optimizer=tf_keras.optimizers.SGD,
        gradient_transforms=[], keep_checkpoints=3)
    self.assertEqual(epochs_told, [0, 1, 2])  # 2: after the last epoch
    reader = lambda n: tf.train.load_checkpoint(  # pylint: disable=g-long-lambda
        os.path.join(model_dir, "checkpoints", f"ckpt-{n}"))
    steps = trainer_steps_per_epoch(model_dir)
    first, second = reader(steps), reader(2 * steps)
    moved = 0
    for name in first.get_variable_to_shape_map():
      if name.startswith("model/") and "OPTIMIZER_SLOT" not in name:
        self.assertAllEqual(second.get_tensor(name), first.get_tensor(name), msg=name)
        initial = reader(0).get_tensor(name)
        moved += not np.array_equal(first.get_tensor(name), initial)
    self.assertGreater(moved, 0)  # the first epoch (unit weights) did train

  def test_inner_loop_of_four_steps_equals_one_step_a_call(self):
    tmp = self.get_temp_dir()
    run(os.path.join(tmp, "one"), epochs=1, regularise=True, steps_per_loop=1)
    losses = []
    run(os.path.join(tmp, "four"), epochs=1, regularise=True, steps_per_loop=4)
    one = checkpoint_weights(os.path.join(tmp, "one"))
    four = checkpoint_weights(os.path.join(tmp, "four"))
    for name in one:
      self.assertAllEqual(one[name], four[name], msg=name)
    # 8 steps an epoch in loops of 3: 3 + 3 + 2, every step reported in order.
    run(os.path.join(tmp, "three"), epochs=1, steps_per_loop=3,
        on_step=lambda step, *_: losses.append(step))
    self.assertEqual(losses, list(range(8)))

  def test_training_batches_from_a_tf_data_service(self):
    # InputPipeline.data_service: a dispatcher and a worker on localhost make the
    # training batches; one worker, parallel epochs: the same weights as made here.
    tmp = self.get_temp_dir()
    dispatcher = tf.data.experimental.service.DispatchServer()
    worker = tf.data.experimental.service.WorkerServer(
        tf.data.experimental.service.WorkerConfig(
            dispatcher_address=dispatcher.target.split("://")[1]))
    pipe = pipeline.InputPipeline(batch_size=32, image_size=16, random_crop_padding=1)
    run(os.path.join(tmp, "here"), epochs=1, pipeline=pipe)
    self.assertEqual(worker._num_tasks(), 0)
    run(os.path.join(tmp, "served"), epochs=1,
        pipeline=pipe.replace(data_service=dispatcher.target))
    self.assertGreater(worker._num_tasks(), 0)  # the epoch was made by the worker
    here = checkpoint_weights(os.path.join(tmp, "here"))
    served = checkpoint_weights(os.path.join(tmp, "served"))
    for name in here:
      self.assertAllEqual(here[name], served[name], msg=name)
    worker.stop()
    dispatcher.stop()

  def test_validation_split_best_checkpoint_and_early_stopping(self):
    model_dir = os.path.join(self.get_temp_dir(), "val")
    # Patience 7 with 6 evaluations (one an epoch) can never run out: all 6 epochs
    # train, whatever validation does (test_early_stopping_stops is the other side).
    metrics = run(model_dir, epochs=6, validation_per_class=5,
                  best_metric="balanced_accuracy", early_stopping_patience=7,
                  eval_every_epochs=1)
    self.assertEqual(metrics["num_validation_examples"], 50)
    self.assertBetween(metrics["final_validation"]["balanced_accuracy"], 0.0, 1.0)
    self.assertIn("final weights", metrics["reported"])
    # The validation examples came out of the training pool, not the test split.
    self.assertEqual(metrics["num_test_examples"], 700)
    best = metrics["best_on_validation"]
    self.assertIsNotNone(best)
    self.assertBetween(best["epoch"], 1, metrics["epochs_trained"])
    self.assertBetween(best["validation_balanced_accuracy"], 0.0, 1.0)
    self.assertIn("top1", best["test"])
    self.assertTrue(tf.io.gfile.glob(os.path.join(model_dir, "best", "ckpt-*.index")))
    self.assertFalse(metrics["stopped_early"])
    self.assertEqual(metrics["epochs_trained"], 6)
    # The best checkpoint holds the weights that scored best on validation.
    again = run(model_dir, epochs=6, validation_per_class=5,
                best_metric="balanced_accuracy", early_stopping_patience=7,
                eval_every_epochs=1)
    self.assertEqual(again["best_on_validation"]["test"], best["test"])
    # A finished run started again returns its report as it was.
    self.assertEqual(again["final_train_loss"], metrics["final_train_loss"])
    self.assertIsNotNone(again["final_train_loss"])

  def test_early_stopping_stops(self):
    model_dir = os.path.join(self.get_temp_dir(), "stop")
    metrics = run(model_dir, epochs=5, validation_per_class=5,
                  best_metric="balanced_accuracy", early_stopping_patience=1,
                  eval_every_epochs=1, learning_rate=lambda total_steps, steps_per_epoch: 1e-12)
    # A (next to) zero rate never improves on the first validation (epoch 1), and a
    # new best must be strictly higher: with patience 1 the run stops one evaluation
    # later, after epoch 1 + 1 = 2 of 5. (A rate of exactly 0 is refused as bad input.)
    self.assertTrue(metrics["stopped_early"])
    self.assertEqual(metrics["epochs_trained"], 2)
    best = metrics["best_on_validation"]
    self.assertEqual(best["epoch"], 1)
    # The kept best checkpoint is the first evaluation's (numbered by epoch), and the
    # report the run wrote says the same.
    self.assertEqual(os.path.basename(best["checkpoint"]), "ckpt-1")
    self.assertEqual(
        sorted(os.path.basename(p) for p in
               tf.io.gfile.glob(os.path.join(model_dir, "best", "ckpt-*.index"))),
        ["ckpt-1.index"])
    with open(os.path.join(model_dir, "metrics.json")) as f:
      written = json.load(f)
    self.assertTrue(written["stopped_early"])
    self.assertEqual(written["epochs_trained"], 2)
    self.assertEqual(written["best_on_validation"]["epoch"], 1)

  def test_best_epoch_on_test_as_a_papers_protocol(self):
    """Runtime.test_selection: the test split scored at every evaluation, the best top-1
    epoch recorded and labelled; the top-level metrics stay the final weights'."""
    model_dir = os.path.join(self.get_temp_dir(), "on_test")
    metrics = run(model_dir, epochs=3, eval_every_epochs=1,
                  test_selection="Cao et al. 2019's")
    # epoch -> test top-1, from the TensorBoard summaries the run wrote
    tested = summaries.scalars(os.path.join(model_dir, "eval"), "top1")
    self.assertEqual(sorted(tested), [1, 2, 3])
    self.assertAllClose(tested[3], metrics["top1"])  # the final weights, top level
    best_epoch = max(sorted(tested), key=lambda e: (tested[e], -e))  # first of equals
    selected = metrics["best_on_test_protocol"]
    self.assertEqual(selected["epoch"], best_epoch)
    self.assertAllClose(selected["top1"], tested[best_epoch])
    self.assertBetween(selected["balanced_accuracy"], 0.0, 1.0)
    self.assertIn("selected on the test split as Cao et al. 2019's code", selected["note"])
    self.assertIn("not a clean estimate", selected["note"])
    with open(os.path.join(model_dir, "metrics.json")) as f:
      self.assertEqual(json.load(f)["best_on_test_protocol"], selected)
    plain = run(os.path.join(self.get_temp_dir(), "plain"), epochs=1)
    self.assertNotIn("best_on_test_protocol", plain)

  def test_bad_runtime_settings(self):
    tmp = self.get_temp_dir()
    cases = [
        (dict(epochs=0), r"Runtime.epochs=0 must be a whole number >= 1"),
        (dict(epochs="3"), r"Runtime.epochs='3' must be a whole number"),
        (dict(steps_per_loop=0), r"Runtime.steps_per_loop=0 must be a whole number >= 1"),
        (dict(mixed_precision="fp8"), r"Runtime.mixed_precision='fp8'"),
        (dict(best_metric="balanced_accuracy"), r"needs a validation split"),
        (dict(best_metric="auc", validation_per_class=2), r"Runtime.best_metric='auc'"),
        (dict(early_stopping_patience=2), r"needs Runtime.best_metric"),
        (dict(l2=-1.0), r"Optimization.l2=-1.0 must be a number >= 0"),
        (dict(test_selection="Cao", eval_every_epochs=0), r"test_selection needs"),
        (dict(test_selection=""), r"Runtime.test_selection=''"),
    ]
    for i, (overrides, pattern) in enumerate(cases):
      self.assert_rejected_before_writing(os.path.join(tmp, str(i)), pattern, **overrides)

  def assert_rejected_before_writing(self, model_dir, pattern, **overrides):
    with self.assertRaisesRegex(ConfigError, pattern):
      run(model_dir, **dict(dict(epochs=1), **overrides))
    self.assertFalse(os.path.exists(model_dir))

  def test_model_that_does_not_fit_the_data(self):
    tmp = self.get_temp_dir()
    self.assert_rejected_before_writing(
        os.path.join(tmp, "classes"), "data set has 10 classes but the model outputs 7",
        model=functools.partial(nfnet.nfnet, "nano", num_classes=7, input_shape=(16, 16, 3)))
    self.assert_rejected_before_writing(
        os.path.join(tmp, "size"), "model takes 32x32 images but the pipeline feeds 16x16",
        model=functools.partial(nfnet.nfnet, "nano", num_classes=10,
                                input_shape=(32, 32, 3)))

  def test_unwritable_model_dir(self):
    blocker = os.path.join(self.get_temp_dir(), "a_file")
    with open(blocker, "w") as f:
      f.write("not a directory")
    self.assert_rejected_before_writing(
        os.path.join(blocker, "run"), "cannot be created: .*a_file' is a file")

  def test_batch_larger_than_the_data(self):
    self.assert_rejected_before_writing(
        os.path.join(self.get_temp_dir(), "batch"), "fewer than one global batch of 512",
        pipeline=pipeline.InputPipeline(batch_size=512, image_size=16))

  def test_resume_under_another_config_is_refused(self):
    model_dir = os.path.join(self.get_temp_dir(), "run")
    os.makedirs(model_dir)
    with open(os.path.join(model_dir, "config.gin"), "w") as f:
      f.write("LongTail.rho = 10\n")
    with self.assertRaisesRegex(
        ConfigError, "another configuration .*has 'LongTail.rho = 10' where this run has None"):
      run(model_dir, epochs=1)
    self.assertEqual(os.listdir(model_dir), ["config.gin"])


if __name__ == "__main__":
  tf.test.main()
