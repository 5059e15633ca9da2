"""zoo/safe_pickle.py reads what its formats hold and runs nothing a pickle names.

The payloads call os.system, builtins.eval and subprocess.Popen to create a marker
file: each must be refused with the exact one-line error, at the opcode naming the
global, and the marker must not exist afterwards; an allow-list loosened to admit one
of them fails both checks (the call runs and returns). Legacy torch files are written
opcode by opcode (tests/zoo/pickles.py; //tests/zoo:efficientnet_lite_torch_test
checks torch reads them alike).
"""

import collections
import os
import pickle
import subprocess

from absl.testing import absltest
from absl.testing import parameterized
import numpy as np

from tests.zoo import pickles
from zoo import safe_pickle

REFUSED = ("{where} names the global {module}.{name}, which {what} never holds; refused "
           "before anything ran (it admits only {admits}): the file is not what it "
           "claims or was tampered with; get it again from its source")
TORCH_ADMITS = ("collections.OrderedDict, torch._utils._rebuild_tensor_v2 and torch's "
                "storage types")
NUMPY_ADMITS = ("numpy._core.multiarray._reconstruct, "
                "numpy.core.multiarray._reconstruct, numpy.dtype, numpy.ndarray")


def attacks(marker):
  """(module, name, args) of calls that create `marker`."""
  return (("os", "system", (f"touch {marker}",)),
          ("builtins", "eval", (f"open({marker!r}, 'w').close()",)),
          ("subprocess", "Popen", (["touch", marker],)))


class RefusedTest(parameterized.TestCase):

  def setUp(self):
    super().setUp()
    self.folder = self.create_tempdir().full_path
    self.marker = os.path.join(self.folder, "ran")

  def assertRefused(self, read, where, module, name, what, admits):
    with self.assertRaises(safe_pickle.PickleError) as caught:
      read()
    self.assertEqual(str(caught.exception), REFUSED.format(
        where=where, module=module, name=name, what=what, admits=admits))
    self.assertFalse(os.path.exists(self.marker), "the payload ran")

  @parameterized.parameters(0, 1, 2)
  def test_payload_pickles_are_refused_by_every_allow_list(self, attack):
    module, name, args = attacks(self.marker)[attack]
    data = pickles.payload(module, name, *args)
    for allow, admits in ((safe_pickle.TORCH_STATE_DICT, TORCH_ADMITS),
                          (safe_pickle.NUMPY_ARRAYS, NUMPY_ADMITS),
                          (safe_pickle.NOTHING, "no global")):
      self.assertRefused(lambda a=allow: safe_pickle.loads(data, a, "x.pkl"), "x.pkl",
                         module, name, allow.what, admits)
    if attack == 2:  # had it run, Popen would have returned before the marker came
      subprocess.run(["sync"], check=False)
      self.assertFalse(os.path.exists(self.marker))

  def test_pickle_module_payload_is_refused(self):
    # What pickle.dumps writes for os.system on Linux: its module is posix.
    marker = self.marker

    class Attack:
      def __reduce__(self):
        return os.system, (f"touch {marker}",)

    data = pickle.dumps(Attack(), protocol=2)
    self.assertRefused(lambda: safe_pickle.loads(data, safe_pickle.TORCH_STATE_DICT),
                       "pickle", os.system.__module__, "system", "a PyTorch state dict",
                       TORCH_ADMITS)

  @parameterized.parameters(0, 1, 2)
  def test_payload_inside_a_torch_file_is_refused(self, attack):
    module, name, args = attacks(self.marker)[attack]
    # A real tensor, then the payload as the second entry of the state dict.
    state = collections.OrderedDict(
        w=pickles.tensor("FloatStorage", "0", 4, 0, (4,), (1,)),
        b=pickles.Call(pickles.Global(module, name), args))
    path = os.path.join(self.folder, "attack.pth")
    with open(path, "wb") as f:
      f.write(pickles.torch_legacy({"w": np.zeros(4, np.float32)},
                                   state=pickles.emit(state)))
    self.assertRefused(lambda: safe_pickle.read_torch_legacy(path), path, module, name,
                       "a PyTorch state dict", TORCH_ADMITS)

  def test_payload_in_the_magic_number_is_refused(self):
    module, name, args = attacks(self.marker)[0]
    path = os.path.join(self.folder, "attack.pth")
    with open(path, "wb") as f:
      f.write(pickles.payload(module, name, *args)
              + pickles.torch_legacy({"w": np.zeros(4, np.float32)}))
    self.assertRefused(lambda: safe_pickle.read_torch_legacy(path), path, module, name,
                       "plain data (no global)", "no global")

  def test_torch_globals_outside_a_state_dict_are_refused(self):
    # torch._utils._rebuild_parameter is a real torch global, but not a state dict's.
    data = pickles.payload("torch._utils", "_rebuild_parameter", 1, False)
    self.assertRefused(lambda: safe_pickle.loads(data, safe_pickle.TORCH_STATE_DICT),
                       "pickle", "torch._utils", "_rebuild_parameter",
                       "a PyTorch state dict", TORCH_ADMITS)

  def test_no_build_onto_the_shared_stand_ins(self):
    # BUILD (setting an object's state) onto an admitted global would change how later
    # files load: refused, and the next file loads as before.
    data = pickles.emit(pickles.Build(pickles.Global("torch", "FloatStorage"),
                                      {"dtype": "int8"}))
    with self.assertRaisesRegex(safe_pickle.PickleError, "sets the state of "
                                "StorageType, which no file of its format does"):
      safe_pickle.loads(data, safe_pickle.TORCH_STATE_DICT)
    data = pickles.emit(pickles.Build(pickles.Global("torch._utils",
                                                     "_rebuild_tensor_v2"),
                                      (None, {"__call__": None})))
    with self.assertRaisesRegex(safe_pickle.PickleError, "RebuildTensorV2"):
      safe_pickle.loads(data, safe_pickle.TORCH_STATE_DICT)
    path = os.path.join(self.folder, "ok.pth")
    with open(path, "wb") as f:
      f.write(pickles.torch_legacy({"w": np.arange(3, dtype=np.float32)}))
    self.assertEqual(safe_pickle.read_torch_legacy(path)["w"].dtype, np.float32)


