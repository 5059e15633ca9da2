"""Pickles written opcode by opcode, without torch: legacy PyTorch state dicts, Python
2 style NumPy pickles (as the CIFAR python batches), and payloads that name os.system
and the like, for tests of zoo/safe_pickle.py.

`emit(value)` writes protocol 2 opcodes (pickletools' names) for plain values (None,
bool, int, str, tuple, list, dict), `Py2Str` (a Python 2 str: SHORT_BINSTRING or
BINSTRING), `Global(module, name)` (GLOBAL), `Call(callable, args)` (REDUCE),
`Build(value, state)` (BUILD), `OrderedDict` items (REDUCE of collections.OrderedDict,
then SETITEMS) and `Persistent(pid)` (BINPERSID). `torch_legacy(tensors)` is the file
torch.save(state_dict, f, _use_new_zipfile_serialization=False) writes
(torch/serialization.py `_legacy_save`): magic number, protocol 1001, system
information, the state dict, its storage keys, then each storage as an 8-byte
element count and its bytes; //tests/zoo:efficientnet_lite_torch_test has torch read
it back.
"""

import collections
import struct

import numpy as np

MAGIC = 0x1950a86a20f9469cfc6c
STORAGES = {np.dtype(np.float32): "FloatStorage", np.dtype(np.float64): "DoubleStorage",
            np.dtype(np.int64): "LongStorage", np.dtype(np.float16): "HalfStorage",
            np.dtype(np.uint8): "ByteStorage"}

Global = collections.namedtuple("Global", "module name")
Call = collections.namedtuple("Call", "callable args")
Build = collections.namedtuple("Build", "value state")
Persistent = collections.namedtuple("Persistent", "pid")


class Py2Str(bytes):
  """A Python 2 str: bytes pickled as (SHORT_)BINSTRING."""


def _emit(value, out):
  if value is None:
    out += b"N"
  elif value is True or value is False:
    out += b"\x88" if value else b"\x89"
  elif isinstance(value, Global):
    out += b"c" + value.module.encode() + b"\n" + value.name.encode() + b"\n"
  elif isinstance(value, Call):
    _emit(value.callable, out)
    _emit(tuple(value.args), out)
    out += b"R"
  elif isinstance(value, Build):
    _emit(value.value, out)
    _emit(value.state, out)
    out += b"b"
  elif isinstance(value, Persistent):
    _emit(value.pid, out)
    out += b"Q"
  elif isinstance(value, collections.OrderedDict):
    _emit(Call(Global("collections", "OrderedDict"), ()), out)
    if value:
      out += b"("
      for k, v in value.items():
        _emit(k, out)
        _emit(v, out)
      out += b"u"
  elif isinstance(value, Py2Str):
    out += (b"U" + bytes([len(value)]) if len(value) < 256
            else b"T" + struct.pack("<i", len(value))) + bytes(value)
  elif isinstance(value, int):
    if -2**31 <= value < 2**31:
      out += b"J" + struct.pack("<i", value)
    else:
      data = value.to_bytes((value.bit_length() + 8) // 8, "little", signed=True)
      out += b"\x8a" + bytes([len(data)]) + data
  elif isinstance(value, str):
    data = value.encode("utf-8")
    out += b"X" + struct.pack("<I", len(data)) + data
  elif isinstance(value, tuple):
    out += b"("
    for v in value:
      _emit(v, out)
    out += b"t"
  elif isinstance(value, list):
    out += b"]"
    if value:
      out += b"("
      for v in value:
        _emit(v, out)
      out += b"e"
  elif isinstance(value, dict):
    out += b"}"
    if value:
      out += b"("
      for k, v in value.items():
        _emit(k, out)
        _emit(v, out)
      out += b"u"
  else:
    raise TypeError(f"no opcodes for {type(value).__name__}")


def emit(value):
  """One protocol 2 pickle of `value`."""
  out = bytearray(b"\x80\x02")
  _emit(value, out)
  return bytes(out + b".")


def payload(module, name, *args):
  """A pickle that calls module.name(*args) as it loads."""
  return emit(Call(Global(module, name), args))


def tensor(storage_type, key, elements, offset, shape, stride):
  """torch._utils._rebuild_tensor_v2 of storage `key` (a legacy persistent id)."""
  pid = ("storage", Global("torch", storage_type), key, "cpu", elements, None)
  return Call(Global("torch._utils", "_rebuild_tensor_v2"),
              (Persistent(pid), offset, tuple(shape), tuple(stride), False,
               collections.OrderedDict()))


def _strides(shape):
  strides, step = [], 1
  for n in reversed(shape):
    strides.append(step)
    step *= n
  return tuple(reversed(strides))


def torch_legacy(tensors, state=None, sys_info=None):
  """The legacy file of {name: array} (each its own storage, C order); `state`
  replaces the state dict's pickle, `sys_info` the system information."""
  items, storages = collections.OrderedDict(), []
  for number, (name, array) in enumerate(tensors.items()):
    array = np.array(array, order="C")  # 0-d stays 0-d
    key = str(1000 + number)
    items[name] = tensor(STORAGES[array.dtype], key, array.size, 0, array.shape,
                         _strides(array.shape))
    storages.append((key, array))
  info = sys_info if sys_info is not None else {
      "protocol_version": 1001, "little_endian": True,
      "type_sizes": {"short": 2, "int": 4, "long": 8}}
  parts = [emit(MAGIC), emit(1001), emit(info),
           state if state is not None else emit(items), emit([k for k, _ in storages])]
  for _, array in storages:
    parts.append(struct.pack("<q", array.size) + array.astype(array.dtype.newbyteorder(
        "<")).tobytes())
  return b"".join(parts)


def numpy_py2(value):
  """A Python 2 cPickle (protocol 2) of `value`: a dict whose values are NumPy arrays
  (C order, one-byte or little-endian dtypes) or lists, as the CIFAR python batches."""

  def array(a):
    descr = a.dtype.str  # e.g. '|u1', '<f4'
    dtype = Build(Call(Global("numpy", "dtype"), (Py2Str(descr[1:].encode()), 0, 1)),
                  (3, descr[0], None, None, None, -1, -1, 0))
    empty = Call(Global("numpy.core.multiarray", "_reconstruct"),
                 (Global("numpy", "ndarray"), (0,), Py2Str(b"b")))
    return Build(empty, (1, a.shape, dtype, False, Py2Str(a.tobytes())))

  return emit({Py2Str(k.encode()) if isinstance(k, str) else k:
               array(v) if isinstance(v, np.ndarray) else v for k, v in value.items()})
