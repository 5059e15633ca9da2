"""Every reproduce recipe (one a row of published.json) builds and trains two steps on
generated data of its data set's shape, so no configuration rots unseen: fake CIFAR
pickles, Menon et al.'s TFRecord format, ImageNet-LT-style list files with their
images (for ImageNet too, in place of TFDS's prepared imagenet2012). Only what length and
size need is bound here: two steps, a batch of 4, short warm-ups; the ImageNet rows keep
10 classes and train at 64 px (a grouped convolution's gradient at 224 px takes ~30 s a
step on a CPU)."""

import json
import os
import pickle

from absl.testing import parameterized
import gin
import numpy as np
import tensorflow as tf
import tf_keras

from recipes import strategies
from recipes import train

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
PUBLISHED = os.path.join(ROOT, "recipes", "reproduce", "published.json")
with open(PUBLISHED) as f:
  ROWS = [row["recipe"] for row in json.load(f)["rows"]]

# Enough images a class that Cao et al.'s profile keeps one of the rarest class.
PER_CLASS = {100: 110, 10: 11, 200: 220}


def write_cifar(directory, name, per_class):
  """The python pickles' layout (cifar-10-batches-py/, cifar-100-python/), images of
  noise, `per_class` training and 2 test images a class."""
  classes = 10 if name == "cifar10" else 100
  rng = np.random.default_rng(0)
  train_labels = rng.permutation(np.repeat(np.arange(classes), per_class)).tolist()
  test_labels = np.repeat(np.arange(classes), 2).tolist()
  data = lambda n: rng.integers(0, 256, [n, 3072], dtype=np.uint8)
  if name == "cifar10":
    folder = os.path.join(directory, "cifar-10-batches-py")
    step = len(train_labels) // 5
    files = {f"data_batch_{b + 1}": {"labels": train_labels[b * step:(b + 1) * step],
                                     "data": data(step)} for b in range(5)}
    files["test_batch"] = {"labels": test_labels, "data": data(len(test_labels))}
    files["batches.meta"] = {"label_names": [f"c{i}" for i in range(10)]}
  else:
    folder = os.path.join(directory, "cifar-100-python")
    files = {"train": {"fine_labels": train_labels, "data": data(len(train_labels))},
             "test": {"fine_labels": test_labels, "data": data(len(test_labels))},
             "meta": {"fine_label_names": [f"f{i}" for i in range(100)]}}
  os.makedirs(folder)
  for f, content in files.items():
    with open(os.path.join(folder, f), "wb") as handle:
      pickle.dump(content, handle)
  return folder


def write_menon(directory, name):
  """Their TFRecords: raw 32x32x3 bytes as image/encoded, image/class/label."""
  classes = 10 if name == "cifar10" else 100
  for file_name, labels in ((f"{name}-lt_train.tfrecord", list(range(classes)) * 3),
                            (f"{name}_test.tfrecord", list(range(classes)))):
    with tf.io.TFRecordWriter(os.path.join(directory, file_name)) as writer:
      for k, label in enumerate(labels):
        image = np.full([32, 32, 3], k % 256, np.uint8)
        writer.write(tf.train.Example(features=tf.train.Features(feature={
            "image/encoded": tf.train.Feature(bytes_list=tf.train.BytesList(
                value=[image.tobytes()])),
            "image/class/label": tf.train.Feature(int64_list=tf.train.Int64List(
                value=[label]))})).SerializeToString())
  return directory


