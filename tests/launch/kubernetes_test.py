"""launch/kubernetes.py: the TFJob against the Kubeflow CRD schema and operator rules,
the Service + Indexed Job against the Kubernetes fields, their retry policies against
the trainer's exit statuses, and both manifests against golden files."""

import copy
import dataclasses

from absl.testing import absltest
import yaml

from launch import kubernetes
from launch.job import IMAGE_WORKDIR
from launch.job import Job
from launch.job import LaunchError
from recipes import errors as trainer_errors
from tests.launch import golden
from tests.launch import schemas

IMAGE = "us-docker.pkg.dev/p/zoo/zoo-gpu:1"
GPU_JOB = Job(name="nfnet-long-tail", recipe="nfnet_long_tail", workers=2,
              model_dir="gs://bucket/runs/nfnet", image=IMAGE,
              accelerator="nvidia-tesla-a100", accelerators_per_worker=2,
              recipe_args=("--gin_bindings=EPOCHS = 3",))
CPU_JOB = Job(name="tiny", recipe="nfnet_long_tail_tiny", workers=3, image=IMAGE)
PVC = kubernetes.Options(volume_claim="runs", namespace="ml")
INDEXED = kubernetes.Options(kind="indexed_job", volume_claim="runs")


def container(replica):
  return replica["template"]["spec"]["containers"][0]


class TFJobTest(absltest.TestCase):

  def test_valid_against_the_crd_schema_and_the_operator(self):
    for job, options in ((GPU_JOB, kubernetes.Options()), (CPU_JOB, PVC),
                         (Job(name="one", recipe="nfnet_long_tail", image=IMAGE), PVC)):
      manifest = kubernetes.tfjob(job, options)
      self.assertEqual(schemas.errors("tfjob", manifest), [], job)
      self.assertEqual(schemas.tfjob_operator_errors(manifest), [], job)

  def test_broken_manifests_are_rejected(self):
    manifest = kubernetes.tfjob(GPU_JOB)
    wrong_type = copy.deepcopy(manifest)
    wrong_type["spec"]["tfReplicaSpecs"]["Worker"]["replicas"] = "one"
    misspelt = copy.deepcopy(manifest)
    misspelt["spec"]["runPolicy"]["backofLimit"] = 3
    bad_quantity = copy.deepcopy(manifest)
    container(bad_quantity["spec"]["tfReplicaSpecs"]["Chief"])["resources"]["limits"][
        "nvidia.com/gpu"] = "two"
    for broken in (wrong_type, misspelt, bad_quantity):
      self.assertNotEqual(schemas.errors("tfjob", broken), [])
    renamed = copy.deepcopy(manifest)
    container(renamed["spec"]["tfReplicaSpecs"]["Chief"])["name"] = "trainer"
    self.assertEqual(schemas.tfjob_operator_errors(renamed),
                     ["tfReplicaSpecs.Chief has no container named tensorflow"])

  def test_one_chief_and_the_other_workers(self):
    replicas = kubernetes.tfjob(GPU_JOB)["spec"]["tfReplicaSpecs"]
    self.assertEqual({k: r["replicas"] for k, r in replicas.items()},
                     {"Chief": 1, "Worker": 1})
    alone = kubernetes.tfjob(Job(name="one", recipe="nfnet_long_tail", image=IMAGE,
                                 model_dir="gs://b/one"))
    self.assertEqual(list(alone["spec"]["tfReplicaSpecs"]), ["Chief"])

  def test_every_replica_runs_the_job_command(self):
    for replica in kubernetes.tfjob(GPU_JOB)["spec"]["tfReplicaSpecs"].values():
      self.assertEqual(container(replica)["name"], "tensorflow")
      self.assertEqual(container(replica)["command"], GPU_JOB.command())
      self.assertEqual(container(replica)["workingDir"], IMAGE_WORKDIR)
      self.assertEqual(container(replica)["resources"],
                       {"limits": {"nvidia.com/gpu": 2}})
      self.assertEqual(replica["template"]["spec"]["nodeSelector"],
                       {"cloud.google.com/gke-accelerator": "nvidia-tesla-a100"})
    cpu = kubernetes.tfjob(CPU_JOB, PVC)["spec"]["tfReplicaSpecs"]["Worker"]
    self.assertNotIn("resources", container(cpu))
    self.assertNotIn("nodeSelector", cpu["template"]["spec"])

  def test_exit_code_policy_retries_preemption_only(self):
    # training-operator v1.9.0 IsRetryableExitCode: exitCode >= 128.
    def retried(code):
      return code >= 128

    manifest = kubernetes.tfjob(GPU_JOB)
    for replica in manifest["spec"]["tfReplicaSpecs"].values():
      self.assertEqual(replica["restartPolicy"], "ExitCode")
    self.assertTrue(retried(trainer_errors.EXIT_PREEMPTED))
    self.assertFalse(retried(trainer_errors.EXIT_BAD_INPUT))
    self.assertFalse(retried(trainer_errors.EXIT_DIVERGED))
    self.assertEqual(manifest["spec"]["runPolicy"],
                     {"backoffLimit": 3, "cleanPodPolicy": "Running"})

  def test_model_dir_on_the_claim(self):
    manifest = kubernetes.tfjob(CPU_JOB, PVC)
    spec = manifest["spec"]["tfReplicaSpecs"]["Chief"]["template"]["spec"]
    self.assertIn("--model_dir=/runs/tiny", spec["containers"][0]["command"])
    self.assertEqual(spec["containers"][0]["volumeMounts"],
                     [{"name": "runs", "mountPath": "/runs"}])
    self.assertEqual(spec["volumes"],
                     [{"name": "runs", "persistentVolumeClaim": {"claimName": "runs"}}])

  def test_model_dir_every_pod_cannot_reach_is_refused(self):
    local = Job(name="tiny", recipe="nfnet_long_tail_tiny", image=IMAGE,
                model_dir="/tmp/runs")
    with self.assertRaisesRegex(LaunchError, "gs:// path, or --volume_claim"):
      kubernetes.tfjob(local)
    with self.assertRaisesRegex(LaunchError, "not on the volume.*/runs"):
      kubernetes.tfjob(local, PVC)

  def test_bad_options_are_refused(self):
    with self.assertRaisesRegex(LaunchError, "--k8s_kind='pytorchjob'"):
      kubernetes.steps(GPU_JOB, kubernetes.Options(kind="pytorchjob"))
    with self.assertRaisesRegex(LaunchError, "--accelerators_per_worker >= 1"):
      kubernetes.tfjob(Job(name="t", recipe="nfnet_long_tail", image=IMAGE,
                           model_dir="gs://b/t", accelerator="nvidia-tesla-t4"))
    with self.assertRaisesRegex(LaunchError, "needs an image"):
      kubernetes.tfjob(Job(name="t", recipe="nfnet_long_tail", model_dir="gs://b/t"))

  def test_applied_with_kubectl(self):
    (step,) = kubernetes.steps(CPU_JOB, PVC)
    self.assertEqual(step.argv, ("kubectl", "apply", "--namespace=ml", "-f",
                                 "{dir}/tfjob.yaml"))
    self.assertEqual(yaml.safe_load(step.files[0][1]), kubernetes.tfjob(CPU_JOB, PVC))

  def test_golden(self):
    (step,) = kubernetes.steps(GPU_JOB)
    golden.check(self, "kubernetes.yaml", step.files[0][1])


