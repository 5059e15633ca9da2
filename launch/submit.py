"""Carrying out a backend's Steps (launch.job.Step), or printing them for --dry_run.

Each Step's files are written into a fresh directory and its command runs there with
`{dir}` replaced by that directory. The dry run prints every file under a header line
`==> {dir}/<name> <==` and then the command after `$ `, exactly as it would run but for
`{dir}` (a Step with `unless` as `UNLESS > /dev/null 2>&1 || COMMAND`); it writes and
runs nothing.
"""

import os
import shlex
import shutil
import subprocess
import sys
import tempfile

from launch.job import LaunchError

DIR = "{dir}"


def render(steps):
  """The dry run's text: each Step's files, then its command."""
  lines = []
  for step in steps:
    for name, text in step.files:
      lines.append(f"==> {DIR}/{name} <==")
      lines.append(text.rstrip("\n"))
    command = "$ " + shlex.join(step.argv)
    if step.unless:
      command = f"$ {shlex.join(step.unless)} > /dev/null 2>&1 || {command[2:]}"
    if step.stdin:
      command += " <<'EOF'\n" + step.stdin.rstrip("\n") + "\nEOF"
    lines.append(command)
  return "\n".join(lines) + "\n"


def check_tools(steps):
  """LaunchError unless every Step's program is on PATH."""
  for step in steps:
    if shutil.which(step.argv[0]) is None:
      raise LaunchError(f"{step.argv[0]} is not on PATH; install it, or add --dry_run to "
                        "print what would be submitted")


def run(steps, out=None):
  """Runs the Steps in order; the first failing command's exit status, else 0."""
  out = out or sys.stderr
  for step in steps:
    if step.unless and subprocess.run(
        step.unless, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False,
        cwd=os.environ.get("BUILD_WORKING_DIRECTORY")).returncode == 0:
      print(f"$ {shlex.join(step.unless)}: succeeded, so not: {shlex.join(step.argv)}",
            file=out, flush=True)
      continue
    with tempfile.TemporaryDirectory(prefix="launch-") as directory:
      for name, text in step.files:
        with open(os.path.join(directory, name), "w") as f:
          f.write(text)
      argv = [arg.replace(DIR, directory) for arg in step.argv]
      print(f"$ {shlex.join(argv)}", file=out, flush=True)
      # `bazel run` starts in the runfiles; the user's directory is where they ran it.
      status = subprocess.run(argv, input=step.stdin or None, text=True, check=False,
                              cwd=os.environ.get("BUILD_WORKING_DIRECTORY")).returncode
      if status:
        print(f"error: {argv[0]} exited with status {status}; nothing after it ran",
              file=out)
        return status
  return 0
