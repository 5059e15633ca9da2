"""CIFAR-LT as Cao et al. draw it: their counts, their images, on fake pickles made here.

The reference below is their `imbalance_cifar.py` loop written again with numpy's
global legacy generator (np.random.seed, np.random.shuffle), reading the fake
pickles directly: independent of recipes/data/cifar_lt.py and cifar_python.py.
"""

import io
import os
import pickle
import tarfile
import tempfile

from absl.testing import parameterized
import gin
import numpy as np
import tensorflow as tf
import tensorflow_datasets as tfds

from recipes import configurables  # pylint: disable=unused-import
from recipes import experiment
from recipes import build
from recipes.data import cifar_lt
from recipes.data import cifar_python
from recipes.errors import ConfigError

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))

# Cao et al. 2019, Table 1 / their code: CIFAR-10-LT per-class training counts.
CIFAR10_RHO100 = [5000, 2997, 1796, 1077, 645, 387, 232, 139, 83, 50]
CIFAR10_RHO10 = [5000, 3871, 2997, 2320, 1796, 1391, 1077, 834, 645, 500]


def their_counts(n, cls_num, imb_factor):
  """get_img_num_per_cls(cls_num, 'exp', imb_factor, 1.0), as written in their code."""
  img_max = int(n / cls_num * 1.0)
  return [int(img_max * (imb_factor**(cls_idx / (cls_num - 1.0))))
          for cls_idx in range(cls_num)]


def their_selection(targets, img_num_per_cls, rand_number):
  """np.random.seed(rand_number); gen_imbalanced_data: the kept indices, in order."""
  np.random.seed(rand_number)
  targets_np = np.array(targets, dtype=np.int64)
  kept = []
  for the_class, the_img_num in zip(np.unique(targets_np), img_num_per_cls):
    idx = np.where(targets_np == the_class)[0]
    np.random.shuffle(idx)
    kept.append(idx[:the_img_num])
  return np.concatenate(kept)


def pickled(obj):
  # Protocol 4: Python 3's protocol 2 writes bytes through _codecs.encode, which the
  # reader's allow-list (zoo/safe_pickle.py) does not admit and CIFAR's own Python 2
  # pickles never name (tests/zoo/safe_pickle_test.py reads a Python 2 style batch).
  return pickle.dumps(obj, protocol=4)