def write_lists(directory, classes=10):
  """ImageNet_LT_{train,val,test}.txt over JPEGs of ImageNet-like sizes: 4 down to 1
  training images a class, 1 validation and 1 test image a class."""
  root, lists = os.path.join(directory, "images"), os.path.join(directory, "lists")
  os.makedirs(lists)
  rng = np.random.default_rng(0)
  for split, per_class in (("train", lambda c: 4 - c * 3 // classes), ("val", lambda c: 1),
                           ("test", lambda c: 1)):
    lines = []
    for c in range(classes):
      for i in range(per_class(c)):
        relative = f"{split}/n{c:04d}/{i}.jpg"
        os.makedirs(os.path.dirname(os.path.join(root, relative)), exist_ok=True)
        image = rng.integers(0, 256, [200 + 17 * c, 260 - 9 * i, 3], dtype=np.uint8)
        tf.io.write_file(os.path.join(root, relative), tf.io.encode_jpeg(image))
        lines.append(f"{relative} {c}\n")
    with open(os.path.join(lists, f"ImageNet_LT_{split}.txt"), "w") as f:
      f.writelines(lines)
  return root, lists


# A two-step run is one epoch, in which a cosine set once an epoch (PyTorch's) is already
# at its end (and a warm-up of 37 epochs has no room).
SHORT_COSINE = ["WARMUP_EPOCHS = 0", "epoch_cosine.final_lr = 0.001"]


def bindings(recipe, tmp):
  """The data of `recipe`'s shape, and what makes it a two-step run."""
  family, data = recipe.split("_")[0], recipe.split("_")[1]
  common = ["Runtime.steps = 2", "BATCH_SIZE = 4", "Runtime.checkpoint_every_epochs = 1"]
  if family in ("cao2019", "ren2020"):
    rho = int(recipe.split("_lt_r")[1].split("_")[0])
    path = write_cifar(tmp, data, PER_CLASS[rho])
    extra = [f"CIFAR_DIR = '{path}'", "cifar_python.md5 = None"]
    if family == "ren2020":
      extra += SHORT_COSINE
    return common + extra
  if family == "menon2021":
    return common + [f"MENON_DATA_DIR = '{write_menon(tmp, data)}'",
                     "menon_tfrecord.check_sizes = False"]
  root, lists = write_lists(tmp)
  small = ["NUM_CLASSES = 10", "IMAGE_SIZE = 64", "InputPipeline.eval_image_size = 64"]
  if family == "kang2020":
    return common + small + [
        f"IMAGENET_DIR = '{root}'", f"LISTS_DIR = '{lists}'", "STAGE2_EPOCHS = 1",
        "stage2/Runtime.steps = 2", "epoch_cosine.final_lr = 0.001",
        "stage2/epoch_cosine.final_lr = 0.001"]
  assert family == "brock2021", recipe
  return common + small + [
      f"DATA_DIR = '{tmp}'", "Task.data = @list_file", f"list_file.root = '{root}'",
      f"list_file.list_dir = '{lists}'", "list_file.train_list = 'ImageNet_LT_train.txt'",
      "list_file.test_list = 'ImageNet_LT_test.txt'", "list_file.num_classes = 10",
      "InputPipeline.shuffle_buffer = 8"]


def bound(parameter):
  """The value bound to a Gin `parameter`, or None where it is not bound."""
  try:
    return gin.query_parameter(parameter)
  except ValueError:
    return None


class ReproduceRecipesTest(tf.test.TestCase, parameterized.TestCase):

  def tearDown(self):
    gin.clear_config()
    tf_keras.backend.clear_session()
    super().tearDown()

  def test_every_row_has_a_recipe_and_target(self):
    with open(os.path.join(ROOT, "recipes", "reproduce", "BUILD")) as f:
      build = f.read()
    for row in ROWS:
      self.assertTrue(os.path.isfile(os.path.join(ROOT, "recipes", "reproduce",
                                                  f"{row}.gin")), row)
      self.assertIn(f'"{row}",', build)
    self.assertLen(ROWS, 24)

  @parameterized.named_parameters((row, row) for row in ROWS)
  def test_random_resized_crops_are_drawn_as_the_papers_code_draws_them(self, recipe):
    # Kang et al.'s code (PyTorch) crops by torchvision's RandomResizedCrop; Brock et
    # al.'s (TensorFlow) by sample_distorted_bounding_box, as Model Garden; the CIFAR
    # recipes pad and crop (no random resized crop).
    want = {"kang2020": "torchvision", "brock2021": "model_garden"}.get(recipe.split("_")[0])
    gin.clear_config()
    train.parse_config([f"recipes/reproduce/{recipe}.gin"],
                       bindings(recipe, self.create_tempdir().full_path))
    self.assertEqual(bound("InputPipeline.random_resized_crop") is not None, want is not None)
    if want:
      self.assertEqual(bound("InputPipeline.random_resized_crop_sampler"), want)

  @parameterized.named_parameters((row, row) for row in ROWS)
  def test_builds_and_trains_two_steps(self, recipe):
    tmp = self.create_tempdir().full_path
    model_dir = os.path.join(tmp, "run")
    gin.clear_config()
    extra = bindings(recipe, tmp)
    train.parse_config([f"recipes/reproduce/{recipe}.gin"], extra)
    self.assertEqual(gin.query_parameter("Task.name"), recipe)
    metrics = train.run(model_dir, strategies.make_strategy("one_device"))
    print(recipe, {k: v for k, v in metrics.items() if isinstance(v, (int, float))})
    self.assertIn("balanced_accuracy", metrics)
    self.assertBetween(metrics["balanced_accuracy"], 0.0, 1.0)
    decoupled = os.path.isdir(os.path.join(model_dir, "stage1"))
    self.assertEqual(decoupled, recipe.endswith(("_crt", "_tau_norm", "_lws")))
    first = os.path.join(model_dir, "stage1") if decoupled else model_dir
    with open(os.path.join(first, "metrics.json")) as f:
      self.assertEqual(json.load(f)["steps"], 2)
    with open(os.path.join(first, "operative_config.gin")) as f:
      self.assertIn(recipe, f.read())


if __name__ == "__main__":
  tf.test.main()
