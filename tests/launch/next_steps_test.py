"""launch.next_steps: after a submission, each engine's own commands for status, logs
and cancel name this submission's job, paste as shell words, and TensorBoard's logdir
is where the trainer writes its summaries (model_dir)."""

import shlex

from absl.testing import absltest
from absl.testing import parameterized

from launch import kubernetes
from launch import next_steps
from launch import slurm
from launch import tpu_vm
from launch import vertex
from launch.job import Job

IMAGE = "us-docker.pkg.dev/p/zoo/zoo-cpu:1"
GCS = "gs://bucket/runs/lt"


def job(model_dir=GCS, **kwargs):
  return Job(name="lt", recipe="nfnet_long_tail", workers=2, model_dir=model_dir,
             image=IMAGE, submission="abc123", **kwargs)


# backend, job, options, the engine's command-line tool, the name the commands use.
CASES = [
    ("kubernetes", job(), kubernetes.Options(), "kubectl", "lt-abc123"),
    ("indexed_job", job(), kubernetes.Options(kind="indexed_job"), "kubectl",
     "lt-abc123"),
    ("vertex", job(), vertex.Options(region="us-central1", project="p"), "gcloud",
     "lt-abc123"),
    ("tpu_vm", Job(name="lt", recipe="nfnet_long_tail", model_dir=GCS, image=IMAGE,
                   accelerator="v4-8", submission="abc123"),
     tpu_vm.Options(tpu_name="tpu", zone="us-central2-b"), "gcloud", "lt-abc123"),
    ("slurm", job(model_dir="/shared/runs/lt"), slurm.Options(workdir="/z"), "squeue",
     "lt"),
]


def sections(text):
  """{heading: [argv, ...]} of the printed commands."""
  found, heading = {}, None
  for line in text.splitlines():
    if line.endswith(":") and not line.startswith(" "):
      heading = line[:-1]
      found[heading] = []
    elif line.startswith("  $ "):
      found[heading].append(shlex.split(line[4:]))
  return found


class NextStepsTest(parameterized.TestCase):

  @parameterized.named_parameters(*[(c[0], *c[1:]) for c in CASES])
  def test_commands_name_this_submission(self, the_job, options, tool, name):
    backend = "kubernetes" if isinstance(options, kubernetes.Options) else None
    backend = backend or {vertex.Options: "vertex", tpu_vm.Options: "tpu_vm",
                          slurm.Options: "slurm"}[type(options)]
    text = next_steps.text(backend, the_job, options)
    found = sections(text)
    self.assertContainsSubset(["Status", "Logs", "Cancel", "TensorBoard"], found)
    self.assertEqual(found["Status"][0][0], tool)
    self.assertTrue(any(name in " ".join(argv) for argv in found["Status"]), text)
    # Vertex's describe, stream-logs and cancel take the numeric CustomJob id, which
    # the status section's list command finds by this submission's display name.
    named = "JOB_ID" if backend == "vertex" else name
    if backend == "vertex":
      self.assertIn(f"--filter=displayName={name}", found["Status"][0])
      self.assertIn("JOB_ID: the number at the end of the CustomJob name", text)
    for heading in ("Logs", "Cancel"):
      with self.subTest(heading):
        self.assertTrue(found[heading])
        self.assertTrue(any(named in " ".join(argv) for argv in found[heading]),
                        found[heading])
    self.assertEqual(found["TensorBoard"], [["tensorboard",
                                             f"--logdir={the_job.model_dir}"]])

  def test_vertex_logdir_is_the_bucket_not_the_mount(self):
    text = next_steps.text("vertex", job(model_dir="/gcs/bucket/runs/lt"),
                           vertex.Options(region="us-central1"))
    self.assertEqual(sections(text)["TensorBoard"],
                     [["tensorboard", "--logdir=gs://bucket/runs/lt"]])

  def test_a_path_with_a_space_stays_one_word(self):
    text = next_steps.text("slurm", job(model_dir="/shared/my runs/lt"),
                           slurm.Options(workdir="/z"))
    self.assertEqual(sections(text)["TensorBoard"],
                     [["tensorboard", "--logdir=/shared/my runs/lt"]])


if __name__ == "__main__":
  absltest.main()
