"""One run per model_dir: `<model_dir>/.lock`, held with flock by the live run.

The kernel drops a flock when its process dies (kill -9 included), so on one machine
the lock is exactly as alive as its holder; the file's content (host, pid, start time,
command) only names the holder for the error line. A file that names a holder nobody
holds the flock of was left by a run that died: it is taken over with a warning. The
file is emptied, not removed, at release (removing it would let a waiting process
lock the old inode while a third creates a new one). Paths with a scheme (gs://) have
no flock: there concurrent runs are not detected, and the run says so.
"""

import datetime
import fcntl
import json
import os
import socket
import sys

from absl import logging

from recipes.errors import ConfigError

NAME = ".lock"


class Lock:
  """A held model_dir lock; a context manager that releases it."""

  def __init__(self, fd=None):
    self._fd = fd

  def release(self):
    if self._fd is None:
      return
    try:
      os.ftruncate(self._fd, 0)
      fcntl.flock(self._fd, fcntl.LOCK_UN)
    finally:
      os.close(self._fd)
      self._fd = None

  def __enter__(self):
    return self

  def __exit__(self, *exc):
    self.release()
    return False


def _holder(fd):
  """The holder JSON in the lock file, or None."""
  os.lseek(fd, 0, os.SEEK_SET)
  text = os.read(fd, 65536).decode(errors="replace").strip()
  try:
    holder = json.loads(text) if text else None
  except ValueError:
    return {}
  return holder if isinstance(holder, dict) else {}


def acquire(model_dir):
  """Takes `model_dir`'s lock (creating model_dir); a ConfigError naming the holder when
  another live process has it."""
  if "://" in model_dir:
    logging.warning("model_dir %s is not a local path: a second run on it cannot be "
                    "detected; start one run per model_dir", model_dir)
    return Lock()
  os.makedirs(model_dir, exist_ok=True)
  path = os.path.join(model_dir, NAME)
  fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
  try:
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
  except BlockingIOError:
    holder = _holder(fd)
    os.close(fd)
    if holder:
      who = (f"pid {holder.get('pid')} on host {holder.get('host')} (started "
             f"{holder.get('started')})")
    else:
      who = "another process"
    raise ConfigError(f"model_dir {model_dir!r} is in use by {who}; wait for that run to "
                      "finish, stop it, or choose another --model_dir") from None
  stale = _holder(fd)
  if stale:
    here = stale.get("host") == socket.gethostname()
    logging.warning(
        "model_dir %s was locked by pid %s on host %s since %s, which %s; taking the lock "
        "over", model_dir, stale.get("pid"), stale.get("host"), stale.get("started"),
        "is no longer running" if here else
        "no longer holds it (or its file system does not share locks)")
  holder = {"host": socket.gethostname(), "pid": os.getpid(),
            "started": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
            "argv": sys.argv}
  os.ftruncate(fd, 0)
  os.pwrite(fd, (json.dumps(holder) + "\n").encode(), 0)
  os.fsync(fd)
  return Lock(fd)
