"""launch.retry_budget in real processes: a worker that keeps failing without a new
checkpoint is stopped after --limit restarts (exit 4, which Kubeflow's ExitCode and the
Indexed Job's podFailurePolicy treat as the job's failure); progress resets the count;
each worker and each submission counts on its own."""

import json
import os
import subprocess
import sys

from absl.testing import absltest

from launch import retry_budget

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OOM = [sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"]


def start(model_dir, limit=2, ledger="tiny-abc123", task=("worker", 1), command=OOM):
  """One (re)start of the worker's container: its exit status and stderr."""
  env = dict(os.environ, PYTHONPATH=ROOT, TF_CONFIG=json.dumps(
      {"cluster": {}, "task": {"type": task[0], "index": task[1]}}))
  result = subprocess.run(
      [sys.executable, "-m", "launch.retry_budget", f"--limit={limit}",
       f"--model_dir={model_dir}", f"--ledger={ledger}", "--", *command],
      cwd=ROOT, env=env, capture_output=True, text=True, timeout=60, check=False)
  return result.returncode, result.stderr


def checkpoint(model_dir, step):
  os.makedirs(os.path.join(model_dir, "checkpoints"), exist_ok=True)
  open(os.path.join(model_dir, "checkpoints", f"ckpt-{step}.index"), "w").close()


class RetryBudgetTest(absltest.TestCase):

  def test_an_out_of_memory_loop_ends(self):
    model_dir = self.create_tempdir().full_path
    statuses = [start(model_dir)[0] for _ in range(4)]
    # The first start and two restarts run the trainer (SIGKILLed: -9); then no more.
    self.assertEqual(statuses, [-9, -9, -9, retry_budget.EXIT_RETRIES_SPENT])
    status, said = start(model_dir)
    self.assertEqual(status, 4)
    self.assertIn("restarted 4 times in a row without a new checkpoint", said)

  def test_progress_resets_the_count(self):
    model_dir = self.create_tempdir().full_path
    for step in range(5):  # a preemption after each new checkpoint costs nothing
      checkpoint(model_dir, 10 * (step + 1))
      self.assertEqual(start(model_dir, limit=0)[0], -9)
    self.assertEqual(start(model_dir, limit=0)[0], 4)

  def test_each_worker_and_each_submission_counts_alone(self):
    model_dir = self.create_tempdir().full_path
    self.assertEqual([start(model_dir, limit=0)[0] for _ in range(2)], [-9, 4])
    self.assertEqual(start(model_dir, limit=0, task=("chief", 0))[0], -9)
    self.assertEqual(start(model_dir, limit=0, ledger="tiny-def456")[0], -9)

  def test_the_command_runs_with_its_status(self):
    model_dir = self.create_tempdir().full_path
    status, _ = start(model_dir, command=[sys.executable, "-c", "raise SystemExit(143)"])
    self.assertEqual(status, 143)

  def test_bad_arguments(self):
    for argv in (["x"], ["x", "--limit=-1", "--model_dir=/m", "--ledger=a", "--", "y"],
                 ["x", "--limit=1", "--model_dir=/m", "--ledger=A;b", "--", "y"],
                 ["x", "--limit=1", "--model_dir=/m", "--ledger=a", "--"]):
      self.assertEqual(retry_budget.main(argv, {}), 2, argv)


if __name__ == "__main__":
  absltest.main()