class TorchLegacyTest(absltest.TestCase):

  def write(self, data):
    path = os.path.join(self.create_tempdir().full_path, "w.pth")
    with open(path, "wb") as f:
      f.write(data)
    return path

  def test_reads_names_shapes_dtypes_and_values(self):
    rng = np.random.default_rng(0)
    tensors = collections.OrderedDict(
        conv=rng.normal(size=(4, 3, 3, 3)).astype(np.float32),
        bias=rng.normal(size=(4,)).astype(np.float32),
        count=np.array(7, np.int64),  # a 0-d num_batches_tracked
        half=rng.normal(size=(2, 5)).astype(np.float16),
        empty=np.zeros((0, 3), np.float32))
    got = safe_pickle.read_torch_legacy(self.write(pickles.torch_legacy(tensors)))
    self.assertEqual(list(got), list(tensors))
    for name, array in tensors.items():
      self.assertEqual(got[name].shape, array.shape, name)
      self.assertEqual(got[name].dtype, array.dtype, name)
      np.testing.assert_array_equal(got[name], array)
      self.assertTrue(got[name].flags["C_CONTIGUOUS"] and got[name].flags["WRITEABLE"])

  def test_views_of_one_storage(self):
    # Two tensors of one storage: a transposed view and an offset slice.
    storage = np.arange(12, dtype=np.float32)
    state = collections.OrderedDict(
        t=pickles.tensor("FloatStorage", "s", 12, 0, (4, 3), (1, 4)),
        tail=pickles.tensor("FloatStorage", "s", 12, 8, (2, 2), (2, 1)))
    data = b"".join([pickles.emit(pickles.MAGIC), pickles.emit(1001),
                     pickles.emit({"little_endian": True}), pickles.emit(state),
                     pickles.emit(["s"]), (12).to_bytes(8, "little"), storage.tobytes()])
    got = safe_pickle.read_torch_legacy(self.write(data))
    np.testing.assert_array_equal(got["t"], storage.reshape(3, 4).T)
    np.testing.assert_array_equal(got["tail"], [[8, 9], [10, 11]])

  def test_damaged_files_are_one_line_each(self):
    tensors = {"w": np.arange(6, dtype=np.float32)}
    good = pickles.torch_legacy(tensors)
    view_past_end = collections.OrderedDict(
        w=pickles.tensor("FloatStorage", "1000", 6, 4, (3,), (1,)))
    stride_zero = collections.OrderedDict(  # 4 GB from 24 bytes
        w=pickles.tensor("FloatStorage", "1000", 6, 0, (10**9,), (0,)))
    cases = {
        "truncated: it ends inside storage 1000": good[:-3],
        "has 2 bytes after its last storage": good + b"\0\0",
        "is a zip-format PyTorch file": b"PK\x03\x04" + good,
        "does not start with PyTorch's magic number": pickles.emit(5) + good,
        "was not saved little-endian": pickles.torch_legacy(
            tensors, sys_info={"little_endian": False}),
        "reaches element 6 of a storage of 6": pickles.torch_legacy(
            tensors, state=pickles.emit(view_past_end)),
        "has 1000000000 elements on a storage of 6": pickles.torch_legacy(
            tensors, state=pickles.emit(stride_zero)),
        "is not a readable plain data \\(no global\\) pickle": b"\x80\x02garbage",
    }
    for message, data in cases.items():
      with self.assertRaisesRegex(safe_pickle.PickleError, message) as caught:
        safe_pickle.read_torch_legacy(self.write(data))
      self.assertNotIn("\n", str(caught.exception))


