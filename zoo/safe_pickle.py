"""Pickles read without running what they name: one allow-list of globals a format.

A pickle is a program: each global it names (GLOBAL, STACK_GLOBAL, INST, OBJ and EXT
opcodes all go through `Unpickler.find_class`) is imported and may then be called, so
a file that names `os.system` runs a command as it loads. This module's `Unpickler`
resolves a global only through an `AllowList` (the Python documentation's "Restricting
Globals", docs.python.org/3/library/pickle.html): a name missing from it is refused,
one `PickleError` line, at the opcode that names it, before anything is called. The
names resolve to this module's own stand-ins where the real ones would import or run
more than the format needs (torch's tensor rebuild and storage classes), so reading
needs neither torch nor trust.

- `TORCH_STATE_DICT`: a PyTorch state dict of the legacy (non-zip) format,
  `read_torch_legacy(path)` -> {name: NumPy array}. The file is five pickles and raw
  bytes (torch/serialization.py, `_legacy_save` and `_legacy_load`): the magic number
  0x1950a86a20f9469cfc6c, the protocol version 1001, the system information (byte
  order, type sizes), the state dict (a `collections.OrderedDict` of
  `torch._utils._rebuild_tensor_v2(storage, offset, size, stride, ...)`, each storage
  a persistent id ('storage', torch.<Type>Storage, key, location, elements[, view]),
  and the list of storage keys; then each storage in that order as an 8-byte
  little-endian element count and its bytes. The first three and the last pickle take
  no global at all.
- `NUMPY_ARRAYS`: NumPy arrays in plain containers (`numpy.core.multiarray
  ._reconstruct`, `numpy.ndarray`, `numpy.dtype`), as the CIFAR python batches hold
  them (written by Python 2: read with encoding="latin1"): `loads(data, NUMPY_ARRAYS,
  encoding="latin1")`.
"""

import collections
import dataclasses
import io
import os
import pickle
from typing import Mapping

import numpy as np

# torch/serialization.py: MAGIC_NUMBER, PROTOCOL_VERSION.
TORCH_MAGIC = 0x1950a86a20f9469cfc6c
TORCH_PROTOCOL = 1001
ZIP_MAGIC = b"PK\x03\x04"  # torch.save's default format since torch 1.6


class PickleError(ValueError):
  """A pickle refused (a global outside its allow-list) or unreadable: one line."""


@dataclasses.dataclass(frozen=True)
class AllowList:
  """The globals one pickle format may name, each resolved to what it stands for.

  what: the format, for messages ("a PyTorch state dict").
  names: {(module, name): the object the unpickler hands back for it}.
  summary: the names in a few words, for messages (default: all of them).
  """
  what: str
  names: Mapping[tuple, object]
  summary: str = ""

  def listed(self):
    return self.summary or ", ".join(sorted(f"{m}.{n}" for m, n in self.names)) or (
        "no global")


class _Sealed:
  """No pickle BUILD onto it: the stand-ins are shared by every read, so a file that
  set their attributes (BUILD's state) would change how later files load."""
  __slots__ = ()

  def __setstate__(self, state):
    raise PickleError(f"the pickle sets the state of {type(self).__name__.strip('_')}, "
                      "which no file of its format does; refused")


class _StorageType(_Sealed):
  """A `torch.<Type>Storage` class named in a persistent id: its element type."""
  __slots__ = ("name", "dtype")

  def __init__(self, name, dtype):
    self.name, self.dtype = name, np.dtype(dtype)


class _Storage(_Sealed):
  """One storage of a legacy torch file: its key, type, size and (once read) values."""
  __slots__ = ("key", "type", "elements", "array")

  def __init__(self, key, storage_type, elements):
    self.key, self.type, self.elements = key, storage_type, elements
    self.array = None


class _Tensor(_Sealed):
  """`torch._utils._rebuild_tensor_v2`'s arguments: a strided view of a storage."""
  __slots__ = ("storage", "offset", "shape", "stride")

  def __init__(self, storage, offset, shape, stride):
    self.storage, self.offset, self.shape, self.stride = storage, offset, shape, stride


class _RebuildTensorV2(_Sealed):
  """Stands for torch._utils._rebuild_tensor_v2: records the view, builds nothing."""

  def __call__(self, storage, storage_offset, size, stride, requires_grad=False,
               backward_hooks=None, metadata=None):
    del requires_grad, backward_hooks, metadata  # a state dict's tensors are plain
    if not isinstance(storage, _Storage):
      raise PickleError("_rebuild_tensor_v2 got no storage; the file is not a PyTorch "
                        "state dict")
    return _Tensor(storage, int(storage_offset), tuple(int(s) for s in size),
                   tuple(int(s) for s in stride))


