"""The error a user can fix, the exit statuses a run ends with, and how a command line
ends on bad input (one line on stderr, exit status 2)."""

import sys

from absl import flags

EXIT_BAD_INPUT = 2  # a ConfigError: one line naming the problem and the fix
EXIT_DIVERGED = 3  # a non-finite loss or gradient the retries did not get past
# Preempted (SIGTERM): a checkpoint was saved; rerun the same command to resume.
# 128 + SIGTERM, the status a scheduler sees from a process SIGTERM ended, and in the
# range Kubeflow's ExitCode restart policy retries (128-255).
EXIT_PREEMPTED = 143
EXIT_INTERRUPTED = 130  # Ctrl-C: a checkpoint was saved; rerun to resume
# A peer worker stopped (killed, preempted, out of memory) and the collectives failed:
# this worker exits in the range schedulers retry (>= 128, above the signals' 128 + N),
# so that Kubeflow's ExitCode policy re-creates it beside the peer it re-creates; the
# relaunched job resumes from the chief's last checkpoint.
EXIT_PEER_LOST = 200


def fail(message):
  """Bad input: one line on stderr, exit status 2."""
  print(f"error: {message}", file=sys.stderr)
  sys.exit(EXIT_BAD_INPUT)


def parse_flags(argv):
  """absl's flag parsing (`app.run(main, flags_parser=parse_flags)`), with a mistake
  (an unknown flag, a value outside an enum or a validator's range) reported in one
  line with exit status 2 instead of absl's usage text."""
  try:
    return flags.FLAGS(argv)
  except flags.Error as e:
    fail(f"{' '.join(str(e).split())}; see --helpshort for the flags")


class ConfigError(ValueError):
  """Bad input (flag, Gin binding, data, model_dir) detected before training, or a
  bad file found during it."""


class Diverged(RuntimeError):
  """Training met a non-finite loss, gradient or weight that the retries did not get
  past (one line: the step and what went non-finite)."""


class Preempted(RuntimeError):
  """SIGTERM (or Ctrl-C) arrived; a checkpoint was saved (one line: where to resume)."""

  def __init__(self, message, by_hand=False):
    super().__init__(message)
    self.by_hand = by_hand