class NumpyArraysTest(absltest.TestCase):

  def test_cifar_style_python2_batches(self):
    # As the CIFAR python batches: a Python 2 pickle of a dict of str keys, a uint8
    # array and a list of labels, read with encoding="latin1".
    images = np.random.default_rng(1).integers(0, 256, (3, 3072), dtype=np.uint8)
    data = pickles.numpy_py2({"data": images, "labels": [6, 9, 9],
                              "batch_label": pickles.Py2Str(b"training batch 1 of 5")})
    got = safe_pickle.loads(data, safe_pickle.NUMPY_ARRAYS, encoding="latin1")
    np.testing.assert_array_equal(got["data"], images)
    self.assertEqual(got["data"].dtype, np.uint8)
    self.assertEqual(got["labels"], [6, 9, 9])
    self.assertEqual(got["batch_label"], "training batch 1 of 5")
    self.assertEqual(pickle.loads(data, encoding="latin1")["labels"], [6, 9, 9])

  def test_numpy2_pickles(self):
    value = {"x": np.linspace(0, 1, 6, dtype=np.float32).reshape(2, 3)}
    for protocol in (3, 4):  # 5 pickles arrays out of band: another reduction
      got = safe_pickle.loads(pickle.dumps(value, protocol=protocol),
                              safe_pickle.NUMPY_ARRAYS)
      np.testing.assert_array_equal(got["x"], value["x"])
    # Protocol 2 from Python 3 pickles bytes through _codecs.encode: not admitted.
    with self.assertRaisesRegex(safe_pickle.PickleError, "names the global "
                                "_codecs.encode, which NumPy arrays never holds"):
      safe_pickle.loads(pickle.dumps(value, protocol=2), safe_pickle.NUMPY_ARRAYS)

  def test_arrays_are_not_a_state_dict(self):
    data = pickles.numpy_py2({"data": np.zeros(3, np.uint8)})
    with self.assertRaisesRegex(safe_pickle.PickleError, "names the global numpy.core."
                                "multiarray._reconstruct, which a PyTorch state dict"):
      safe_pickle.loads(data, safe_pickle.TORCH_STATE_DICT, encoding="latin1")


if __name__ == "__main__":
  absltest.main()
