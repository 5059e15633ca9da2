"""launch/vertex.py: the CustomJobSpec against the aiplatform v1 fields it uses, its
worker pools, the gcloud command, bad options, and the golden file."""

import copy
import dataclasses

from absl.testing import absltest
import yaml

from launch import vertex
from launch.job import Job
from launch.job import LaunchError
from tests.launch import golden
from tests.launch import schemas

JOB = Job(name="nfnet-long-tail-full", recipe="nfnet_long_tail_full", workers=3,
          model_dir="gs://bucket/runs/full", image="us-docker.pkg.dev/p/zoo/zoo-gpu:1",
          accelerator="NVIDIA_TESLA_A100", accelerators_per_worker=4,
          machine_type="a2-highgpu-4g",
          recipe_args=("--gin_bindings=DATA_DIR = 'gs://bucket/tfds'",))
OPTIONS = vertex.Options(region="us-central1", project="my-project")


class VertexTest(absltest.TestCase):

  def test_valid_against_the_custom_job_spec(self):
    cpu = Job(name="tiny", recipe="nfnet_long_tail", image="r/zoo-cpu:1",
              model_dir="/gcs/bucket/tiny")
    for job in (JOB, cpu):
      self.assertEqual(schemas.errors("vertex_custom_job",
                                      vertex.custom_job_spec(job, OPTIONS)), [])

  def test_broken_specs_are_rejected(self):
    spec = vertex.custom_job_spec(JOB, OPTIONS)
    snake_case = copy.deepcopy(spec)
    snake_case["worker_pool_specs"] = snake_case.pop("workerPoolSpecs")
    unknown_gpu = copy.deepcopy(spec)
    unknown_gpu["workerPoolSpecs"][0]["machineSpec"]["acceleratorType"] = "A100"
    no_image = copy.deepcopy(spec)
    del no_image["workerPoolSpecs"][1]["containerSpec"]["imageUri"]
    for broken in (snake_case, unknown_gpu, no_image):
      self.assertNotEqual(schemas.errors("vertex_custom_job", broken), [])

  def test_pool_zero_is_the_chief_pool_one_the_other_workers(self):
    spec = vertex.custom_job_spec(JOB, OPTIONS)
    chief, workers = spec["workerPoolSpecs"]
    self.assertEqual((chief["replicaCount"], workers["replicaCount"]), (1, 2))
    for pool in (chief, workers):
      self.assertEqual(pool["machineSpec"], {"machineType": "a2-highgpu-4g",
                                             "acceleratorType": "NVIDIA_TESLA_A100",
                                             "acceleratorCount": 4})
      container = pool["containerSpec"]
      # The trainer writes to Vertex's Cloud Storage FUSE mount of the bucket.
      self.assertEqual(container["command"] + container["args"],
                       dataclasses.replace(JOB, model_dir="/gcs/bucket/runs/full").command())
    self.assertEqual(spec["baseOutputDirectory"], {"outputUriPrefix": JOB.model_dir})
    self.assertEqual(spec["scheduling"], {"timeout": "604800s",
                                          "restartJobOnWorkerRestart": True})

  def test_the_trainer_gets_the_mounted_path(self):
    def trainer_model_dir(model_dir):
      spec = vertex.custom_job_spec(dataclasses.replace(JOB, model_dir=model_dir), OPTIONS)
      args = [a for pool in spec["workerPoolSpecs"] for a in pool["containerSpec"]["args"]
              if a.startswith("--model_dir=")]
      self.assertLen(set(args), 1)
      return args[0][len("--model_dir="):], spec["baseOutputDirectory"]["outputUriPrefix"]

    self.assertEqual(trainer_model_dir("gs://bucket/runs/full"),
                     ("/gcs/bucket/runs/full", "gs://bucket/runs/full"))
    self.assertEqual(trainer_model_dir("gs://bucket/runs/full/"),
                     ("/gcs/bucket/runs/full", "gs://bucket/runs/full/"))
    # The mounted path given directly: passed on, its URL the output directory.
    self.assertEqual(trainer_model_dir("/gcs/bucket/runs/full"),
                     ("/gcs/bucket/runs/full", "gs://bucket/runs/full"))

  def test_one_worker_one_pool(self):
    one = Job(name="tiny", recipe="nfnet_long_tail", image="r/zoo-cpu:1",
              model_dir="gs://b/tiny")
    spec = vertex.custom_job_spec(one, OPTIONS)
    self.assertEqual(len(spec["workerPoolSpecs"]), 1)
    self.assertEqual(spec["scheduling"], {"timeout": "604800s"})  # one worker: no restart
    self.assertEqual(spec["workerPoolSpecs"][0]["machineSpec"],
                     {"machineType": vertex.DEFAULT_MACHINE_TYPE})

  def test_bad_options_are_refused(self):
    cases = [
        (JOB, vertex.Options(), "needs --region"),
        (Job(name="t", recipe="nfnet_long_tail", image="r/z:1", model_dir="/runs/t"),
         OPTIONS, "not reachable from every Vertex replica"),
        (Job(name="t", recipe="nfnet_long_tail", image="r/z:1", model_dir="s3://b/t"),
         OPTIONS, "not reachable from every Vertex replica"),
        (Job(name="t", recipe="nfnet_long_tail", image="r/z:1", model_dir="/gcs/"),
         OPTIONS, "'' is not a Cloud Storage bucket name"),
        (Job(name="t", recipe="nfnet_long_tail", image="r/z:1", model_dir="gs://b/../t"),
         OPTIONS, "'.' and '..'"),
        (Job(name="t", recipe="nfnet_long_tail", image="r/z:1", model_dir="gs://b/t",
             accelerator="nvidia-tesla-t4", accelerators_per_worker=1),
         OPTIONS, "NVIDIA_TESLA_T4"),
        (Job(name="t", recipe="nfnet_long_tail", model_dir="gs://b/t"), OPTIONS,
         "needs an image"),
    ]
    for job, options, message in cases:
      with self.assertRaisesRegex(LaunchError, message):
        vertex.steps(job, options)

  def test_created_with_gcloud(self):
    (step,) = vertex.steps(JOB, OPTIONS)
    self.assertEqual(step.argv, (
        "gcloud", "ai", "custom-jobs", "create", "--region=us-central1",
        "--display-name=nfnet-long-tail-full", "--config={dir}/custom_job.yaml",
        "--project=my-project"))
    name, text = step.files[0]
    self.assertEqual(name, "custom_job.yaml")
    self.assertEqual(yaml.safe_load(text), vertex.custom_job_spec(JOB, OPTIONS))
    golden.check(self, "vertex.yaml", text)

  def test_the_display_name_is_new_for_each_submission(self):
    (step,) = vertex.steps(dataclasses.replace(JOB, submission="abc123"), OPTIONS)
    self.assertIn("--display-name=nfnet-long-tail-full-abc123", step.argv)
    self.assertIn("--model_dir=/gcs/bucket/runs/full", step.files[0][1])

  def test_spot_timeout_service_account_and_tensorboard(self):
    board = "projects/my-project/locations/us-central1/tensorboards/123"
    account = "trainer@my-project.iam.gserviceaccount.com"
    options = dataclasses.replace(OPTIONS, spot=True, timeout_hours=720,
                                  service_account=account, tensorboard=board)
    job = dataclasses.replace(JOB, model_dir="gs://bucket/runs/full/logs")
    spec = vertex.custom_job_spec(job, options)
    self.assertEqual(schemas.errors("vertex_custom_job", spec), [])
    self.assertEqual(spec["scheduling"], {"timeout": "2592000s",
                                          "restartJobOnWorkerRestart": True,
                                          "strategy": "SPOT"})
    self.assertEqual(spec["serviceAccount"], account)
    self.assertEqual(spec["tensorboard"], board)
    # Vertex uploads <baseOutputDirectory>/logs: where the trainer writes the run.
    base = spec["baseOutputDirectory"]["outputUriPrefix"]
    self.assertIn(f"--model_dir={vertex.mounted(base + '/logs')}",
                  spec["workerPoolSpecs"][0]["containerSpec"]["args"])
    for bad, message in (
        (dict(tensorboard=board, service_account=account), "--model_dir='gs://bucket/runs/"
         "full/logs'"),
        (dict(tensorboard=board), "needs --service_account"),
        (dict(tensorboard="tb-1", service_account=account), "not a TensorBoard resource"),
        (dict(service_account="me; rm -rf /"), "not a service account"),
        (dict(timeout_hours=0), "vertex_timeout_hours=0")):
      with self.assertRaisesRegex(LaunchError, message):
        vertex.custom_job_spec(JOB, dataclasses.replace(OPTIONS, **bad))

  def test_each_gpu_gets_a_machine_that_can_host_it(self):
    def machine(accelerator, count, machine_type=""):
      job = dataclasses.replace(JOB, accelerator=accelerator, accelerators_per_worker=count,
                                machine_type=machine_type)
      return vertex.custom_job_spec(job, OPTIONS)["workerPoolSpecs"][0]["machineSpec"][
          "machineType"]

    self.assertEqual(machine("NVIDIA_TESLA_A100", 2), "a2-highgpu-2g")
    self.assertEqual(machine("NVIDIA_A100_80GB", 8), "a2-ultragpu-8g")
    self.assertEqual(machine("NVIDIA_H100_80GB", 8), "a3-highgpu-8g")
    self.assertEqual(machine("NVIDIA_L4", 1), "g2-standard-4")
    self.assertEqual(machine("NVIDIA_TESLA_T4", 1), "n1-standard-8")
    self.assertEqual(machine("NVIDIA_TESLA_A100", 8, "a2-megagpu-16g"), "a2-megagpu-16g")
    with self.assertRaisesRegex(LaunchError, "cannot host NVIDIA_H100_80GB; drop it, or "
                                "give --machine_type=a3-highgpu-8g"):
      machine("NVIDIA_H100_80GB", 8, "n1-standard-8")
    with self.assertRaisesRegex(LaunchError, "cannot host NVIDIA_A100_80GB"):
      machine("NVIDIA_A100_80GB", 1, "a2-highgpu-1g")
    with self.assertRaisesRegex(LaunchError, "comes 1, 2, 4, 8, 16 to a machine"):
      machine("NVIDIA_TESLA_A100", 3)

  def test_the_docstring_says_a_non_zero_exit_restarts(self):
    said = " ".join(vertex.__doc__.split())
    self.assertIn("any worker that exits non-zero", said)
    self.assertNotIn("fails the job", said)


if __name__ == "__main__":
  absltest.main()
