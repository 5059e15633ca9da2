"""//benchmarks:transfer: its runs' lengths and pairing, the source written in each
family's download format and read back through zoo.build's `weights`, the table's
intervals against the t formula, and the whole command on a small Fashion-MNIST
written here (every arm's bindings reach its run; a rerun reads the runs back)."""

import json
import os
import subprocess
import sys

import numpy as np
import tensorflow as tf

from benchmarks import runs as runs_lib
from benchmarks import tables
from benchmarks import transfer_benchmark as bench
from tests.benchmarks import operative
from tests.recipes.data import fashion_mnist_test
from zoo import registry

# Student's t, two-sided 95%, from a printed table (e.g. Fisher & Yates): 2 and 8 df.
T_975 = {2: 4.303, 8: 2.306}


class LengthTest(tf.test.TestCase):

  def test_echo_fills_ten_batches_of_twenty_and_steps_stay_about_the_same(self):
    # (k, classes) -> (echo, epochs): n * echo >= 200 images an epoch, 10 batches of 20.
    for (k, classes), want in {(1, 5): (40, 10), (1, 10): (20, 10), (5, 5): (8, 10),
                               (10, 5): (4, 10), (10, 10): (2, 10),
                               (50, 5): (1, 8)}.items():
      echo, epochs = bench.length(k, classes)
      self.assertEqual((echo, epochs), want, msg=(k, classes))
      steps = epochs * (k * classes * echo // bench.BATCH)
      self.assertBetween(steps, 90, 110)
    # A short run keeps 3 epochs or more (two phases give the head a third of them).
    self.assertEqual(bench.length(1, 5, steps=4), (4, 4))  # 20 images an epoch, 1 batch
    self.assertEqual(bench.length(1, 5, steps=30), (40, 3))

  def test_arms_of_a_cell_share_draw_and_seed_and_differ_only_in_their_switch(self):
    sitting = bench.Sitting("/r", "/fm", weights="/w.npz", sha256="ab" * 32)
    runs = {arm: bench.target_run("nfnet_nano", "near", 5, arm, 2, 1, sitting)
            for arm in bench.ARMS}
    for arm, run in runs.items():
      self.assertIn("SPLIT_SEED = 2", run.bindings)
      self.assertIn("SEED = 1", run.bindings)
      self.assertIn("SHOTS = 5", run.bindings)
      self.assertEqual(os.path.basename(run.model_dir), "draw2_seed1")
      pretrained = "WEIGHTS = '/w.npz'" in run.bindings
      self.assertEqual(pretrained, arm != bench.SCRATCH, msg=arm)
      self.assertEqual(f"zoo.build.weights_sha256 = '{'ab' * 32}'" in run.bindings,
                       pretrained)
    self.assertIn("WEIGHTS = None", runs[bench.SCRATCH].bindings)
    self.assertIn("FREEZE_BACKBONE = True", runs[bench.LINEAR].bindings)
    self.assertIn("HEAD_EPOCHS = 3", runs["two phases"].bindings)  # a third of 10
    self.assertIn("recipes/configs/runs/bit_hyperrule.gin", runs["BiT-HyperRule"].gin_files)
    own = bench.Sitting("/r", "/fm", weights="/s4.npz", sha256="cd" * 32, source_seed=4)
    self.assertEqual(bench.target_run("nfnet_nano", "near", 5, bench.LINEAR, 1, 1,
                                      own).model_dir,
                     "/r/nfnet_nano/near/k5/linear/draw1_seed1_source4")
    self.assertEqual(bench.target_run("nfnet_nano", "near", 5, bench.SCRATCH, 1, 1,
                                      own), bench.target_run(  # reads no source
                                          "nfnet_nano", "near", 5, bench.SCRATCH, 1, 1,
                                          sitting))
    far = bench.target_run("resnet50", "far", 5, bench.LINEAR, 0, 0,
                           bench.Sitting("/r", "/fm", weights="/w.h5", sha256="00"))
    self.assertEqual(far.gin_files, ("recipes/resnet50_finetune.gin",))  # its digits
    self.assertNotIn(bench.CLASSES_GIN, far.gin_files)


class SourcePerRunTest(tf.test.TestCase):

  def test_every_pair_its_own_source_and_the_shared_ones_at_0_0(self):
    seeds = {(d, s): bench.source_seed(d, s) for d in range(20) for s in range(20)}
    self.assertLen(set(seeds.values()), len(seeds))  # injective (Cantor's pairing)
    self.assertEqual([seeds[p] for p in ((0, 0), (1, 0), (0, 1), (1, 1), (2, 2))],
                     [0, 1, 2, 4, 12])  # (d + s)(d + s + 1) / 2 + s, by hand
    shared = bench.source_run("nfnet_nano", "/r", "/fm")
    own = bench.source_run("nfnet_nano", "/r", "/fm", seed=4)
    self.assertEqual(shared.model_dir, "/r/source/nfnet_nano")
    self.assertEqual(own.model_dir, "/r/source/nfnet_nano_seed4")
    self.assertEqual(set(own.bindings) ^ set(shared.bindings), {"SEED = 0", "SEED = 4"})


class RateChoiceTest(tf.test.TestCase):

  @staticmethod
  def runs(arm, rate, validation, test, pairs=((0, 0), (0, 1), (1, 0))):
    return [{"family": "resnet50", "target": "far", "k": 10, "arm": arm,
             "learning_rate": rate, "draw": d, "seed": s,
             "validation_balanced_accuracy": validation + 0.01 * i,
             "balanced_accuracy": test + 0.01 * i} for i, (d, s) in enumerate(pairs)]

  def test_a_rate_binds_learning_rate_in_a_folder_of_its_own_and_the_recipes_none(self):
    sitting = bench.Sitting("/r", "/fm", weights="/w.h5", sha256="00")
    recipe = bench.target_run("resnet50", "far", 5, bench.LINEAR, 1, 2, sitting)
    self.assertEqual(recipe.model_dir, "/r/resnet50/far/k5/linear/draw1_seed2")
    self.assertFalse([b for b in recipe.bindings if b.startswith("LEARNING_RATE")])
    self.assertEqual(recipe.bindings, (  # as before rates were a choice: runs read back
        "Runtime.export_saved_model = False", "SEED = 2", "Task.validation_per_class = 10",
        "SHOTS = 5", "SPLIT_SEED = 1", "BATCH_SIZE = 20", "InputPipeline.echo_factor = 4",
        "EPOCHS = 10", "Runtime.checkpoint_every_epochs = 10", "WEIGHTS = '/w.h5'",
        "zoo.build.weights_sha256 = '00'", "FREEZE_BACKBONE = True"))
    low = bench.target_run("resnet50", "far", 5, bench.LINEAR, 1, 2, sitting, 0.001)
    self.assertEqual(low.model_dir, "/r/resnet50/far/k5/linear/lr0.001/draw1_seed2")
    self.assertIn("LEARNING_RATE = 0.001", low.bindings)
    self.assertEqual(set(low.bindings) - set(recipe.bindings), {"LEARNING_RATE = 0.001"})

  def test_the_rate_of_the_best_mean_validation_accuracy_whatever_the_test_says(self):
    rates = [bench.RECIPE_RATE, 0.001, 0.1]
    runs = (self.runs("full fine-tune", bench.RECIPE_RATE, 0.50, 0.90)
            + self.runs("full fine-tune", 0.001, 0.60, 0.40)  # best on validation
            + self.runs("full fine-tune", 0.1, 0.55, 0.95)    # best on test: not chosen
            + self.runs(bench.LINEAR, bench.RECIPE_RATE, 0.70, 0.5)  # tie: the first
            + self.runs(bench.LINEAR, 0.001, 0.70, 0.6)
            + self.runs(bench.LINEAR, 0.1, 0.40, 0.9))
    chosen, choices = bench.choose_rates(runs, rates)
    by_arm = {c["arm"]: c for c in choices}
    self.assertEqual(by_arm["full fine-tune"]["chosen"], 0.001)
    self.assertAllClose(by_arm["full fine-tune"]["validation"][0.001], 0.61)  # mean
    self.assertEqual(by_arm[bench.LINEAR]["chosen"], bench.RECIPE_RATE)
    self.assertEqual(sorted((r["arm"], r["learning_rate"]) for r in chosen),
                     sorted([("full fine-tune", 0.001)] * 3
                            + [(bench.LINEAR, bench.RECIPE_RATE)] * 3))
    results = {"learning_rates": rates, "rate_choices": choices}
    rows = tables.transfer_rates(results).splitlines()
    self.assertEqual(rows[0], "| family | target | k | arm | runs | validation @ recipe | "
                              "validation @ 0.001 | validation @ 0.1 | chosen rate |")
    self.assertEqual(rows[2], "| resnet50 | far | 10 | full fine-tune | 3 | 0.510 | 0.610 | "
                              "0.560 | 0.001 |")
    self.assertEqual(rows[3], "| resnet50 | far | 10 | linear probe | 3 | 0.710 | 0.710 | "
                              "0.410 | recipe |")
    again = json.loads(json.dumps(results))  # as the docs read it back
    self.assertEqual(tables.transfer_rates(again), tables.transfer_rates(results))

  def test_rates_on_other_pairs_or_without_validation_are_refused(self):
    runs = (self.runs(bench.LINEAR, bench.RECIPE_RATE, 0.5, 0.5)
            + self.runs(bench.LINEAR, 0.01, 0.5, 0.5, pairs=((0, 0), (0, 1), (2, 2))))
    with self.assertRaisesRegex(ValueError, "different \\(draw, seed\\) pairs"):
      bench.choose_rates(runs, [bench.RECIPE_RATE, 0.01])
    with self.assertRaisesRegex(ValueError, "no runs at rate\\(s\\) \\[0.1\\]"):
      bench.choose_rates(runs, [bench.RECIPE_RATE, 0.01, 0.1])
    runs = self.runs(bench.LINEAR, bench.RECIPE_RATE, 0.5, 0.5)
    runs[1]["validation_balanced_accuracy"] = None
    with self.assertRaisesRegex(ValueError, "no validation accuracy"):
      bench.choose_rates(runs, [bench.RECIPE_RATE])


class PixelCentroidTest(tf.test.TestCase):

  def test_nearest_class_mean_by_hand(self):
    # k = 2 takes both examples of a class: means (0, 0.05) and (0.95, 0.95). Squared
    # distances of (0.45, 0.45): 0.3625 and 0.5 -> class 0; (0.9, 0.8) -> 1; (0.1, 0) -> 0.
    train_x = np.array([[0, 0], [0, 0.1], [1, 1], [0.9, 0.9]], np.float32)
    train_y = np.array([0, 0, 1, 1])
    test_x = np.array([[0.9, 0.8], [0.45, 0.45], [0.1, 0.0]], np.float32)
    test_y = np.array([1, 0, 0])
    self.assertEqual(bench.pixel_centroid((train_x, train_y, test_x, test_y), 2, draws=3),
                     [1.0, 1.0, 1.0])
    wrong = np.array([1, 1, 1])  # predicted 1, 0, 0: one right
    self.assertAllClose(bench.pixel_centroid((train_x, train_y, test_x, wrong), 2, draws=1),
                        [1 / 3])
    self.assertLen(bench.pixel_centroid((train_x, train_y, test_x, test_y), 1, draws=7), 7)


class ExportTest(tf.test.TestCase):

  def export_and_reload(self, name, suffix):
    """The exported source's features equal the trained model's, read back by
    zoo.build(weights=...) under a new head of another class count."""
    model = registry.build(name, num_classes=5, input_shape=(None, None, 3))
    rng = np.random.default_rng(0)
    for w in model.weights:  # weights no initialiser would give, BatchNorm stats too
      w.assign(w + rng.normal(scale=0.05, size=w.shape).astype(np.float32))
    model_dir = self.create_tempdir().full_path
    os.makedirs(os.path.join(model_dir, "checkpoints"))
    tf.train.Checkpoint(model=model).write(os.path.join(model_dir, "checkpoints", "ckpt-7"))
    path = os.path.join(model_dir, "source" + suffix)
    sha256 = bench.export_source(name, model_dir, path)
    self.assertLen(sha256, 64)
    again = registry.build(name, num_classes=3, input_shape=(None, None, 3), weights=path,
                           weights_sha256=sha256)
    x = tf.random.stateless_uniform((2, 32, 32, 3), seed=[1, 2], maxval=255.0)
    features = lambda m: tf_keras_features(m)(x, training=False)
    self.assertAllClose(features(again), features(model), rtol=1e-5, atol=1e-5)
    self.assertEqual(again.get_layer("logits").kernel.shape[-1], 3)
    self.assertEqual(sorted(os.listdir(model_dir)), ["checkpoints", "source" + suffix])

  def test_nfnet_as_deepmind_npz(self):
    self.export_and_reload("nfnet_nano", ".npz")

  def test_resnet50_as_keras_no_top_h5(self):
    self.export_and_reload("resnet50", ".h5")


def tf_keras_features(model):
  import tf_keras  # pylint: disable=import-outside-toplevel
  return tf_keras.Model(model.inputs, model.get_layer("logits").input)


class IndependentRunsTest(tf.test.TestCase):

  def test_each_draw_its_own_seed_at_every_k(self):
    grid = dict(draws=(0, 1, 2, 3), seeds=(0, 1, 2, 3), independent=True)
    self.assertEqual(bench.pairs(grid, 5), [(0, 0), (1, 1), (2, 2), (3, 3)])
    self.assertEqual(bench.pairs(grid, 50), [(0, 0), (1, 1), (2, 2)])  # --large_k_runs
    crossed = dict(draws=(0, 1), seeds=(0, 1), independent=False)
    self.assertEqual(bench.pairs(crossed, 5), [(0, 0), (0, 1), (1, 0), (1, 1)])
    self.assertEqual(bench.pairs(crossed, 50), [(0, 0), (1, 1)])
    results = dict(source_classes=[0], near_classes=[1], steps=100, sources={})
    self.assertIn("mean over draws x seeds", tables.transfer_caption(results))
    self.assertIn("mean over runs, each its own draw and seed (draw = seed)",
                  tables.transfer_caption(dict(results, independent_runs=True)))


class TableTest(tf.test.TestCase):

  def results(self):
    runs = []
    for arm, offset in ((bench.SCRATCH, 0.0), (bench.LINEAR, 0.1), ("full fine-tune", 0.2)):
      for i, (draw, seed) in enumerate((d, s) for d in range(3) for s in range(3)):
        runs.append({"family": "nfnet_nano", "target": "near", "k": 1, "arm": arm,
                     "draw": draw, "seed": seed,
                     "balanced_accuracy": 0.5 + offset + 0.01 * i + (0.03 if arm == (
                         "full fine-tune") and i % 2 else 0.0)})
    return {"families": ["nfnet_nano"], "targets": ["near"], "shots": [1],
            "arms": [bench.SCRATCH, bench.LINEAR, "full fine-tune"], "runs": runs}

  def test_intervals_and_paired_differences_follow_the_t_formula(self):
    results = self.results()
    values = np.array([0.5 + 0.01 * i for i in range(9)])
    mean, low, high = tables.interval(tables.cell_values(results, "nfnet_nano", "near", 1,
                                                          bench.SCRATCH))
    half = T_975[8] * values.std(ddof=1) / 3.0
    self.assertAllClose([mean, low, high], [values.mean(), values.mean() - half,
                                            values.mean() + half], atol=2e-4)
    text = tables.transfer(results)
    rows = {line.split(" | ")[3]: line for line in text.splitlines()[2:]}
    # Linear probe - scratch: +0.1 in every pair, no spread: ahead.
    self.assertIn("| +0.100 [+0.100, +0.100] ahead |", rows[bench.LINEAR])
    # Full - linear probe: differences 0.1 + 0.03 on odd pairs (4 of 9).
    d = 0.1 + 0.03 * (np.arange(9) % 2)
    half = T_975[8] * d.std(ddof=1) / 3.0
    self.assertIn(f"{d.mean():+.3f} [{d.mean() - half:+.3f}, {d.mean() + half:+.3f}] ahead",
                  rows["full fine-tune"])
    self.assertIn("| 9 |", rows["full fine-tune"])
    self.assertEqual(tables.transfer(results, methods=[bench.LINEAR]).count("\n"), 2)

  def test_schedules_against_the_full_fine_tune(self):
    results = self.results()
    for r in list(results["runs"]):
      if r["arm"] == "full fine-tune":
        results["runs"].append(dict(r, arm="two phases",
                                    balanced_accuracy=r["balanced_accuracy"] - 0.05))
    for r in results["runs"]:
      r["final_train_loss"] = 0.5 if r["arm"] == "two phases" else 0.1
    results["arms"].append("two phases")
    rows = {line.split(" | ")[3]: line
            for line in tables.transfer_schedules(results).splitlines()[2:]}
    self.assertCountEqual(rows, ["full fine-tune", "two phases"])  # no scratch, no probe
    # Two phases - full: -0.05 in every pair, no spread: behind.
    self.assertIn("| 9 | -0.050 [-0.050, -0.050] behind | 0.500 |", rows["two phases"])
    self.assertIn("| 9 | — | 0.100 |", rows["full fine-tune"])

  def test_one_run_a_cell_has_no_interval_and_no_verdict(self):
    results = self.results()
    results["runs"] = [r for r in results["runs"] if (r["draw"], r["seed"]) == (0, 0)]
    text = tables.transfer(results)
    self.assertIn("| 1 | 0.600 | +0.100 (1 pair) | — |", text)


class CommandTest(tf.test.TestCase):
  """The whole command on a small Fashion-MNIST (130 training images a class, 5 test)."""

  def command(self, *args):
    env = dict(os.environ, PYTHONPATH=runs_lib.ROOT)
    return subprocess.run([sys.executable, "-m", "benchmarks.transfer_benchmark", *args],
                          cwd=runs_lib.ROOT, env=env, capture_output=True, text=True,
                          check=False)

  def small_release(self):
    data = self.create_tempdir().full_path
    fashion_mnist_test.write_release(data, n_train=1300, n_test=50)
    out = self.create_tempdir().full_path
    args = [f"--out_dir={out}", f"--fashion_mnist_dir={data}", "--families=nfnet_nano",
            "--targets=near", "--shots=1", "--draws=0", "--seeds=0", "--steps=4",
            "--source_epochs=3", "--gin_bindings=fashion_mnist.md5 = None"]  # 3 steps: warm-up
    return data, out, args

  def test_every_arm_runs_with_its_bindings_and_a_rerun_reads_them_back(self):
    data, out, args = self.small_release()
    args.append(f"--arms={','.join(bench.SHORT.values())}")  # every arm (default: three)
    done = self.command(*args)
    self.assertEqual(done.returncode, 0, msg=done.stderr[-3000:])
    with open(os.path.join(out, "transfer.json")) as f:
      results = json.load(f)
    self.assertEqual([r["arm"] for r in results["runs"]], list(bench.ARMS))
    source = results["sources"]["nfnet_nano"]
    self.assertEqual(source["train_class_counts"], [30] * 5)  # 130 less 100 held out
    self.assertEqual(source["steps"], 3)  # 150 images at batch 128, 3 epochs
    self.assertEqual(os.path.basename(source["weights"]), "nfnet_nano_source.npz")
    for run in results["runs"]:
      self.assertEqual(run["train_class_counts"], [1] * 5)
      self.assertEqual(run["num_test_examples"], 25)  # 5 a class of the 5 unseen
      self.assertBetween(run["balanced_accuracy"], 0.0, 1.0)
    for arm in bench.ARMS:  # each arm's switch reached its run (a typo would not)
      run = bench.target_run("nfnet_nano", "near", 1, arm, 0, 0, bench.Sitting(
          out, data, source["weights"], source["sha256"], steps=4,
          extra=("fashion_mnist.md5 = None",)))
      values = operative.operative_values(os.path.join(run.model_dir,
                                                       "operative_config.gin"))
      for binding in bench.arm_run(arm, bench.length(1, 5, 4)[1], 4)[1]:
        name, value = (p.strip() for p in binding.split("=", 1))
        self.assertTrue(operative.same_value(values[operative.short_name(name)], value),
                        msg=binding)
      with open(os.path.join(run.model_dir, "operative_config.gin")) as f:
        operative_text = f.read()  # (Gin wraps the long hash onto its own line)
      self.assertEqual(source["sha256"] in operative_text, arm != bench.SCRATCH, msg=arm)
      self.assertFalse(os.path.exists(os.path.join(run.model_dir, "checkpoints")), msg=arm)
    self.assertTrue(os.listdir(os.path.join(os.path.dirname(source["weights"]),
                                            "checkpoints")))  # the source keeps its own
    self.assertIn("| nfnet_nano | near | 1 | linear probe | 1 |", done.stdout)
    self.assertLen(results["pixel_centroid"]["near"]["1"], 50)
    self.assertIn("| near | 1 | 50 |", done.stdout)
    self.assertTrue(os.path.getsize(os.path.join(out, "transfer.png")) > 0)
    again = self.command(*args)  # every run read back: the same figures
    self.assertEqual(again.returncode, 0, msg=again.stderr[-3000:])
    with open(os.path.join(out, "transfer.json")) as f:
      reread = json.load(f)
    self.assertEqual([r["balanced_accuracy"] for r in reread["runs"]],
                     [r["balanced_accuracy"] for r in results["runs"]])
    self.assertEqual([r["wall_seconds"] for r in reread["runs"]],
                     [r["wall_seconds"] for r in results["runs"]])

  def test_choosing_a_rate_reads_the_recipes_run_back_and_uses_validation(self):
    # Under --source_per_run, draw 0 seed 1 reads a source of its own: SEED 2.
    data, out, args = self.small_release()
    args = [a for a in args if a != "--seeds=0"] + ["--seeds=1", "--source_per_run",
                                                      "--arms=linear"]
    first = self.command(*args)
    self.assertEqual(first.returncode, 0, msg=first.stderr[-3000:])
    with open(os.path.join(out, "transfer.json")) as f:
      results = json.load(f)
    source = results["sources"]["nfnet_nano"]
    self.assertEqual(list(results["source_runs"]["nfnet_nano"]), ["2"])
    self.assertEqual((source["source_seed"], results["runs"][0]["source_seed"]), (2, 2))
    self.assertEqual(operative.operative_values(os.path.join(
        os.path.dirname(source["weights"]), "operative_config.gin"))["SEED"], "2")
    self.assertIn("over 1 sources, one a (draw, seed)", first.stdout)
    # The recipe's run read back, 0.5 run anew; the choice on validation.
    swept = self.command(*args, "--learning_rates=recipe,0.5")
    self.assertEqual(swept.returncode, 0, msg=swept.stderr[-3000:])
    with open(os.path.join(out, "transfer.json")) as f:
      sweep = json.load(f)
    self.assertEqual([(r["learning_rate"], r["wall_seconds"]) for r in sweep["rate_runs"]][0],
                     ("recipe", results["runs"][0]["wall_seconds"]))
    fast = bench.target_run("nfnet_nano", "near", 1, bench.LINEAR, 0, 1, bench.Sitting(
        out, data, source["weights"], source["sha256"], steps=4,
        extra=("fashion_mnist.md5 = None",), source_seed=2), 0.5)
    self.assertTrue(fast.model_dir.endswith("lr0.5/draw0_seed1_source2"))
    with open(os.path.join(fast.model_dir, "operative_config.gin")) as f:
      self.assertIn(source["sha256"], f.read())  # the run read its own source
    self.assertTrue(operative.same_value(operative.operative_values(os.path.join(
        fast.model_dir, "operative_config.gin"))["LEARNING_RATE"], "0.5"))
    (choice,) = sweep["rate_choices"]
    validation = {r["learning_rate"]: r["validation_balanced_accuracy"]
                  for r in sweep["rate_runs"]}
    self.assertEqual(validation[choice["chosen"]], max(validation.values()))  # its rule
    if validation["recipe"] == validation[0.5]:  # a tie goes to the first given
      self.assertEqual(choice["chosen"], "recipe")
    self.assertEqual([r["learning_rate"] for r in sweep["runs"]], [choice["chosen"]])
    self.assertIn("| validation @ recipe | validation @ 0.5 | chosen rate |", swept.stdout)

  def test_bad_flags_are_one_line_errors(self):
    for flag, message in (("--shots=0", "--shots=0: give distinct whole numbers >= 1"),
                          ("--shots=a", "--shots=a: give distinct whole numbers"),
                          ("--draws=0,1,01", "--draws=0,1,01: give distinct whole"),
                          ("--independent_runs --draws=2,2", "--draws=2,2: give distinct"),
                          ("--families=vgg", "--families=vgg: choose from nfnet_nano"),
                          ("--arms=full,dropout", "choose from scratch, linear"),
                          ("--fashion_mnist_dir=/nonexistent", "is not a directory"),
                          ("--learning_rates=0", "give distinct positive rates"),
                          ("--learning_rates=-0.1", "give distinct positive rates"),
                          ("--learning_rates=nan", "give distinct positive rates"),
                          ("--learning_rates=fast", "give distinct positive rates"),
                          ("--learning_rates=0.1,1e-1", "give distinct positive rates"),
                          ("--learning_rates=inf", "give distinct positive rates"),
                          ("--learning_rates=1e309", "give distinct positive rates"),
                          ("--learning_rates=recipe,,0.1", "give distinct positive rates"),
                          ("--learning_rates=recipe,recipe", "give distinct positive rates"),
                          ("--quick --learning_rates=0.1", "--quick runs the recipe's rate"),
                          ("--learning_rates=", "--learning_rates is empty"),
                          ("--arms=full,bit --learning_rates=recipe,0.1",
                           "--arms=bit sets its own rate"),
                          ("--independent_runs --seeds=0,1", "leave out --seeds"),
                          ("--quick --independent_runs", "leave out --independent_runs")):
      done = self.command(*flag.split(), f"--out_dir={self.create_tempdir().full_path}")
      self.assertEqual(done.returncode, 2, msg=flag)
      self.assertRegex(done.stderr.strip(), f"^error: .*{message}", msg=flag)
      self.assertEqual(len(done.stderr.strip().splitlines()), 1, msg=done.stderr)


if __name__ == "__main__":
  tf.test.main()
