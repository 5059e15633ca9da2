"""launch/tpu_vm.py: the gcloud sequence (create, scp, build, run on every host), the
TPU image's Dockerfile, bad options, and the golden file."""

import shlex

from absl.testing import absltest

from launch import submit
from launch import tpu_vm
from launch.job import Job
from launch.job import LaunchError
from tests.launch import golden

JOB = Job(name="nfnet-long-tail-full", recipe="nfnet_long_tail_full",
          model_dir="gs://bucket/runs/full", image="us-docker.pkg.dev/p/zoo/zoo-cpu:1",
          accelerator="v4-8", recipe_args=("--gin_bindings=DATA_DIR = 'gs://b/tfds'",))
OPTIONS = tpu_vm.Options(tpu_name="my-tpu", zone="us-central2-b", project="p",
                         create=True)
GCLOUD_TPU = ("gcloud", "compute", "tpus", "tpu-vm")
WHERE = ("--zone=us-central2-b", "--project=p")


class TpuVmTest(absltest.TestCase):

  def test_create_copy_build_run(self):
    create, scp, build, run = tpu_vm.steps(JOB, OPTIONS)
    self.assertEqual(create.argv, GCLOUD_TPU + ("create", "my-tpu") + WHERE + (
        "--accelerator-type=v4-8", "--version=tpu-ubuntu2204-base"))
    self.assertEqual(scp.argv, GCLOUD_TPU + (
        "scp", "{dir}/Dockerfile.tpu", "my-tpu:Dockerfile.tpu") + WHERE + ("--worker=all",))
    for step in (build, run):
      self.assertEqual(step.argv[:len(GCLOUD_TPU) + 5],
                       GCLOUD_TPU + ("ssh", "my-tpu") + WHERE + ("--worker=all",))
    self.assertEqual(build.argv[-1], "--command=sudo gcloud auth configure-docker "
                     "us-docker.pkg.dev --quiet && sudo docker build "
                     "--tag=nfnet-long-tail-full:tpu - < Dockerfile.tpu")
    docker = shlex.split(run.argv[-1][len("--command="):])
    self.assertEqual(docker[:7], ["sudo", "docker", "run", "--detach",
                                  "--name=nfnet-long-tail-full", "--privileged",
                                  "--net=host"])
    self.assertEqual(docker[7], "nfnet-long-tail-full:tpu")
    self.assertEqual(docker[8:], JOB.command(strategy="tpu", extra=["--tpu=local"]))

  def test_an_existing_tpu_is_not_created(self):
    options = tpu_vm.Options(tpu_name="my-tpu", zone="us-central2-b")
    steps = tpu_vm.steps(Job(name="t", recipe="nfnet_long_tail", image="r/zoo-cpu:1",
                             model_dir="gs://b/t"), options)
    self.assertEqual([s.argv[4] for s in steps], ["scp", "ssh", "ssh"])
    self.assertTrue(steps[1].argv[-1].startswith("--command=sudo docker build"))

  def test_the_dockerfile_swaps_in_tensorflow_tpu(self):
    text = tpu_vm.dockerfile(JOB, OPTIONS)
    self.assertTrue(text.startswith(f"FROM {JOB.image}\n"))
    self.assertIn("pip uninstall --yes tensorflow &&", text)
    self.assertIn("pip install --no-cache-dir tensorflow-tpu==2.20.0", text)
    self.assertIn(f"--find-links={tpu_vm.LIBTPU_INDEX}", text)
    pinned = tpu_vm.Options(tpu_name="t", zone="z",
                            packages="tensorflow-tpu==2.20.0 libtpu==0.0.14")
    self.assertIn("install --no-cache-dir tensorflow-tpu==2.20.0 libtpu==0.0.14",
                  tpu_vm.dockerfile(JOB, pinned))

  def test_bad_options_are_refused(self):
    base = dict(name="t", recipe="nfnet_long_tail", image="r/z:1", model_dir="gs://b/t")
    cases = [
        (Job(**base), tpu_vm.Options(tpu_name="my-tpu"), "--zone and --tpu_name"),
        (Job(**base), tpu_vm.Options(zone="z"), "--zone and --tpu_name"),
        (Job(**base, workers=2), tpu_vm.Options(tpu_name="t", zone="z"), "drop --workers"),
        (Job(**base, accelerators_per_worker=1), tpu_vm.Options(tpu_name="t", zone="z"),
         "accelerators_per_worker is for GPUs"),
        (Job(**base), tpu_vm.Options(tpu_name="t", zone="z", create=True), "TPU type"),
        (Job(**dict(base, model_dir="/runs/t")), tpu_vm.Options(tpu_name="t", zone="z"),
         "gs:// path"),
    ]
    for job, options, message in cases:
      with self.assertRaisesRegex(LaunchError, message):
        tpu_vm.steps(job, options)

  def test_golden(self):
    golden.check(self, "tpu_vm.txt", submit.render(tpu_vm.steps(JOB, OPTIONS)))


if __name__ == "__main__":
  absltest.main()
