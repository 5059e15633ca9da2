"""launch/indexed_worker.py in real processes: it execs the command with TF_CONFIG
built from the pod's environment, and refuses a bad environment with one line and
exit status 2."""

import json
import os
import subprocess
import sys

from absl.testing import absltest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PRINT_TF_CONFIG = [sys.executable, "-c",
                   "import os, sys; print(os.environ['TF_CONFIG']); sys.exit(7)"]
POD = {"JOB_COMPLETION_INDEX": "2", "ZOO_JOB_NAME": "tiny", "ZOO_JOB_SERVICE": "tiny-svc",
       "ZOO_JOB_WORKERS": "3", "ZOO_JOB_PORT": "2222"}


def worker(env, command=tuple(PRINT_TF_CONFIG), separator=("--",)):
  base = {k: v for k, v in os.environ.items()
          if k not in POD and k != "TF_CONFIG"}
  base["PYTHONPATH"] = ROOT + os.pathsep + base.get("PYTHONPATH", "")
  return subprocess.run([sys.executable, "-m", "launch.indexed_worker", *separator,
                         *command], cwd=ROOT, env=dict(base, **env), capture_output=True,
                        text=True, timeout=60, check=False)


class IndexedWorkerTest(absltest.TestCase):

  def test_execs_the_command_with_tf_config(self):
    result = worker(POD)
    self.assertEqual(result.returncode, 7, result.stderr)  # the command's own status
    self.assertEqual(json.loads(result.stdout), {
        "cluster": {"worker": ["tiny-0.tiny-svc:2222", "tiny-1.tiny-svc:2222",
                               "tiny-2.tiny-svc:2222"]},
        "task": {"type": "worker", "index": 2}})

  def test_port_defaults_to_2222(self):
    env = {k: v for k, v in POD.items() if k != "ZOO_JOB_PORT"}
    env.update(JOB_COMPLETION_INDEX="0", ZOO_JOB_WORKERS="1")
    result = worker(env)
    self.assertEqual(json.loads(result.stdout)["cluster"],
                     {"worker": ["tiny-0.tiny-svc:2222"]})

  def test_bad_environment_or_command(self):
    cases = [
        ({k: v for k, v in POD.items() if k != "JOB_COMPLETION_INDEX"}, {},
         "JOB_COMPLETION_INDEX=None must be a whole number"),
        (dict(POD, JOB_COMPLETION_INDEX="3"), {}, "JOB_COMPLETION_INDEX='3'.*in \\[0, 2\\]"),
        (dict(POD, ZOO_JOB_WORKERS="0"), {}, "ZOO_JOB_WORKERS='0'.*>= 1"),
        (dict(POD, ZOO_JOB_PORT="http"), {}, "ZOO_JOB_PORT='http'"),
        (dict(POD, ZOO_JOB_NAME="Tiny_Job"), {}, "ZOO_JOB_NAME='Tiny_Job' is not a DNS label"),
        ({k: v for k, v in POD.items() if k != "ZOO_JOB_SERVICE"}, {},
         "ZOO_JOB_SERVICE='' is not a DNS label"),
        (POD, {"command": ()}, "no command; usage"),
        (POD, {"separator": ()}, "no command; usage"),
        (POD, {"command": ("/no/such/program",)}, "cannot run '/no/such/program'"),
    ]
    for env, kwargs, pattern in cases:
      result = worker(env, **kwargs)
      self.assertEqual(result.returncode, 2, (pattern, result.stderr))
      self.assertEqual(result.stdout, "")
      lines = result.stderr.splitlines()
      self.assertLen(lines, 1, result.stderr)
      self.assertRegex(lines[0], "^error: " + pattern)


if __name__ == "__main__":
  absltest.main()