# torch's legacy storage classes (torch/storage.py) and their element types.
_TORCH_STORAGES = {
    "DoubleStorage": np.float64, "FloatStorage": np.float32, "HalfStorage": np.float16,
    "LongStorage": np.int64, "IntStorage": np.int32, "ShortStorage": np.int16,
    "CharStorage": np.int8, "ByteStorage": np.uint8, "BoolStorage": np.bool_,
}

NOTHING = AllowList("plain data (no global)", {})
TORCH_STATE_DICT = AllowList("a PyTorch state dict", {
    ("collections", "OrderedDict"): collections.OrderedDict,
    ("torch._utils", "_rebuild_tensor_v2"): _RebuildTensorV2(),
    **{("torch", name): _StorageType(name, dtype)
       for name, dtype in _TORCH_STORAGES.items()},
}, "collections.OrderedDict, torch._utils._rebuild_tensor_v2 and torch's storage types")


def _numpy_reconstruct():
  core = getattr(np, "_core", None) or np.core  # NumPy 2 moved numpy.core to _core
  return core.multiarray._reconstruct


NUMPY_ARRAYS = AllowList("NumPy arrays", {
    ("numpy.core.multiarray", "_reconstruct"): _numpy_reconstruct(),  # as NumPy 1 wrote
    ("numpy._core.multiarray", "_reconstruct"): _numpy_reconstruct(),  # as NumPy 2 does
    ("numpy", "ndarray"): np.ndarray,
    ("numpy", "dtype"): np.dtype,
})


class Unpickler(pickle.Unpickler):
  """An unpickler that resolves globals through `allow` alone; `persistent` (or None:
  refused) answers persistent ids. `where` names the file in messages."""

  def __init__(self, file, allow, where="pickle", persistent=None, encoding="ASCII"):
    super().__init__(file, encoding=encoding)
    self._allow, self._where, self._persistent = allow, where, persistent

  def find_class(self, module, name):
    try:
      return self._allow.names[(module, name)]
    except (KeyError, TypeError):
      raise PickleError(
          f"{self._where} names the global {module}.{name}, which {self._allow.what} "
          f"never holds; refused before anything ran (it admits only "
          f"{self._allow.listed()}): the file is not what it claims or was tampered "
          "with; get it again from its source") from None

  def persistent_load(self, pid):
    if self._persistent is None:
      raise PickleError(f"{self._where} holds a persistent id, which "
                        f"{self._allow.what} never does; refused")
    return self._persistent(pid)


def load(file, allow, where="pickle", persistent=None, encoding="ASCII"):
  """One pickle from the binary `file`, its globals resolved through `allow`."""
  try:
    return Unpickler(file, allow, where, persistent, encoding).load()
  except PickleError:
    raise
  except (pickle.UnpicklingError, EOFError, ValueError, TypeError, KeyError,
          IndexError, AttributeError, UnicodeDecodeError, OverflowError,
          MemoryError) as e:
    raise PickleError(f"{where} is not a readable {allow.what} pickle "
                      f"({type(e).__name__}: {str(e)[:120]}); it is truncated or "
                      "another format: get it again from its source") from None


def loads(data, allow, where="pickle", encoding="ASCII"):
  """One pickle from the bytes `data`, its globals resolved through `allow`."""
  return load(io.BytesIO(data), allow, where, encoding=encoding)


def _torch_persistent(storages, where):
  """persistent_load for a legacy state dict: ('storage', type, key, location,
  elements[, view metadata None]) -> the storage of `key`, made once."""

  def persistent(pid):
    if (not isinstance(pid, tuple) or len(pid) not in (5, 6) or pid[0] != "storage"
        or not isinstance(pid[1], _StorageType) or not isinstance(pid[2], str)
        or isinstance(pid[4], bool) or not isinstance(pid[4], int) or pid[4] < 0):
      raise PickleError(f"{where} has the persistent id {str(pid)[:80]}, not a legacy "
                        "torch storage ('storage', type, key, location, elements)")
    if len(pid) == 6 and pid[5] is not None:
      raise PickleError(f"{where} holds a storage view ({pid[5]!r}), which "
                        "torch.save has not written since torch 0.4; save the state "
                        "dict again")
    _, storage_type, key, _, elements = pid[:5]
    if key not in storages:
      storages[key] = _Storage(key, storage_type, elements)
    elif (storages[key].type, storages[key].elements) != (storage_type, elements):
      raise PickleError(f"{where}: storage {key} is named with two types or sizes")
    return storages[key]
  return persistent