def fake_files(name, per_class, seed=0):
  """{file name: pickle bytes} of a fake CIFAR: `per_class` training images a class in
  shuffled label order, each image's pixels holding its training index (low, high
  byte), and 10 test images a class."""
  classes = 10 if name == "cifar10" else 100
  rng = np.random.default_rng(seed)
  train_labels = rng.permutation(np.repeat(np.arange(classes), per_class))
  test_labels = np.repeat(np.arange(classes), 10)

  def images(n, offset):
    index = np.arange(n) + offset
    data = np.zeros([n, 3072], np.uint8)
    data[:, 0::2] = (index % 256)[:, None]
    data[:, 1::2] = (index // 256)[:, None]
    return data

  n = len(train_labels)
  if name == "cifar10":
    step = n // 5
    files = {f"data_batch_{b + 1}": pickled({
        "batch_label": f"training batch {b + 1} of 5",
        "labels": train_labels[b * step:(b + 1) * step].tolist(),
        "data": images(step, b * step)}) for b in range(5)}
    files["test_batch"] = pickled({"labels": test_labels.tolist(),
                                   "data": images(len(test_labels), 0)})
    files["batches.meta"] = pickled({"label_names": [f"c{i}" for i in range(10)]})
  else:
    files = {"train": pickled({"fine_labels": train_labels.tolist(),
                               "coarse_labels": (train_labels // 5).tolist(),
                               "data": images(n, 0)}),
             "test": pickled({"fine_labels": test_labels.tolist(),
                              "coarse_labels": (test_labels // 5).tolist(),
                              "data": images(len(test_labels), 0)}),
             "meta": pickled({"fine_label_names": [f"f{i}" for i in range(100)]})}
  return files


def write_archive(directory, name, files):
  info = cifar_python.CIFAR[name]
  path = os.path.join(directory, info["archive"][0])
  with tarfile.open(path, "w:gz") as tar:
    for f, data in files.items():
      member = tarfile.TarInfo(f"{info['folder']}/{f}")
      member.size = len(data)
      tar.addfile(member, io.BytesIO(data))
  return path


def read_targets(files, name):
  """The training labels in file order, straight from the pickles."""
  if name == "cifar100":
    return pickle.loads(files["train"], encoding="latin1")["fine_labels"]
  return [label for b in range(1, 6)
          for label in pickle.loads(files[f"data_batch_{b}"], encoding="latin1")["labels"]]


class KeyOrder(tfds.core.GeneratorBasedBuilder):
  """600 examples written with keys 0..599 and their index as `id`, as TFDS's cifar.py
  writes CIFAR (key = the example's position in the binary batches)."""
  VERSION = tfds.core.Version("1.0.0")

  def _info(self):
    return tfds.core.DatasetInfo(builder=self, features=tfds.features.FeaturesDict({
        "id": tfds.features.Text(), "label": tfds.features.ClassLabel(num_classes=10)}))

  def _split_generators(self, dl_manager):
    del dl_manager
    return {"train": self._generate_examples(600), "test": self._generate_examples(10)}

  def _generate_examples(self, n):
    for index in range(n):
      yield index, {"id": f"train_{index:05d}", "label": index % 10}


class CifarLtTest(tf.test.TestCase, parameterized.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.tmp = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
    cls.files = {"cifar10": fake_files("cifar10", 60), "cifar100": fake_files("cifar100", 6)}
    cls.archives = {}
    for name, files in cls.files.items():
      os.makedirs(os.path.join(cls.tmp, name))
      cls.archives[name] = write_archive(os.path.join(cls.tmp, name), name, files)

  def tearDown(self):
    gin.clear_config()
    super().tearDown()

  def test_paper_counts(self):
    self.assertEqual(cifar_lt.cao_counts(50000, 10, 100), CIFAR10_RHO100)
    self.assertEqual(cifar_lt.cao_counts(50000, 10, 10), CIFAR10_RHO10)
    hundred = cifar_lt.cao_counts(50000, 100, 100)
    self.assertEqual((hundred[0], hundred[-1], sum(hundred)), (500, 5, 10847))
    ten = cifar_lt.cao_counts(50000, 100, 10)
    self.assertEqual((ten[0], ten[-1], sum(ten)), (500, 50, 19573))
    self.assertEqual(sum(CIFAR10_RHO100), 12406)
    self.assertEqual(sum(CIFAR10_RHO10), 20431)
    # Their imb_factor literals; 1 / rho is the same double.
    for classes in (10, 100):
      for rho, imb_factor in ((10, 0.1), (50, 0.02), (100, 0.01), (200, 0.005)):
        self.assertEqual(cifar_lt.cao_counts(50000, classes, rho),
                         their_counts(50000, classes, imb_factor))
    # Through the Task.long_tail interface, on a full-size balanced label array.
    labels = np.repeat(np.arange(10), 5000)
    chosen = cifar_lt.CaoLongTail(rho=100).select(labels, 10)
    self.assertEqual(np.bincount(labels[chosen]).tolist(), CIFAR10_RHO100)

  @parameterized.parameters(("cifar10", 10, 0), ("cifar10", 50, 0), ("cifar10", 10, 3),
                            ("cifar100", 5, 0), ("cifar100", 2, 7))
  def test_selection_equals_theirs(self, name, rho, seed):
    files = self.files[name]
    targets = read_targets(files, name)
    expected = their_selection(targets, their_counts(len(targets), 10 if name == "cifar10"
                                                     else 100, 1.0 / rho), seed)
    source = cifar_python.cifar_python(path=self.archives[name], md5=None)
    self.assertEqual(source.train_labels.tolist(), targets)  # the pickles' order
    long_tail = cifar_lt.CaoLongTail(rho=rho, seed=seed)
    drawn = long_tail.draw(source.train_labels, source.num_classes)
    self.assertAllEqual(drawn, expected)  # the same images, in their order
    chosen = long_tail.select(source.train_labels, source.num_classes)
    self.assertAllEqual(chosen, np.sort(expected))
    # The examples the trainer reads for those indices are those images.
    for k, (image, label) in enumerate(source.make_dataset("train", chosen[:40])):
      index = int(chosen[k])
      self.assertEqual(int(label), targets[index])
      self.assertEqual(image.shape, (32, 32, 3))
      flat = np.transpose(image.numpy(), (2, 0, 1)).reshape(-1)
      self.assertEqual(int(flat[0]) + 256 * int(flat[1]), index)
    self.assertLen(source.test_labels, 10 * source.num_classes)  # test set untouched

  def test_trainer_load_data_keeps_their_images(self):
    """`Task.long_tail = @CaoLongTail()` through the trainer's load_data (no hold-out)."""
    task = experiment.Task(
        data=lambda: cifar_python.cifar_python(path=self.archives["cifar10"], md5=None),
        long_tail=cifar_lt.CaoLongTail(rho=10, seed=0), model=None)
    data = build.load_data(task, seed=5)  # the run's seed does not move the split
    targets = read_targets(self.files["cifar10"], "cifar10")
    expected = their_selection(targets, their_counts(600, 10, 0.1), 0)
    self.assertAllEqual(data.train, np.sort(expected))
    self.assertEqual(data.counts.tolist(), their_counts(600, 10, 0.1))
    self.assertEmpty(data.validation)

  def test_errors(self):
    with self.assertRaisesRegex(ConfigError, "CaoLongTail.rho must be a number >= 1"):
      cifar_lt.CaoLongTail(rho=0.5)
    with self.assertRaisesRegex(ConfigError, "CaoLongTail.seed=-1"):
      cifar_lt.CaoLongTail(seed=-1)
    with self.assertRaisesRegex(ConfigError, "draws from a balanced pool"):
      cifar_lt.CaoLongTail().select(np.array([0, 0, 1]), 2)

  def test_tfds_train_order_is_not_the_key_order(self):
    """Why @cifar_python exists: TFDS writes records sorted by a hash of their key, so
    its cifar10 'train' split does not come in the batches' order."""
    data_dir = os.path.join(self.get_temp_dir(), "tfds")
    KeyOrder(data_dir=data_dir).download_and_prepare()
    ids = [int(example["id"][len("train_"):]) for example in tfds.as_numpy(
        KeyOrder(data_dir=data_dir).as_dataset(split="train", shuffle_files=False))]
    self.assertCountEqual(ids, range(600))
    self.assertNotEqual(ids, list(range(600)))

  @parameterized.parameters("cifar10", "cifar100")
  def test_gin_config(self, name):
    classes = 10 if name == "cifar10" else 100
    gin.add_config_file_search_path(ROOT)
    gin.parse_config_files_and_bindings(
        [os.path.join(ROOT, "recipes", "configs", "data", "cifar_lt_cao.gin")],
        ["SEED = 0", "IMAGE_SIZE = 32", f"CIFAR_DIR = '{self.archives[name]}'",
         f"NUM_CLASSES = {classes}", "RHO = 5", "cifar_python.md5 = None"],
        skip_unknown=False)
    source = gin.query_parameter("Task.data").scoped_configurable_fn()
    self.assertEqual(source.name, name)
    long_tail = gin.query_parameter("Task.long_tail").scoped_configurable_fn()
    self.assertEqual(long_tail.seed, 0)
    counts = np.bincount(source.train_labels[long_tail.select(source.train_labels, classes)])
    self.assertEqual(counts.tolist(), their_counts(len(source.train_labels), classes, 0.2))


if __name__ == "__main__":
  tf.test.main()