class IndexedJobTest(absltest.TestCase):

  def test_valid_against_the_kubernetes_fields(self):
    for job in (GPU_JOB, CPU_JOB):
      for document in kubernetes.indexed_job(job, INDEXED):
        self.assertEqual(schemas.errors("k8s_indexed_job", document), [], document["kind"])

  def test_broken_manifests_are_rejected(self):
    _, batch_job = kubernetes.indexed_job(CPU_JOB, INDEXED)
    bad_mode = copy.deepcopy(batch_job)
    bad_mode["spec"]["completionMode"] = "indexed"
    bad_action = copy.deepcopy(batch_job)
    bad_action["spec"]["podFailurePolicy"]["rules"][0]["action"] = "Retry"
    misspelt = copy.deepcopy(batch_job)
    misspelt["spec"]["template"]["spec"]["subDomain"] = "tiny"
    for broken in (bad_mode, bad_action, misspelt):
      self.assertNotEqual(schemas.errors("k8s_indexed_job", broken), [])

  def test_the_pods_are_the_services_workers(self):
    service, batch_job = kubernetes.indexed_job(CPU_JOB, INDEXED)
    spec, pod = batch_job["spec"], batch_job["spec"]["template"]
    self.assertEqual(service["spec"]["clusterIP"], "None")
    self.assertLessEqual(service["spec"]["selector"].items(),
                         pod["metadata"]["labels"].items())
    self.assertEqual(pod["spec"]["subdomain"], service["metadata"]["name"])
    self.assertEqual((spec["completionMode"], spec["completions"], spec["parallelism"]),
                     ("Indexed", 3, 3))
    env = dict((e["name"], e["value"]) for e in pod["spec"]["containers"][0]["env"])
    self.assertEqual(env, {"ZOO_JOB_NAME": "tiny", "ZOO_JOB_SERVICE": "tiny",
                           "ZOO_JOB_WORKERS": "3", "ZOO_JOB_PORT": "2222"})
    command = pod["spec"]["containers"][0]["command"]
    self.assertEqual(command[:4], ["python3", "-m", "launch.indexed_worker", "--"])
    self.assertEqual(command[4:],
                     dataclasses.replace(CPU_JOB, model_dir="/runs/tiny").command())

  def test_retries_per_index_and_fails_on_the_trainers_fatal_statuses(self):
    spec = kubernetes.indexed_job(GPU_JOB, INDEXED)[1]["spec"]
    # backoffLimitPerIndex and podFailurePolicy need restartPolicy Never.
    self.assertEqual(spec["template"]["spec"]["restartPolicy"], "Never")
    self.assertEqual((spec["backoffLimitPerIndex"], spec["maxFailedIndexes"]), (3, 0))
    fail, ignore = spec["podFailurePolicy"]["rules"]
    self.assertEqual(fail["action"], "FailJob")
    self.assertEqual(fail["onExitCodes"]["values"],
                     [trainer_errors.EXIT_BAD_INPUT, trainer_errors.EXIT_DIVERGED])
    self.assertNotIn(trainer_errors.EXIT_PREEMPTED, fail["onExitCodes"]["values"])
    self.assertEqual(ignore, {"action": "Ignore", "onPodConditions": [
        {"type": "DisruptionTarget", "status": "True"}]})

  def test_golden(self):
    (step,) = kubernetes.steps(CPU_JOB, INDEXED)
    self.assertEqual(step.argv, ("kubectl", "apply", "-f", "{dir}/indexed_job.yaml"))
    self.assertEqual(list(yaml.safe_load_all(step.files[0][1])),
                     list(kubernetes.indexed_job(CPU_JOB, INDEXED)))
    golden.check(self, "kubernetes_indexed_job.yaml", step.files[0][1])


if __name__ == "__main__":
  absltest.main()
