"""A real Slurm cluster on this machine (slurm_cluster.py: munged, slurmctld and
slurmd on localhost) runs the launcher's own sbatch script, submitted by the launcher
(`python -m launch.cli --backend=slurm`): two tasks on the one node train the tiny
flagship through --cluster=slurm to the weights of the local two-worker run; only the
chief writes; `scancel --signal=TERM` and the time limit make both tasks save at one
step, the job requeues itself and resumes to the uninterrupted run's weights; the
launcher's --status and --cancel see and end a job. Where Slurm is absent and cannot
be installed (not root, not Debian): skipped with one line saying why, failed under
CI=true (tests/real_parts.py)."""

import re
import time

import tensorflow as tf

from tests.launch import slurm_jobs
from tests.recipes import cli

RECIPE_ARGS = slurm_jobs.RECIPE_ARGS
ENDED = slurm_jobs.ENDED
# A run that outlasts a three-minute time limit's signal (60-120 s in).
LONG = 150  # 1.4-2 s an epoch on an idle 2-core machine: 210-300 s (60 epochs once
# finished in 86 s, before the signal came)
STEPS_PER_EPOCH = slurm_jobs.STEPS_PER_EPOCH
STOPPED = re.compile(r"preempted \(SIGTERM\) at epoch (\d+), step (\d+) of \d+: saved")
RESUMED = re.compile(r"Resumed from \S*ckpt-(\d+)")


class SlurmRealTest(slurm_jobs.SlurmJobsTest):

  NODES = 1

  def assert_both_saved_at_one_step_and_resumed(self, job_id):
    said = self.output(job_id)
    stops = STOPPED.findall(said)
    self.assertLen(stops, 2, said[-3000:])
    self.assertEqual(stops[0], stops[1])
    self.assertIn(f"requeueing job {job_id} to resume", said)
    self.assertIn("Resumed from", said)

  def test_two_tasks_train_like_the_local_workers(self):
    started = time.monotonic()
    job_id = self.submit()
    self.wait(job_id, lambda s: s == "RUNNING", timeout=60)
    status = self.launcher(f"--status={job_id}")
    self.assertEqual(status.returncode, 0, status.stderr)
    self.assertRegex(status.stdout, rf"{job_id} +tiny +(RUNNING|COMPLETING|COMPLETED)")
    self.wait(job_id, lambda s: s in ENDED)
    print(f"the Slurm job ran {time.monotonic() - started:.0f} s")
    said = self.output(job_id)
    self.assertIn("on 2 replica(s)", said)
    self.assertEqual(said.count("This worker is done; the chief writes the report in"), 1)
    self.assert_only_the_chief_wrote(job_id)
    self.assert_weights_of_the_local_run(job_id)

  def test_scancel_term_saves_and_the_requeued_job_resumes(self):
    job_id = self.submit()
    self.wait(job_id, lambda s: s in ENDED or self.checkpoint_after_epoch_one())
    self.cluster.run("scancel", "--signal=TERM", job_id)
    self.wait(job_id, lambda s: "requeueing" in self.output(job_id), timeout=120)
    self.wait(job_id, lambda s: s in ENDED)
    self.assert_both_saved_at_one_step_and_resumed(job_id)
    self.assert_weights_of_the_local_run(job_id)

  def test_the_time_limit_requeues(self):
    """--time=3 with the SIGTERM 60 s ahead (Slurm checks once a minute: it comes 60
    to 120 s in), on a run longer than that; both tasks save at one step, the job
    requeues itself and its next run resumes there. Then the launcher's --cancel ends
    it (that a resumed run finishes with the uninterrupted run's weights is the scancel
    test's; finishing this one's 150 epochs took 10 minutes of CI)."""
    job_id = self.submit("--slurm_time=3", "--slurm_signal_seconds=60",
                         recipe_args=(*RECIPE_ARGS, f"--gin_bindings=EPOCHS = {LONG}"))
    started = time.monotonic()
    self.wait(job_id, lambda s: "requeueing" in self.output(job_id) or s in ENDED,
              timeout=240)
    print(f"requeued at the time limit after {time.monotonic() - started:.0f} s")
    self.wait(job_id, lambda s: "Resumed from" in self.output(job_id) or s in ENDED,
              timeout=180)
    self.assertNotIn(self.cluster.jobs().get(job_id), ENDED)  # running again, not done
    self.assert_both_saved_at_one_step_and_resumed(job_id)
    resumed = RESUMED.search(self.output(job_id))  # mid-run, from the step both saved
    self.assertIsNotNone(resumed, self.output(job_id)[-3000:])
    self.assertBetween(int(resumed.group(1)), 1, LONG * STEPS_PER_EPOCH - 1)
    result = self.launcher(f"--cancel={job_id}")
    self.assertEqual(result.returncode, 0, result.stderr)
    self.assertEqual(self.wait(job_id, lambda s: s in ENDED, timeout=120), "CANCELLED")

  def test_cancel_ends_the_job_for_good(self):
    job_id = self.submit(recipe_args=(*RECIPE_ARGS, f"--gin_bindings=EPOCHS = {LONG}"))
    self.wait(job_id, lambda s: s == "RUNNING", timeout=60)
    result = self.launcher(f"--cancel={job_id}")
    self.assertEqual(result.returncode, 0, result.stderr)
    self.assertEqual(self.wait(job_id, lambda s: s in ENDED, timeout=120), "CANCELLED")
    time.sleep(20)  # past cred_expire: a requeued job would be pending again by now
    self.assertEqual(self.cluster.jobs().get(job_id), "CANCELLED")
    status = self.launcher(f"--status={job_id}")
    self.assertIn("CANCELLED", status.stdout)
    self.assertNotIn("requeueing", self.output(job_id))
    bad = self.launcher("--status=12; rm -rf /")
    self.assertEqual(bad.returncode, 2)
    self.assertIn("is not a Slurm job id", bad.stderr)


if __name__ == "__main__":
  tf.test.main()
