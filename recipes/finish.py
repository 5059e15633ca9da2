"""The end of a run: evaluate the final weights (and the best checkpoint's), then, on
the chief only, write the summaries, the per-class plot, the serving export, the
operative config (with what `build` derived) and, last, metrics.json, whose presence
marks a finished run.
"""

import os

import gin
import tensorflow as tf

from recipes import evaluation
from recipes import run_report
from tricks import weight_ema
from zoo import export

REPORTED = ("top-level metrics: the test split, final weights (averaged when the optimizer "
            "keeps an EMA); best_on_validation: the best checkpoint on validation")


def best_on_validation(trainer, record):
  """Test metrics of the best-on-validation weights, labelled; the final weights are
  put back afterwards."""
  if record.best is None:
    return None
  model = trainer.built.model
  final = [v.numpy() for v in model.weights]
  tf.train.Checkpoint(model=model).read(record.best["checkpoint"]).expect_partial()
  metrics = trainer.score()  # the checkpoint holds the weights that were validated
  for variable, value in zip(model.weights, final):
    variable.assign(value)
  return dict(record.best, test=metrics)


def operative_config(built):
  """Gin's operative config, then the bindings `build` derived (later lines win when
  the file is parsed again, so the file reproduces the run)."""
  text = gin.operative_config_str()
  if built.derived:
    lines = [f"{k} = {v!r}" for k, v in sorted(built.derived.items())]
    text += ("\n# Derived in build (model card, hyperrule plan); these values were used:\n"
             + "\n".join(lines) + "\n")
  return text


def test_metrics(trainer, record):
  """The report's metrics: the test split's, the run's facts, the best checkpoint's,
  the final validation scores."""
  built = trainer.built
  data, runtime = built.data, built.runtime
  metrics = trainer.evaluate()
  metrics.update(
      recipe=built.task.name, epochs=built.length.epochs, epochs_trained=record.last_epoch,
      steps=built.length.total_steps, seed=runtime.seed, data=data.source.name,
      class_names=[str(name) for name in data.source.class_names],
      num_train_examples=int(len(data.train)),
      num_validation_examples=int(len(data.validation)),
      global_batch_size=built.pipeline.batch_size,
      num_replicas=built.strategy.num_replicas_in_sync,
      train_seconds_this_run=round(record.seconds, 1), stopped_early=record.stopped_early,
      final_train_loss=record.final_train_loss,
      best_on_validation=best_on_validation(trainer, record),
      derived={k: list(v) if isinstance(v, tuple) else v for k, v in built.derived.items()})
  metrics["reported"] = REPORTED
  if len(data.validation):
    final = trainer.evaluate("validation")
    metrics["final_validation"] = {k: final[k] for k in evaluation.METRICS}
  if built.rule_note is not None:
    metrics["hyperrule"] = built.rule_note
  metrics["nonfinite_rollbacks"] = record.rollbacks_this_process
  skipped = list(data.source.skipped_files)
  metrics["skipped_files"] = {"count": len(skipped), "paths": skipped}
  return metrics


def finish(trainer, run_dir, record, extra=None):
  """Evaluates and writes the report, plot, export and operative config; returns the
  metrics. `record` is what `fit` left (trainer.Record); `extra`: report entries of
  the run's own (a stage without training: its tau and sweep)."""
  built = trainer.built
  metrics = test_metrics(trainer, record)
  if run_dir.best_on_test.paper:  # the paper's protocol beside ours (best_on_test.py)
    run_dir.best_on_test.offer(record.last_epoch, metrics)
    metrics["best_on_test_protocol"] = run_dir.best_on_test.summary()
  metrics.update(extra or {})
  if not run_dir.chief:
    if built.runtime.export_saved_model:  # every worker exports (it reads the replicas'
      write_export(os.path.join(run_dir.root, "export"), built)  # variables); the chief's
    return metrics  # is kept
  evaluation.write_summaries(run_dir.eval_writer, metrics, built.length.epochs)
  run_report.plot_per_class_accuracy(
      os.path.join(built.model_dir, "per_class_accuracy.png"), metrics,
      title=f"{built.task.name or built.data.source.name}: per-class accuracy vs. "
      "training count")
  if built.runtime.export_saved_model:
    write_export(os.path.join(built.model_dir, "export"), built)
  run_report.write_text(os.path.join(built.model_dir, "operative_config.gin"),
                    operative_config(built))
  # Last: its presence marks a finished run (a rerun leaves it as it is).
  run_report.write_json(os.path.join(built.model_dir, "metrics.json"), metrics)
  return metrics


def write_export(path, built):
  """The serving SavedModel (averaged weights where the optimizer keeps them), written
  beside `path` and then moved into place."""
  partial = path + ".partial"
  if tf.io.gfile.exists(partial):
    tf.io.gfile.rmtree(partial)
  pipeline, model = built.pipeline, built.model
  with weight_ema.averaged_weights(built.optimizer, model.trainable_variables):
    export.export_saved_model(model, partial, pipeline.eval_image_size,
                              list(pipeline.mean), list(pipeline.std),
                              pipeline.eval_crop_fraction, pipeline.eval_resize_method,
                              whole_pixels=pipeline.hands_uint8)
  if tf.io.gfile.exists(path):
    tf.io.gfile.rmtree(path)
  tf.io.gfile.rename(partial, path)
