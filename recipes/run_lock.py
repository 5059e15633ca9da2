"""One run per model_dir: `<model_dir>/.lock`, held with flock by the live run.

The kernel drops a flock when its process dies (kill -9 included), so on one machine
the lock is exactly as alive as its holder; the file's content (host, pid, start time,
command) only names the holder for the error line. A file that names a holder while
nobody holds its flock was left by a run that died (or, where the pid is alive, by a
pid since reused): the flock is the truth, and the lock is taken over with a warning.
The file is emptied, not removed, at release (removing it would let a waiting process
lock the old inode while a third creates a new one). Paths with a scheme (gs://), and
file systems that refuse flock, have no lock: there concurrent runs are not detected,
and the run says so. The file holds the command line, so it is its owner's alone (0600);
it is never opened through a symbolic link (a planted one is refused in one line).
"""

import datetime
import errno
import fcntl
import json
import os
import socket
import sys

from absl import logging

from recipes.errors import ConfigError

NAME = ".lock"


class Lock:
  """A held model_dir lock (or none, for a model_dir that cannot be locked); a context
  manager that releases it. release() is idempotent."""

  def __init__(self, fd=None):
    self._fd = fd

  @property
  def held(self):
    return self._fd is not None

  def release(self):
    if self._fd is None:
      return
    fd, self._fd = self._fd, None
    try:
      os.ftruncate(fd, 0)  # empty: free (before the unlock, so no taker sees us)
      fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
      os.close(fd)

  def __enter__(self):
    return self

  def __exit__(self, *exc):
    self.release()
    return False


def _read(fd):
  os.lseek(fd, 0, os.SEEK_SET)
  chunks = []
  while True:
    chunk = os.read(fd, 1 << 16)
    if not chunk:
      return b"".join(chunks).decode(errors="replace").strip()
    chunks.append(chunk)


def _holder(fd):
  """The holder JSON in the lock file: None when empty, {} when unreadable."""
  text = _read(fd)
  try:
    holder = json.loads(text) if text else None
  except ValueError:
    return {}
  return holder if holder is None or isinstance(holder, dict) else {}


def _alive(pid):
  """Whether a process `pid` (a positive int: 0 and negatives name process groups)
  exists on this host."""
  if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
    return False
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return False
  except PermissionError:
    return True  # another user's process
  except OverflowError:
    return False
  return True


def _who(holder):
  return (f"pid {holder.get('pid')} on host {holder.get('host')} (started "
          f"{holder.get('started')})")


def _take_over_warning(model_dir, stale):
  """One warning line about the holder `stale` that no longer holds the flock."""
  if not stale:
    logging.warning("model_dir %s has a lock file naming no readable holder, and no "
                    "process holds it (a run died writing it); taking the lock over",
                    model_dir)
    return
  pid, host = stale.get("pid"), stale.get("host")
  if host != socket.gethostname():
    state = ("no longer holds it (or the file system does not share locks between "
             "hosts, so a run there may still be writing)")
  elif pid == os.getpid():
    state = "is this process, which dropped it without releasing it"
  elif _alive(pid):
    state = (f"no longer holds it (pid {pid} is alive but is not holding the lock: "
             "the pid was reused)")
  else:
    state = "is no longer running"
  logging.warning("model_dir %s was locked by pid %s on host %s since %s, which %s; "
                  "taking the lock over", model_dir, pid, host, stale.get("started"),
                  state)


def acquire(model_dir):
  """Takes `model_dir`'s lock (creating model_dir): the caller releases it. A
  ConfigError (one line, naming the holder) when another live process holds it."""
  model_dir = os.fspath(model_dir)
  if "://" in model_dir:
    logging.warning("model_dir %s is not a local path: a second run on it cannot be "
                    "detected; start one run per model_dir", model_dir)
    return Lock()
  os.makedirs(model_dir, exist_ok=True)
  path = os.path.join(model_dir, NAME)
  try:  # never through a link (a planted one would have its target truncated)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
  except OSError as e:
    if e.errno != errno.ELOOP:
      raise
    raise ConfigError(f"model_dir {model_dir!r}'s {NAME} is a symbolic link (to "
                      f"{os.readlink(path)!r}); remove it: a run never writes through a "
                      "link") from None
  try:
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
  except BlockingIOError:
    holder = _holder(fd)
    os.close(fd)
    if not holder:  # the holder is between truncating and writing its name
      who = "another process"
    elif (holder.get("pid") == os.getpid()
          and holder.get("host") == socket.gethostname()):
      raise ConfigError(
          f"model_dir {model_dir!r} is in use by {_who(holder)}, this same process: "
          "release its earlier lock on it first, or choose another --model_dir") from None
    else:
      who = _who(holder)
    raise ConfigError(f"model_dir {model_dir!r} is in use by {who}; wait for that run to "
                      "finish, stop it, or choose another --model_dir") from None
  except OSError as e:
    os.close(fd)
    if e.errno not in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL):
      raise
    logging.warning("model_dir %s is on a file system without flock (%s): a second run "
                    "on it cannot be detected; start one run per model_dir", model_dir,
                    e.strerror)
    return Lock()
  try:
    stale = _holder(fd)
    if stale is not None:
      _take_over_warning(model_dir, stale)
    os.fchmod(fd, 0o600)  # the command line is its owner's (an older run's file: 0644)
    holder = {"host": socket.gethostname(), "pid": os.getpid(),
              "started": datetime.datetime.now().astimezone().isoformat(
                  timespec="seconds"),
              "argv": sys.argv}
    os.ftruncate(fd, 0)
    os.pwrite(fd, (json.dumps(holder) + "\n").encode(), 0)
    os.fsync(fd)
  except BaseException:
    os.close(fd)  # drops the flock
    raise
  return Lock(fd)
