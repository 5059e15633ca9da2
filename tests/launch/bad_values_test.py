"""Every value a launcher pattern checks, given with a trailing newline, a trailing
carriage return, a newline inside and shell metacharacters: one line on stderr and
exit status 2, in real processes (`python -m launch.cli`, `launch.indexed_worker`,
`launch.retry_budget`). The same value without them is accepted (exit 0), so each row
reaches the check it names. (`re.match` with `$` accepts a final "\\n": --name=$'t\\n'
passed, and the sbatch script's `#SBATCH --output=t` was followed by a line `-%j.out`,
which ends sbatch's directives, so --requeue and --signal were dropped.)"""

import json
import os
import subprocess
import sys

from absl.testing import absltest
from absl.testing import parameterized

from launch import local

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# (name, what the good value becomes); "\n" inside goes before the value's last character.
VARIANTS = (("trailing_newline", lambda v: v + "\n"),
            ("trailing_return", lambda v: v + "\r"),
            ("newline_inside", lambda v: v[:-1] + "\n" + v[-1:]),
            ("semicolon", lambda v: v + ";touch PWNED"),
            ("substitution", lambda v: v + "$(touch PWNED)"))
MOST = tuple(name for name, _ in VARIANTS)
# --tpu_packages is whitespace-separated requirements: a newline or "\r" separates two.
METACHARACTERS = ("semicolon", "substitution")

LAUNCH = ("--recipe=nfnet_long_tail", "--dry_run")
LOCAL = ("--backend=local",) + LAUNCH
SLURM = ("--backend=slurm", "--model_dir=/s/x", "--slurm_workdir=/s/zoo") + LAUNCH
KUBERNETES = ("--backend=kubernetes", "--image=r/zoo:1", "--model_dir=gs://b/x") + LAUNCH
VERTEX = ("--backend=vertex", "--image=r/zoo:1", "--model_dir=gs://b/x",
          "--region=us-central1") + LAUNCH
TPU_VM = ("--backend=tpu_vm", "--image=r/zoo:1", "--model_dir=gs://b/x",
          "--zone=us-central2-b", "--tpu_name=my-tpu", "--accelerator=v4-8") + LAUNCH
GPU = ("--accelerators_per_worker=1",)
TENSORBOARD = ("--model_dir=gs://b/logs",
               "--service_account=trainer@my-project.iam.gserviceaccount.com")
# (row, the launcher's other flags, the flag, a good value); the flag comes last.
FLAGS = [
    ("name", SLURM, "--name", "tiny"),  # it was in #SBATCH --output=<name>-%j.out
    ("recipe", LOCAL, "--recipe", "nfnet_long_tail"),
    ("submission_id", KUBERNETES, "--submission_id", "abc123"),
    ("image", KUBERNETES, "--image", "r/zoo:1"),
    ("bucket", KUBERNETES, "--model_dir", "gs://my-bucket"),
    ("slurm_time", SLURM, "--slurm_time", "24:00:00"),
    ("slurm_mem", SLURM, "--slurm_mem", "64G"),
    ("slurm_partition", SLURM, "--slurm_partition", "gpu"),
    ("slurm_account", SLURM, "--slurm_account", "ml"),
    ("slurm_accelerator", SLURM + GPU, "--accelerator", "a100"),
    ("namespace", KUBERNETES, "--namespace", "ml"),
    ("volume_claim", KUBERNETES, "--volume_claim", "runs"),
    ("accelerator_label", KUBERNETES, "--accelerator_label",
     "cloud.google.com/gke-accelerator"),
    ("kubernetes_accelerator", KUBERNETES + GPU, "--accelerator", "nvidia-tesla-t4"),
    ("k8s_cpu", KUBERNETES, "--k8s_cpu", "4"),
    ("k8s_memory", KUBERNETES, "--k8s_memory", "16Gi"),
    ("region", VERTEX, "--region", "us-central1"),
    ("vertex_project", VERTEX, "--project", "my-project"),
    ("service_account", VERTEX, "--service_account",
     "trainer@my-project.iam.gserviceaccount.com"),
    ("vertex_tensorboard", VERTEX + TENSORBOARD, "--vertex_tensorboard",
     "projects/p/locations/us-central1/tensorboards/1"),
    ("machine_type", VERTEX, "--machine_type", "n1-standard-8"),
    ("vertex_accelerator", VERTEX + GPU, "--accelerator", "NVIDIA_TESLA_T4"),
    ("tpu_name", TPU_VM, "--tpu_name", "my-tpu"),
    ("zone", TPU_VM, "--zone", "us-central2-b"),
    ("tpu_project", TPU_VM, "--project", "my-project"),
    ("tpu_runtime_version", TPU_VM, "--tpu_runtime_version", "tpu-ubuntu2204-base"),
    ("tpu_accelerator", TPU_VM, "--accelerator", "v4-8"),
    ("slurm_status", ("--backend=slurm",), "--status", "42"),
    ("local_status", ("--backend=local",), "--status", "OWN_PID"),  # this test's record
]
POD = {"JOB_COMPLETION_INDEX": "2", "ZOO_JOB_NAME": "tiny", "ZOO_JOB_SERVICE": "tiny-svc",
       "ZOO_JOB_WORKERS": "3", "ZOO_JOB_PORT": "2222"}
BUDGET = {"--limit": "2", "--ledger": "tiny-abc123"}
SUCCEED = (sys.executable, "-c", "pass")


