"""Image-folder trees, made by the test: decoding, splits and the errors users meet."""

import os
import re
import signal

from absl.testing import parameterized
import numpy as np
import tensorflow as tf

from recipes.data import image_folder
from recipes.errors import ConfigError


def write_tree(root, counts, size=12):
  """root/<class>/<i>.png with each class's images filled with its class index."""
  for c, n in enumerate(counts):
    os.makedirs(os.path.join(root, f"class_{c}"), exist_ok=True)
    for i in range(n):
      image = np.full([size, size + i % 3, 3], 10 * c, np.uint8)
      ext = "png" if i % 2 else "jpg"
      data = tf.io.encode_png(image) if ext == "png" else tf.io.encode_jpeg(image,
                                                                             quality=100)
      tf.io.write_file(os.path.join(root, f"class_{c}", f"{i}.{ext}"), data)


def noise_jpeg(seed=0, size=16):
  pixels = np.random.default_rng(seed).integers(0, 256, [size, size, 3], dtype=np.uint8)
  return tf.io.encode_jpeg(pixels, quality=90).numpy()


def scan_garbage_jpeg():
  """A JPEG whose entropy-coded data has its middle third overwritten (no 0xFF bytes,
  so no false markers); headers and tables intact."""
  data = noise_jpeg(size=64)
  sos = data.find(b"\xff\xda")
  start, end = sos + 2 + int.from_bytes(data[sos + 2:sos + 4], "big"), len(data) - 2
  a, b = start + (end - start) // 3, start + 2 * (end - start) // 3
  garbage = np.random.default_rng(1).integers(0, 255, [b - a], dtype=np.uint8).tobytes()
  return data[:a] + garbage + data[b:]


