"""launch.job: what a launch is, the command every worker runs, and the bucket mount
a gs:// model_dir becomes."""

from absl.testing import absltest
from absl.testing import parameterized

from launch import job as job_lib


class JobTest(parameterized.TestCase):

  def test_every_worker_runs_the_recipe_entry(self):
    job = job_lib.Job("nfnet-lt", "nfnet_long_tail", workers=2, model_dir="/runs/x",
                      recipe_args=("--gin_bindings=EPOCHS = 3",))
    self.assertEqual(job.gin_file, "recipes/nfnet_long_tail.gin")
    self.assertEqual(job.command(), [
        "python3", "-m", "recipes.train", "--gin_file=recipes/nfnet_long_tail.gin",
        "--strategy=multi_worker_mirrored", "--model_dir=/runs/x",
        "--gin_bindings=EPOCHS = 3"])
    self.assertEqual(job.command("tpu", extra=["--tpu=local"], python="py")[:1], ["py"])
    self.assertIn("--tpu=local", job.train_args("tpu", ["--tpu=local"]))
    self.assertNotIn("--model_dir=", " ".join(job_lib.Job("a", "b").train_args()))

  @parameterized.parameters(
      ("gs://my-bucket/runs/x", ("my-bucket", "runs/x"), "/gcs/my-bucket/runs/x"),
      ("gs://b_1.x//runs//x/", ("b_1.x", "runs/x"), "/gcs/b_1.x/runs/x"),
      ("gs://my-bucket", ("my-bucket", ""), "/gcs/my-bucket"),
      ("/shared/runs/x", None, "/shared/runs/x"))
  def test_bucket_mount(self, model_dir, parts, path):
    self.assertEqual(job_lib.bucket_and_path(model_dir), parts)
    self.assertEqual(job_lib.mounted(model_dir), path)

  @parameterized.parameters(
      (dict(name="Nfnet"), "--name='Nfnet' is not a valid job name"),
      (dict(name="x" * 49), "at most 48 characters"),
      (dict(recipe="../etc"), "is not a recipe name"),
      (dict(workers=0), "--workers=0 must be a whole number >= 1"),
      (dict(workers=True), "--workers=True must be"),
      (dict(accelerators_per_worker=-1), "--accelerators_per_worker=-1 must be"))
  def test_bad_jobs(self, change, message):
    settings = dict(name="ok", recipe="nfnet_long_tail")
    settings.update(change)
    with self.assertRaisesRegex(job_lib.LaunchError, message):
      job_lib.Job(**settings)

  @parameterized.parameters(("gs://My_Bucket/x", "is not a Cloud Storage bucket name"),
                            ("gs:///x", "is not a Cloud Storage bucket name"),
                            ("gs://b/runs/../x", "'.' and '..' are not folders"))
  def test_bad_buckets(self, model_dir, message):
    with self.assertRaisesRegex(job_lib.LaunchError, message):
      job_lib.mounted(model_dir)


if __name__ == "__main__":
  absltest.main()