class BadValuesTest(parameterized.TestCase):

  def setUp(self):
    super().setUp()
    # Stand-ins for Slurm's tools (--backend=slurm --status), and a record of a local job
    # whose launcher is this process (--backend=local --status).
    self.tools = self.create_tempdir().full_path
    for name in ("squeue", "sacct", "scancel"):
      with open(os.path.join(self.tools, name), "w") as f:
        f.write("#!/bin/sh\nexit 0\n")
      os.chmod(os.path.join(self.tools, name), 0o755)
    self.cache = self.create_tempdir().full_path
    jobs = os.path.join(self.cache, "model_zoo", "local_jobs")
    os.makedirs(jobs)
    with open(os.path.join(jobs, f"{os.getpid()}.json"), "w") as f:
      json.dump({"name": "t", "model_dir": "/s/t", "launcher": os.getpid(),
                 "started": local.started_at(os.getpid()), "workers": []}, f)

  def run_module(self, module, args, env=None):
    base = {k: v for k, v in os.environ.items()
            if k not in POD and k not in ("TF_CONFIG", "BUILD_WORKING_DIRECTORY")}
    base.update(PYTHONPATH=ROOT, XDG_CACHE_HOME=self.cache,
                PATH=self.tools + os.pathsep + base.get("PATH", ""))
    return subprocess.run([sys.executable, "-m", module, *args], cwd=ROOT,
                          env=dict(base, **(env or {})), capture_output=True, text=True,
                          timeout=60, check=False)

  def assert_refused(self, good, run, names, variants=MOST):
    """run(good) succeeds; run(each variant of good) exits 2 with one line on stderr,
    an error naming `names`, and nothing on stdout."""
    accepted = run(good)
    self.assertEqual(accepted.returncode, 0, accepted.stderr)
    for name, make in VARIANTS:
      if name not in variants:
        continue
      value = make(good)
      with self.subTest(name):
        result = run(value)
        self.assertEqual(result.returncode, 2, (value, result.stdout, result.stderr))
        self.assertEqual(result.stdout, "", value)
        lines = result.stderr.splitlines()
        self.assertLen(lines, 1, (value, result.stderr))
        self.assertStartsWith(lines[0], "error: ")
        self.assertIn(names, lines[0])

  @parameterized.named_parameters(*FLAGS)
  def test_launcher_flag(self, others, flag, good):
    good = str(os.getpid()) if good == "OWN_PID" else good
    names = "--status/--cancel=" if flag == "--status" else f"{flag}="
    self.assert_refused(good, lambda v: self.run_module(
        "launch.cli", [*others, f"{flag}={v}"]), names)

  def test_other_refusals_name_values_in_one_line(self):
    """Refusals that are not a pattern's name the value too: as Python writes it, so a
    newline in it stays on the line."""
    value = "x\ny"
    for args, names in [
        ((*KUBERNETES, "--accelerator=t\n4"), "--accelerator='t\\n4' needs"),
        ((*VERTEX, "--accelerator=T\n4"), "--accelerator='T\\n4' needs"),
        ((*SLURM, f"--model_dir=gs://b/{value}"), "is a URL"),
        ((*SLURM, "--image=r/zoo:1", f"--model_dir=/s/{value},z"), "holds ',' or ':'"),
        ((*KUBERNETES, f"--model_dir=gs://b/./{value}"), "'.' and '..' are not folders"),
        ((*KUBERNETES, "--volume_claim=runs", f"--volume_mount=/gcs/b/{value}",
          "--model_dir=gs://b/x"), "overlaps"),
        ((*KUBERNETES, "--volume_claim=runs", f"--volume_mount=/runs/{value}",
          "--model_dir=/elsewhere/x"), "is not on the volume"),
        ((*VERTEX, *TENSORBOARD, f"--model_dir=gs://b/{value}",
          "--vertex_tensorboard=projects/p/locations/us-central1/tensorboards/1"),
         "--vertex_tensorboard uploads"),
        (("--backend=local", f"--status={value}"), "is not a local job id"),
    ]:
      with self.subTest(names):
        result = self.run_module("launch.cli", args)
        self.assertEqual(result.returncode, 2, (args, result.stderr))
        self.assertLen(result.stderr.splitlines(), 1, (args, result.stderr))
        self.assertIn(names, result.stderr)

  def test_tpu_packages(self):
    self.assert_refused("tensorflow-tpu==2.20.0", lambda v: self.run_module(
        "launch.cli", [*TPU_VM, f"--tpu_packages={v}"]), "--tpu_packages",
                        variants=METACHARACTERS)

  @parameterized.parameters(*POD)
  def test_indexed_worker_environment(self, variable):
    self.assert_refused(POD[variable], lambda v: self.run_module(
        "launch.indexed_worker", ["--", *SUCCEED], dict(POD, **{variable: v})),
                        f"{variable}=")

  @parameterized.parameters(*BUDGET)
  def test_retry_budget_flag(self, flag):
    model_dir = self.create_tempdir().full_path

    def run(value):
      own = [f"{f}={value if f == flag else v}" for f, v in BUDGET.items()]
      return self.run_module("launch.retry_budget",
                             [*own, f"--model_dir={model_dir}", "--", *SUCCEED])
    self.assert_refused(BUDGET[flag], run, f"{flag}=")

  def test_retry_budget_task_type(self):
    model_dir = self.create_tempdir().full_path
    self.assert_refused("worker", lambda v: self.run_module(
        "launch.retry_budget", [*(f"{f}={v}" for f, v in BUDGET.items()),
                                f"--model_dir={model_dir}", "--", *SUCCEED],
        {"TF_CONFIG": json.dumps({"task": {"type": v, "index": 0}})}), "TF_CONFIG's task")


if __name__ == "__main__":
  absltest.main()