def _read_exact(f, count, where, what):
  data = f.read(count)
  if len(data) != count:
    raise PickleError(f"{where} is truncated: it ends inside {what} ({len(data)} of "
                      f"{count} bytes); get it again from its source")
  return data


def _materialise(name, tensor, where):
  """The tensor's values as a C-ordered NumPy array, its view checked to lie inside
  its storage."""
  if not isinstance(tensor, _Tensor):
    raise PickleError(f"{where}: {name!r} is a {type(tensor).__name__}, not a tensor; "
                      "the file is not a plain PyTorch state dict")
  storage = tensor.storage
  if len(tensor.shape) != len(tensor.stride) or min(tensor.shape + tensor.stride + (
      tensor.offset,), default=0) < 0:
    raise PickleError(f"{where}: tensor {name!r} has size {tensor.shape} and stride "
                      f"{tensor.stride}, not a view of its storage")
  if 0 in tensor.shape:
    return np.zeros(tensor.shape, storage.type.dtype)
  last = tensor.offset + sum((n - 1) * s for n, s in zip(tensor.shape, tensor.stride))
  if last >= storage.elements:
    raise PickleError(f"{where}: tensor {name!r} reaches element {last} of a storage "
                      f"of {storage.elements}; the file is damaged")
  size = int(np.prod(tensor.shape, dtype=object))
  if size > storage.elements:  # overlapping strides: no state dict's, a memory bomb's
    raise PickleError(f"{where}: tensor {name!r} has {size} elements on a storage of "
                      f"{storage.elements}; the file is damaged")
  item = storage.type.dtype.itemsize
  view = np.lib.stride_tricks.as_strided(
      storage.array[tensor.offset:], tensor.shape, tuple(s * item for s in tensor.stride),
      writeable=False)
  return np.array(view, order="C")  # a copy (ascontiguousarray makes 0-d 1-d)


def read_torch_legacy(path):
  """{name: NumPy array} of the legacy-format PyTorch state dict at `path`, in the
  file's order; any global outside `TORCH_STATE_DICT` is refused in one line."""
  where = os.fspath(path)
  with open(path, "rb") as f:
    head = f.read(4)
    if head == ZIP_MAGIC:
      raise PickleError(f"{where} is a zip-format PyTorch file (torch.save since torch "
                        "1.6), not the legacy format read here; convert it to "
                        "safetensors, or save it with _use_new_zipfile_serialization="
                        "False")
    f.seek(0)
    magic = load(f, NOTHING, where)
    if magic != TORCH_MAGIC:
      raise PickleError(f"{where} does not start with PyTorch's magic number; it is "
                        "not a legacy torch.save file")
    protocol = load(f, NOTHING, where)
    if protocol != TORCH_PROTOCOL:
      raise PickleError(f"{where} is PyTorch protocol {protocol!r}, not "
                        f"{TORCH_PROTOCOL}; save the state dict again")
    info = load(f, NOTHING, where)
    if not isinstance(info, dict) or info.get("little_endian") is not True:
      raise PickleError(f"{where} was not saved little-endian ({str(info)[:80]}); "
                        "save it again on a little-endian machine")
    storages = {}
    state = load(f, TORCH_STATE_DICT, where, _torch_persistent(storages, where))
    keys = load(f, NOTHING, where)
    if (not isinstance(keys, list) or not all(isinstance(k, str) for k in keys)
        or len(set(keys)) != len(keys) or set(keys) != set(storages)):
      raise PickleError(f"{where}: its storage list does not match the storages its "
                        "tensors name; the file is damaged")
    for key in keys:
      storage = storages[key]
      count = int.from_bytes(_read_exact(f, 8, where, f"storage {key}'s size"),
                             "little")
      if count != storage.elements:
        raise PickleError(f"{where}: storage {key} holds {count} elements, but its "
                          f"tensors name {storage.elements}; the file is damaged")
      data = _read_exact(f, count * storage.type.dtype.itemsize, where,
                         f"storage {key}")
      storage.array = np.frombuffer(data, storage.type.dtype.newbyteorder("<"))
    extra = len(f.read())
    if extra:
      raise PickleError(f"{where} has {extra} bytes after its last storage; the file is "
                        "damaged or not one state dict")
  if not isinstance(state, dict) or not all(isinstance(k, str) for k in state):
    raise PickleError(f"{where} holds a {type(state).__name__}, not a state dict of "
                      "named tensors")
  return collections.OrderedDict(
      (name, _materialise(name, tensor, where)) for name, tensor in state.items())
