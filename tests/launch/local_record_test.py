"""launch.local's record of a running launch: each worker is its process id and that
process's start time, so --status counts and --cancel signals only the workers that
still run, never a process that was given a worker's id since (real processes)."""

import io
import json
import os
import signal
import subprocess
import sys
from unittest import mock

from absl.testing import absltest

from launch import local
from launch.job import Job
from launch.job import LaunchError

SLEEP = [sys.executable, "-c", "import time; time.sleep(60)"]


class LocalRecordTest(absltest.TestCase):

  def test_cancel_signals_only_the_recorded_processes(self):
    cache = self.create_tempdir().full_path
    workers = [subprocess.Popen(SLEEP) for _ in range(2)]
    job_id = str(os.getpid())  # the launcher: this process
    try:
      with mock.patch.dict(os.environ, XDG_CACHE_HOME=cache):
        out = io.StringIO()
        job = Job(name="tiny", recipe="nfnet_long_tail", model_dir="/runs/tiny")
        with local.recorded(job, workers, out) as record:
          record()
          path = os.path.join(local.jobs_dir(), f"{job_id}.json")
          with open(path) as f:
            saved = json.load(f)
          self.assertEqual(saved["workers"], [
              {"pid": w.pid, "started": local.started_at(w.pid)} for w in workers])
          # Worker 1's id as if the system had given it to another process since.
          saved["workers"][1]["started"] -= 1
          with open(path, "w") as f:
            json.dump(saved, f)
          self.assertEqual(local.status(job_id, out=out), 0)
          self.assertIn(f"job {job_id} (tiny): running, 1 of 2 workers alive "
                        f"(pids {workers[0].pid});", out.getvalue())
          self.assertEqual(local.cancel(job_id, out=out), 0)
      self.assertEqual(workers[0].wait(timeout=30), -signal.SIGTERM)
      with self.assertRaises(subprocess.TimeoutExpired):  # not signalled: still running
        workers[1].wait(timeout=2)
    finally:
      for worker in workers:
        worker.kill()
        worker.wait()

  def test_a_job_id_is_a_number(self):
    for bad in ("12x", "12\n", "-1", ""):
      with self.assertRaisesRegex(LaunchError, "is not a local job id; give the number"):
        local.read_record(bad)


if __name__ == "__main__":
  absltest.main()