def bad_file(kind):
  """(file name, bytes) of a bad file of `kind`."""
  jpeg = noise_jpeg()
  if kind == "text":
    return "notes.jpg", b"these are my notes\n"
  if kind == "truncated_jpeg":
    return "cut.jpg", jpeg[:len(jpeg) // 2]
  if kind == "garbage_jpeg":  # the middle half overwritten, the SOS marker with it
    jpeg = noise_jpeg(size=32)
    a, b = len(jpeg) // 4, 3 * len(jpeg) // 4
    assert a < jpeg.find(b"\xff\xda") < b
    garbage = np.random.default_rng(2).integers(0, 256, [b - a], dtype=np.uint8)
    return "garbled.jpg", jpeg[:a] + garbage.tobytes() + jpeg[b:]
  if kind == "empty":
    return "empty.jpg", b""
  if kind == "truncated_png":
    png = tf.io.encode_png(np.full([16, 16, 3], 7, np.uint8)).numpy()
    return "cut.png", png[:len(png) // 2]
  raise ValueError(kind)


BAD_KINDS = ("text", "truncated_jpeg", "garbage_jpeg", "empty", "truncated_png")


def write_bad(root, class_name, kind):
  """Writes a bad file of `kind` into root/class_name; returns its path."""
  name, data = bad_file(kind)
  path = os.path.join(root, class_name, f"{kind}_{name}")
  with open(path, "wb") as f:
    f.write(data)
  return path


class ImageFolderTest(tf.test.TestCase, parameterized.TestCase):

  def test_holdout_split_and_decoding(self):
    root = os.path.join(self.get_temp_dir(), "tree")
    write_tree(root, [6, 5, 4])
    source = image_folder.image_folder(root=root, test_per_class=2)
    self.assertEqual(source.class_names, ["class_0", "class_1", "class_2"])
    self.assertEqual(np.bincount(source.test_labels).tolist(), [2, 2, 2])
    self.assertEqual(np.bincount(source.train_labels).tolist(), [4, 3, 2])
    for image, label in source.make_dataset("train", np.arange(len(source.train_labels))):
      self.assertEqual(image.dtype, tf.uint8)
      self.assertEqual(image.shape[-1], 3)
      self.assertAllClose(np.mean(image), 10 * int(label), atol=1.0)

  def test_separate_test_tree(self):
    root = os.path.join(self.get_temp_dir(), "train")
    test_root = os.path.join(self.get_temp_dir(), "test")
    write_tree(root, [3, 3])
    write_tree(test_root, [1, 2])
    source = image_folder.image_folder(root=root, test_root=test_root)
    self.assertEqual(source.test_labels.tolist(), [0, 1, 1])

  def test_errors(self):
    tmp = self.get_temp_dir()
    with self.assertRaisesRegex(ConfigError, "image folder '.*missing' does not exist"):
      image_folder.image_folder(root=os.path.join(tmp, "missing"), test_per_class=1)
    empty = os.path.join(tmp, "empty")
    os.makedirs(os.path.join(empty, "a"))
    os.makedirs(os.path.join(empty, "b"))
    with self.assertRaisesRegex(ConfigError, "holds no images"):
      image_folder.image_folder(root=empty, test_per_class=1)
    one = os.path.join(tmp, "one")
    write_tree(one, [4])
    with self.assertRaisesRegex(ConfigError, "needs at least 2"):
      image_folder.image_folder(root=one, test_per_class=1)
    two = os.path.join(tmp, "two")
    write_tree(two, [2, 2])
    with self.assertRaisesRegex(ConfigError, "needs a test split"):
      image_folder.image_folder(root=two)
    with self.assertRaisesRegex(ConfigError, "too few to hold out 2"):
      image_folder.image_folder(root=two, test_per_class=2)

  def test_what_is_not_a_regular_file_is_left_out(self):
    """A FIFO named x.jpg (opening it would wait forever) and a directory named y.png
    are not images: the scan leaves them out rather than hang or fail (issue 56)."""
    root = os.path.join(self.get_temp_dir(), "special")
    write_tree(root, [3, 3])
    os.mkfifo(os.path.join(root, "class_0", "x.jpg"))
    os.makedirs(os.path.join(root, "class_1", "y.png"))
    signal.signal(signal.SIGALRM, lambda *_: self.fail("the scan hung on the FIFO"))
    signal.alarm(30)
    try:
      _, paths, labels, skipped = image_folder.scan(root)
    finally:
      signal.alarm(0)
    self.assertLen(paths, 6)
    self.assertFalse([p for p in paths if p.endswith(("x.jpg", "y.png"))])
    self.assertEqual(skipped, [])

  def test_a_link_out_of_the_root_is_read_only_when_allowed(self):
    """Reads stay inside image_folder.root: a symbolic link to an image elsewhere stops
    the scan in one line naming the binding that allows it (issue 56)."""
    tmp = self.get_temp_dir()
    root, elsewhere = os.path.join(tmp, "linked"), os.path.join(tmp, "elsewhere")
    write_tree(root, [2, 2])
    write_tree(elsewhere, [1])
    outside = os.path.join(elsewhere, "class_0", "0.jpg")
    os.symlink(outside, os.path.join(root, "class_1", "9.jpg"))
    inside = os.path.join(root, "class_0", "0.jpg")
    os.symlink(inside, os.path.join(root, "class_1", "8.jpg"))  # inside: fine
    with self.assertRaisesRegex(
        ConfigError, r"^image file '.*/linked/class_1/9.jpg' is a link to '.*/elsewhere/"
        r"class_0/0.jpg', outside image_folder.root '.*/linked'; move the image into the "
        r"tree, or bind image_folder.allow_outside_root = True to read it there"):
      image_folder.image_folder(root=root, test_per_class=1)
    source = image_folder.image_folder(root=root, test_per_class=1,
                                       allow_outside_root=True)
    self.assertLen(source.train_labels, 4)  # 6 files (2 of them links), 1 a class held out

  def test_empty_class_directory_is_named(self):
    root = os.path.join(self.get_temp_dir(), "tree")
    write_tree(root, [3, 3])
    os.makedirs(os.path.join(root, "class_2"))
    with open(os.path.join(root, "class_2", "readme.txt"), "w") as f:
      f.write("not an image")
    with self.assertRaisesRegex(
        ConfigError, "^image folder class directory '.*/tree/class_2' holds no images "
        r"\(.jpg, .*\); add images or remove the directory"):
      image_folder.image_folder(root=root, test_per_class=1)

  @parameterized.parameters("text", "empty")  # a directory named .jpg: left out (below)
  def test_header_check_names_the_file(self, kind):
    root = os.path.join(self.get_temp_dir(), f"header_{kind}")
    write_tree(root, [3, 3])
    path = write_bad(root, "class_1", kind)
    with self.assertRaises(ConfigError) as raised:
      image_folder.image_folder(root=root, test_per_class=1)
    message = str(raised.exception).split("\n  In call to configurable")[0]  # gin's note
    self.assertNotIn("\n", message)
    self.assertRegex(message, f"^image file '{re.escape(path)}' .*; remove or replace it, "
                     "or bind image_folder.on_bad_file = 'skip'$")
    self.assertIn({"text": "(it starts with text 'these are my not')",
                   "empty": "is empty (0 bytes)"}[kind], message)

  def test_header_check_counts_further_bad_files(self):
    root = os.path.join(self.get_temp_dir(), "many")
    write_tree(root, [3, 3])
    first = write_bad(root, "class_0", "text")
    write_bad(root, "class_1", "empty")
    with self.assertRaisesRegex(ConfigError, f"^image file '{re.escape(first)}' is not a "
                                "JPEG, PNG, GIF or BMP image .*, and 1 more bad files; "):
      image_folder.image_folder(root=root, test_per_class=1)

  @parameterized.parameters("truncated_jpeg", "garbage_jpeg", "truncated_png")
  def test_find_bad_files_names_what_the_header_check_passes(self, kind):
    root = os.path.join(self.get_temp_dir(), f"decode_{kind}")
    write_tree(root, [4, 4])
    path = write_bad(root, "class_0", kind)
    source = image_folder.image_folder(root=root, test_per_class=1)  # on_bad_file='error'
    self.assertEqual(source.skipped_files, ())
    found = {split: source.find_bad_files(split, None) for split in ("train", "test")}
    self.assertEqual(found["train"] + found["test"], [path])
    # With indices, only the example holding the bad file names it.
    split = "train" if found["train"] else "test"
    labels = source.train_labels if split == "train" else source.test_labels
    hits = [i for i in range(len(labels)) if source.find_bad_files(split, np.array([i]))]
    self.assertLen(hits, 1)

  def test_skip_drops_every_bad_kind_and_lists_it(self):
    root = os.path.join(self.get_temp_dir(), "skip_train")
    test_root = os.path.join(self.get_temp_dir(), "skip_test")
    write_tree(root, [3, 3])
    write_tree(test_root, [2, 2])
    bad = [write_bad(root, f"class_{i % 2}", kind) for i, kind in enumerate(BAD_KINDS)]
    bad.append(write_bad(test_root, "class_1", "truncated_jpeg"))
    with self.assertLogs(level="WARNING") as logs:
      source = image_folder.image_folder(root=root, test_root=test_root,
                                         on_bad_file="skip")
    self.assertEqual(sorted(source.skipped_files), sorted(bad))
    self.assertIn("skipped 6 bad files (of 16)", "\n".join(logs.output))
    self.assertEqual(np.bincount(source.train_labels).tolist(), [3, 3])
    self.assertEqual(np.bincount(source.test_labels).tolist(), [2, 2])
    for split, count in (("train", 6), ("test", 4)):
      self.assertLen(list(source.make_dataset(split)), count)  # decodes without error
      self.assertEqual(source.find_bad_files(split, None), [])

  def test_skip_that_empties_a_class_names_it(self):
    root = os.path.join(self.get_temp_dir(), "emptied")
    write_tree(root, [3, 0])
    write_bad(root, "class_1", "text")
    write_bad(root, "class_1", "truncated_jpeg")
    with self.assertRaisesRegex(
        ConfigError, "^image folder class directory '.*/emptied/class_1' holds no images "
        r"that decode \(2 bad files skipped\); add images or remove the directory"):
      image_folder.image_folder(root=root, test_per_class=1, on_bad_file="skip")

  def test_on_bad_file_must_be_error_or_skip(self):
    with self.assertRaisesRegex(ConfigError, "^image_folder.on_bad_file='ignore' is not one "
                                "of 'error', 'skip'; "):
      image_folder.image_folder(root="/unused", test_per_class=1, on_bad_file="ignore")

  def test_undecodable(self):
    tmp = self.get_temp_dir()
    good = os.path.join(tmp, "good.jpg")
    with open(good, "wb") as f:
      f.write(noise_jpeg())
    paths = [good]
    for kind in BAD_KINDS:
      name, data = bad_file(kind)
      paths.append(os.path.join(tmp, f"undecodable_{kind}_{name}"))
      with open(paths[-1], "wb") as f:
        f.write(data)
    paths.append(os.path.join(tmp, "missing.jpg"))
    self.assertEqual(image_folder.undecodable(paths[::-1]), sorted(paths[1:]))
    self.assertEqual(image_folder.undecodable([]), [])

  def test_webp_named_jpg_passes_the_header_check(self):
    webp = b"RIFF\x24\x00\x00\x00WEBPVP8 "
    path = os.path.join(self.get_temp_dir(), "photo.jpg")
    with open(path, "wb") as f:
      f.write(webp)
    self.assertIsNone(image_folder.header_problem(path))

  def test_garbage_in_jpeg_scan_data_decodes(self):
    """Pins a known limit: libjpeg decodes corrupt entropy-coded data (only warning), so
    neither check catches it; the image is merely garbled."""
    path = os.path.join(self.get_temp_dir(), "garbled_scan.jpg")
    with open(path, "wb") as f:
      f.write(scan_garbage_jpeg())
    self.assertIsNone(image_folder.header_problem(path))
    self.assertEqual(image_folder.undecodable([path]), [])


if __name__ == "__main__":
  tf.test.main()
