"""launch/tpu_vm.py: the gcloud sequence (create, scp, build, run on every host), the
TPU image's Dockerfile, bad options, and the golden file."""

import dataclasses
import shlex
import shutil
import subprocess

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

  def test_create_copy_build_mount_run(self):
    create, scp, build, mount, run = tpu_vm.steps(JOB, OPTIONS)
    self.assertEqual(create.argv, GCLOUD_TPU + ("create", "my-tpu") + WHERE + (
        "--accelerator-type=v4-8", "--version=tpu-ubuntu2204-base"))
    self.assertEqual(scp.argv, GCLOUD_TPU + (
        "scp", "{dir}/Dockerfile.tpu", "my-tpu:Dockerfile.tpu") + WHERE + ("--worker=all",))
    for step in (build, mount, run):
      self.assertEqual(step.argv[:len(GCLOUD_TPU) + 5],
                       GCLOUD_TPU + ("ssh", "my-tpu") + WHERE + ("--worker=all",))
    self.assertEqual(build.argv[-1], "--command=sudo gcloud auth configure-docker "
                     "us-docker.pkg.dev --quiet && sudo docker build "
                     "--tag=nfnet-long-tail-full:tpu - < Dockerfile.tpu")
    self.assertEqual(mount.argv[-1], "--command=" + tpu_vm.mount_command("bucket"))
    docker = shlex.split(run.argv[-1][len("--command="):])
    self.assertEqual(docker[:8], ["sudo", "docker", "run", "--detach",
                                  "--name=nfnet-long-tail-full", "--privileged",
                                  "--net=host", "--volume=/gcs/bucket:/gcs/bucket"])
    self.assertEqual(docker[8], "nfnet-long-tail-full:tpu")
    # The trainer writes to the hosts' Cloud Storage FUSE mount of the bucket.
    self.assertEqual(docker[9:], dataclasses.replace(
        JOB, model_dir="/gcs/bucket/runs/full").command(strategy="tpu",
                                                        extra=["--tpu=local"]))

  def test_every_host_mounts_the_bucket(self):
    command = tpu_vm.mount_command("my-bucket")
    # gcsfuse where missing, from Google's apt repository; then the mount, unless there.
    install, mount = command.split(" && sudo mkdir -p ")
    self.assertTrue(install.startswith("{ command -v gcsfuse > /dev/null || { "))
    self.assertIn('echo "deb [signed-by=/usr/share/keyrings/cloud.google.asc] '
                  'https://packages.cloud.google.com/apt gcsfuse-$(lsb_release -c -s) '
                  'main" | sudo tee /etc/apt/sources.list.d/gcsfuse.list', install)
    self.assertIn("curl -fsSL https://packages.cloud.google.com/apt/doc/apt-key.gpg | "
                  "sudo tee /usr/share/keyrings/cloud.google.asc", install)
    self.assertTrue(install.endswith("sudo apt-get update && sudo apt-get install --yes "
                                     "gcsfuse; }; }"))
    self.assertEqual(mount, "/gcs/my-bucket && { mountpoint -q /gcs/my-bucket || "
                     "sudo gcsfuse --implicit-dirs my-bucket /gcs/my-bucket; }")
    bash = shutil.which("bash")
    if bash:
      result = subprocess.run([bash, "-n"], input=command, text=True, capture_output=True,
                              check=False)
      self.assertEqual(result.returncode, 0, result.stderr)
  def test_an_existing_tpu_is_not_created(self):
    options = tpu_vm.Options(tpu_name="my-tpu", zone="us-central2-b")
    steps = tpu_vm.steps(Job(name="t", recipe="nfnet_long_tail", image="r/zoo-cpu:1",
                             model_dir="gs://b/t"), options)
    self.assertEqual([s.argv[4] for s in steps], ["scp", "ssh", "ssh", "ssh"])
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
        # The mount path is not a way round: multi-host slices share only the bucket.
        (Job(**dict(base, model_dir="/gcs/b/t")), tpu_vm.Options(tpu_name="t", zone="z"),
         "gs:// path"),
        (Job(**dict(base, model_dir="gs://B/t")), tpu_vm.Options(tpu_name="t", zone="z"),
         "'B' is not a Cloud Storage bucket name"),
    ]
    for job, options, message in cases:
      with self.assertRaisesRegex(LaunchError, message):
        tpu_vm.steps(job, options)

  def test_golden(self):
    golden.check(self, "tpu_vm.txt", submit.render(tpu_vm.steps(JOB, OPTIONS)))


if __name__ == "__main__":
  absltest.main()
