"""launch/kubernetes.py: the TFJob against the Kubeflow CRD schema and operator rules,
the Service + Indexed Job against the Kubernetes fields, their retry policies against
the trainer's exit statuses, and both manifests against golden files."""

import copy
import dataclasses

from absl.testing import absltest
import yaml

from launch import kubernetes
from launch import retry_budget
from launch.job import IMAGE_WORKDIR
from launch.job import Job
from launch.job import LaunchError
from recipes import errors as trainer_errors
from tests.launch import golden
from tests.launch.k8s_expansion import expand
from tests.launch import schemas

IMAGE = "us-docker.pkg.dev/p/zoo/zoo-gpu:1"
GPU_JOB = Job(name="nfnet-long-tail", recipe="nfnet_long_tail", workers=2,
              model_dir="gs://bucket/runs/nfnet", image=IMAGE,
              accelerator="nvidia-tesla-a100", accelerators_per_worker=2,
              recipe_args=("--gin_bindings=EPOCHS = 3",))
CPU_JOB = Job(name="tiny", recipe="nfnet_long_tail", workers=3, image=IMAGE)
PVC = kubernetes.Options(volume_claim="runs", namespace="ml")
INDEXED = kubernetes.Options(kind="indexed_job", volume_claim="runs")
# The trainer writes to a path: GPU_JOB's gs://bucket/runs/nfnet is mounted.
MOUNTED_GPU_JOB = dataclasses.replace(GPU_JOB, model_dir="/gcs/bucket/runs/nfnet")
GCS_VOLUME = {"name": "gcs", "csi": {
    "driver": "gcsfuse.csi.storage.gke.io",
    "volumeAttributes": {"bucketName": "bucket", "mountOptions": "implicit-dirs"}}}
GCS_MOUNT = {"name": "gcs", "mountPath": "/gcs/bucket"}
GCSFUSE_ANNOTATION = {"gke-gcsfuse/volumes": "true"}
SUBMISSION = "x7k2p9"


def container(replica):
  return replica["template"]["spec"]["containers"][0]


def trainer_command(command):
  """The trainer's argv in a container's command: after launch.retry_budget's `--`."""
  at = command.index("launch.retry_budget")
  return command[command.index("--", at) + 1:]


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
      self.assertEqual(trainer_command(container(replica)["command"]),
                       MOUNTED_GPU_JOB.command())
      self.assertEqual(container(replica)["workingDir"], IMAGE_WORKDIR)
      self.assertEqual(container(replica)["resources"],
                       {"requests": {"cpu": "4", "memory": "16Gi"},
                        "limits": {"memory": "16Gi", "nvidia.com/gpu": 2}})
      self.assertEqual(replica["template"]["spec"]["nodeSelector"],
                       {"cloud.google.com/gke-accelerator": "nvidia-tesla-a100"})
    cpu = kubernetes.tfjob(CPU_JOB, PVC)["spec"]["tfReplicaSpecs"]["Worker"]
    self.assertNotIn("nvidia.com/gpu", container(cpu)["resources"]["limits"])
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

  def test_a_gs_model_dir_is_mounted_with_cloud_storage_fuse(self):
    for replica in kubernetes.tfjob(GPU_JOB)["spec"]["tfReplicaSpecs"].values():
      template = replica["template"]
      self.assertEqual(template["metadata"]["annotations"], GCSFUSE_ANNOTATION)
      self.assertEqual(template["spec"]["volumes"], [GCS_VOLUME])
      self.assertEqual(container(replica)["volumeMounts"], [GCS_MOUNT])
      self.assertIn("--model_dir=/gcs/bucket/runs/nfnet", container(replica)["command"])
      self.assertNotIn("serviceAccountName", template["spec"])
    # On the claim: no bucket, no annotation (GKE injects no sidecar).
    template = kubernetes.tfjob(CPU_JOB, PVC)["spec"]["tfReplicaSpecs"]["Chief"]["template"]
    self.assertNotIn("annotations", template["metadata"])
    self.assertEqual([v["name"] for v in template["spec"]["volumes"]], ["runs"])

  def test_a_gs_model_dir_beside_a_claim(self):
    spec = kubernetes.tfjob(GPU_JOB, PVC)["spec"]["tfReplicaSpecs"]["Chief"]["template"][
        "spec"]
    self.assertEqual(spec["volumes"], [
        {"name": "runs", "persistentVolumeClaim": {"claimName": "runs"}}, GCS_VOLUME])
    self.assertEqual(spec["containers"][0]["volumeMounts"],
                     [{"name": "runs", "mountPath": "/runs"}, GCS_MOUNT])
    self.assertIn("--model_dir=/gcs/bucket/runs/nfnet", spec["containers"][0]["command"])
    for mount in ("/gcs", "/gcs/bucket", "/gcs/bucket/x", "/"):
      with self.assertRaisesRegex(LaunchError, "overlaps /gcs/bucket"):
        kubernetes.tfjob(GPU_JOB, dataclasses.replace(PVC, volume_mount=mount))
    kubernetes.tfjob(GPU_JOB, dataclasses.replace(PVC, volume_mount="/gcs/bucket2"))

  def test_a_malformed_gs_model_dir_is_refused(self):
    for url, message in (("gs://", "'' is not a Cloud Storage bucket name"),
                         ("gs://My_Bucket/x", "'My_Bucket' is not a Cloud Storage bucket"),
                         ("gs://bucket/a/../b", "'.' and '..'")):
      with self.assertRaisesRegex(LaunchError, message):
        kubernetes.tfjob(dataclasses.replace(GPU_JOB, model_dir=url))

  def test_model_dir_every_pod_cannot_reach_is_refused(self):
    local = Job(name="tiny", recipe="nfnet_long_tail", image=IMAGE,
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
    self.assertEqual(step.argv, ("kubectl", "create", "--namespace=ml", "-f",
                                 "{dir}/tfjob.yaml"))
    self.assertEqual(list(yaml.safe_load_all(step.files[0][1])),
                     [kubernetes.tfjob(CPU_JOB, PVC), kubernetes.network_policy(CPU_JOB)])

  def test_golden(self):
    (step,) = kubernetes.steps(dataclasses.replace(GPU_JOB, submission=SUBMISSION))
    golden.check(self, "kubernetes.yaml", step.files[0][1])


class IndexedJobTest(absltest.TestCase):

  def test_valid_against_the_kubernetes_fields(self):
    gcs_only = kubernetes.Options(kind="indexed_job")
    for job, options in ((GPU_JOB, INDEXED), (CPU_JOB, INDEXED), (GPU_JOB, gcs_only)):
      for document in kubernetes.indexed_job(job, options):
        self.assertEqual(schemas.errors("k8s_indexed_job", document), [], document["kind"])

  def test_a_gs_model_dir_is_mounted_with_cloud_storage_fuse(self):
    _, batch_job = kubernetes.indexed_job(GPU_JOB, kubernetes.Options(kind="indexed_job"))
    template = batch_job["spec"]["template"]
    self.assertEqual(template["metadata"]["annotations"], GCSFUSE_ANNOTATION)
    self.assertEqual(template["spec"]["volumes"], [GCS_VOLUME])
    self.assertEqual(template["spec"]["containers"][0]["volumeMounts"], [GCS_MOUNT])
    self.assertEqual(trainer_command(template["spec"]["containers"][0]["command"]),
                     MOUNTED_GPU_JOB.command())

  def test_broken_gcs_volumes_are_rejected(self):
    _, batch_job = kubernetes.indexed_job(GPU_JOB, INDEXED)
    self.assertEqual(schemas.errors("k8s_indexed_job", batch_job), [])
    no_driver = copy.deepcopy(batch_job)
    del no_driver["spec"]["template"]["spec"]["volumes"][1]["csi"]["driver"]
    two_sources = copy.deepcopy(batch_job)
    two_sources["spec"]["template"]["spec"]["volumes"][1]["persistentVolumeClaim"] = {
        "claimName": "runs"}
    no_source = copy.deepcopy(batch_job)
    del no_source["spec"]["template"]["spec"]["volumes"][1]["csi"]
    boolean_annotation = copy.deepcopy(batch_job)
    boolean_annotation["spec"]["template"]["metadata"]["annotations"][
        "gke-gcsfuse/volumes"] = True
    list_attribute = copy.deepcopy(batch_job)
    list_attribute["spec"]["template"]["spec"]["volumes"][1]["csi"]["volumeAttributes"][
        "mountOptions"] = ["implicit-dirs"]
    for broken in (no_driver, two_sources, no_source, boolean_annotation, list_attribute):
      self.assertNotEqual(schemas.errors("k8s_indexed_job", broken), [])
    tfjob = kubernetes.tfjob(GPU_JOB)
    del tfjob["spec"]["tfReplicaSpecs"]["Chief"]["template"]["spec"]["volumes"][0]["csi"][
        "driver"]
    self.assertNotEqual(schemas.errors("tfjob", tfjob), [])

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
    self.assertEqual(trainer_command(command),
                     dataclasses.replace(CPU_JOB, model_dir="/runs/tiny").command())

  def test_retries_per_index_and_fails_on_the_trainers_fatal_statuses(self):
    spec = kubernetes.indexed_job(GPU_JOB, INDEXED)[1]["spec"]
    # backoffLimitPerIndex and podFailurePolicy need restartPolicy Never.
    self.assertEqual(spec["template"]["spec"]["restartPolicy"], "Never")
    self.assertEqual((spec["backoffLimitPerIndex"], spec["maxFailedIndexes"]), (3, 0))
    fail, ignore, _ = spec["podFailurePolicy"]["rules"]
    self.assertEqual(fail["action"], "FailJob")
    self.assertEqual(fail["onExitCodes"]["values"],
                     [trainer_errors.EXIT_BAD_INPUT, trainer_errors.EXIT_DIVERGED,
                      retry_budget.EXIT_RETRIES_SPENT])
    self.assertNotIn(trainer_errors.EXIT_PREEMPTED, fail["onExitCodes"]["values"])
    self.assertEqual(ignore, {"action": "Ignore", "onPodConditions": [
        {"type": "DisruptionTarget", "status": "True"}]})

  def test_golden(self):
    job = dataclasses.replace(CPU_JOB, submission=SUBMISSION)
    (step,) = kubernetes.steps(job, INDEXED)
    self.assertEqual(step.argv, ("kubectl", "create", "-f", "{dir}/indexed_job.yaml"))
    self.assertEqual(list(yaml.safe_load_all(step.files[0][1])),
                     [*kubernetes.indexed_job(job, INDEXED), kubernetes.network_policy(job)])
    golden.check(self, "kubernetes_indexed_job.yaml", step.files[0][1])


class ReachTest(absltest.TestCase):
  """Issue 57: TensorFlow's gRPC server answers anyone who reaches its port, so each
  manifest admits to the job's pods only the job's own pods; every container runs
  without privilege escalation or capabilities."""

  def manifests(self):
    for kind, options in (("tfjob", PVC), ("indexed_job", INDEXED)):
      (step,) = kubernetes.steps(CPU_JOB, options)
      yield kind, list(yaml.safe_load_all(step.files[0][1]))

  def test_only_the_jobs_own_pods_reach_a_worker(self):
    for kind, documents in self.manifests():
      policies = [d for d in documents if d["kind"] == "NetworkPolicy"]
      self.assertLen(policies, 1, kind)
      policy = policies[0]
      self.assertEqual(schemas.errors("k8s_network_policy", policy), [], kind)
      pods = [d for d in documents if d["kind"] in ("TFJob", "Job")][0]
      templates = ([r["template"] for r in pods["spec"]["tfReplicaSpecs"].values()]
                   if kind == "tfjob" else [pods["spec"]["template"]])
      selector = policy["spec"]["podSelector"]["matchLabels"]
      for template in templates:  # the policy isolates every pod of the job
        self.assertLessEqual(selector.items(), template["metadata"]["labels"].items())
      self.assertEqual(policy["spec"]["policyTypes"], ["Ingress"])
      # One rule: from the job's pods (every port); anything else is refused.
      self.assertEqual(policy["spec"]["ingress"],
                       [{"from": [{"podSelector": {"matchLabels": selector}}]}])
      other = dataclasses.replace(CPU_JOB, submission="other1")
      self.assertNotEqual(kubernetes.network_policy(other)["spec"]["podSelector"],
                          policy["spec"]["podSelector"])  # one job's pods, not another's

  def test_the_schema_rejects_a_broken_policy(self):
    policy = kubernetes.network_policy(CPU_JOB)
    misspelt = copy.deepcopy(policy)
    misspelt["spec"]["ingress"][0]["form"] = misspelt["spec"]["ingress"][0].pop("from")
    bad_type = copy.deepcopy(policy)
    bad_type["spec"]["policyTypes"] = ["ingress"]
    both = copy.deepcopy(policy)
    both["spec"]["ingress"][0]["from"][0]["ipBlock"] = {"cidr": "10.0.0.0/8"}
    for broken in (misspelt, bad_type, both):
      self.assertNotEqual(schemas.errors("k8s_network_policy", broken), [])

  def test_every_container_drops_privileges(self):
    want = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]},
            "seccompProfile": {"type": "RuntimeDefault"}}
    for kind, documents in self.manifests():
      for document in documents:
        if document["kind"] == "TFJob":
          for replica in document["spec"]["tfReplicaSpecs"].values():
            self.assertEqual(container(replica)["securityContext"], want, kind)
          self.assertEqual(schemas.errors("tfjob", document), [])
        elif document["kind"] == "Job":
          self.assertEqual(document["spec"]["template"]["spec"]["containers"][0][
              "securityContext"], want, kind)
          self.assertEqual(schemas.errors("k8s_indexed_job", document), [])


def qos_class(pod_spec):
  """The pod's QoS class (Kubernetes' rules, containers only): BestEffort without any
  cpu or memory request or limit; Guaranteed when every container's requests equal its
  limits for both; else Burstable."""
  resources = [c.get("resources", {}) for c in pod_spec["containers"]]
  given = lambda r: {k: v for k, v in r.items() if k in ("cpu", "memory")}
  if not any(given(r.get("requests", {})) or given(r.get("limits", {})) for r in resources):
    return "BestEffort"
  if all(given(r.get("limits", {})) == {**given(r.get("limits", {})),
                                        **given(r.get("requests", {}))} and
         len(given(r.get("limits", {}))) == 2 for r in resources):
    return "Guaranteed"
  return "Burstable"


def pod_failure_action(policy, exit_code, disrupted):
  """What a Job's podFailurePolicy does with a failed pod (the first matching rule;
  "Count" where none matches): the pod's `tensorflow` container exited `exit_code`,
  and it has the DisruptionTarget condition when `disrupted`."""
  for rule in policy["rules"]:
    codes = rule.get("onExitCodes")
    if codes and (exit_code in codes["values"]) == (codes["operator"] == "In"):
      return rule["action"]
    for condition in rule.get("onPodConditions", ()):
      if condition["type"] == "DisruptionTarget" and disrupted:
        return rule["action"]
  return "Count"


class EngineDefectsTest(absltest.TestCase):
  """Issue 21's Kubernetes defects, each as the property the engine relies on."""

  def test_a_dollar_in_a_binding_reaches_the_trainer_unchanged(self):
    binding = "--gin_bindings=NOTE = '$(ZOO_JOB_NAME) costs $$5, $HOME'"
    job = dataclasses.replace(CPU_JOB, recipe_args=(binding,))
    for kind in kubernetes.KINDS:
      manifest = kubernetes.manifest(job, dataclasses.replace(PVC, kind=kind))[1]
      for document in yaml.safe_load_all(manifest):
        if document["kind"] in ("Service", "NetworkPolicy"):
          continue
        spec = (document["spec"]["template"]["spec"] if kind == "indexed_job" else
                document["spec"]["tfReplicaSpecs"]["Chief"]["template"]["spec"])
        env = {e["name"]: e["value"] for e in spec["containers"][0].get("env", ())}
        argv = [expand(a, env) for a in spec["containers"][0]["command"]]
        self.assertIn(binding, argv, kind)
        self.assertIn("--model_dir=/runs/tiny", argv, kind)

  def test_every_worker_requests_cpu_and_memory(self):
    sized = dataclasses.replace(PVC, cpu="500m", memory="2Gi")
    tfjob = kubernetes.tfjob(CPU_JOB, sized)
    pods = [r["template"]["spec"] for r in tfjob["spec"]["tfReplicaSpecs"].values()]
    pods.append(kubernetes.indexed_job(CPU_JOB, INDEXED)[1]["spec"]["template"]["spec"])
    for pod in pods:
      self.assertNotEqual(qos_class(pod), "BestEffort")
    self.assertEqual(pods[0]["containers"][0]["resources"]["requests"],
                     {"cpu": "500m", "memory": "2Gi"})
    for cpu, memory in (("0", "1Gi"), ("two", "1Gi"), ("1", "-1Gi"), ("1", "1 Gi")):
      with self.assertRaisesRegex(LaunchError, "not a positive Kubernetes quantity"):
        kubernetes.tfjob(CPU_JOB, dataclasses.replace(PVC, cpu=cpu, memory=memory))

  def test_each_submission_is_a_new_job_and_the_run_keeps_its_directory(self):
    first, second = (dataclasses.replace(CPU_JOB, submission=s) for s in ("aaaaa1", "bbbbb2"))
    for kind in kubernetes.KINDS:
      options = dataclasses.replace(PVC, kind=kind)
      names, dirs = [], []
      for job in (first, second):
        documents = list(yaml.safe_load_all(kubernetes.manifest(job, options)[1]))
        names.append({d["metadata"]["name"] for d in documents})
        text = kubernetes.manifest(job, options)[1]
        dirs.append(text.count("--model_dir=/runs/tiny"))
      self.assertEqual(names, [{"tiny-aaaaa1"}, {"tiny-bbbbb2"}], kind)
      self.assertEqual(dirs[0], dirs[1])
      self.assertGreater(dirs[0], 0)
    (step,) = kubernetes.steps(first, PVC)
    self.assertEqual(step.argv[:2], ("kubectl", "create"))

  def test_a_peers_preemption_uses_no_retry_and_fatal_codes_fail_at_once(self):
    policy = kubernetes.indexed_job(CPU_JOB, INDEXED)[1]["spec"]["podFailurePolicy"]
    # The preempted pod, and its peers that saved with it (no DisruptionTarget).
    self.assertEqual(pod_failure_action(policy, 143, disrupted=True), "Ignore")
    self.assertEqual(pod_failure_action(policy, 143, disrupted=False), "Ignore")
    self.assertEqual(pod_failure_action(policy, 137, disrupted=False), "Count")
    self.assertEqual(pod_failure_action(policy, trainer_errors.EXIT_PEER_LOST,
                                        disrupted=False), "Count")
    for fatal in (trainer_errors.EXIT_BAD_INPUT, trainer_errors.EXIT_DIVERGED,
                  retry_budget.EXIT_RETRIES_SPENT):
      self.assertEqual(pod_failure_action(policy, fatal, disrupted=False), "FailJob")

  def test_spot_selects_gke_spot_nodes(self):
    spot = dataclasses.replace(PVC, spot=True)
    pods = [r["template"]["spec"] for r in
            kubernetes.tfjob(GPU_JOB, spot)["spec"]["tfReplicaSpecs"].values()]
    pods.append(kubernetes.indexed_job(CPU_JOB, dataclasses.replace(INDEXED, spot=True))[1][
        "spec"]["template"]["spec"])
    self.assertEqual(pods[0]["nodeSelector"], {
        "cloud.google.com/gke-accelerator": "nvidia-tesla-a100",
        "cloud.google.com/gke-spot": "true"})
    self.assertEqual(pods[-1]["nodeSelector"], {"cloud.google.com/gke-spot": "true"})
    self.assertNotIn("nodeSelector", kubernetes.tfjob(CPU_JOB, PVC)["spec"][
        "tfReplicaSpecs"]["Chief"]["template"]["spec"])

  def test_backoff_limit_bounds_the_restarts_of_every_worker(self):
    """ExitCode re-creates pods without counting: each container runs the retry budget
    with --backoff_limit, whose exit (4) ExitCode treats as permanent."""
    options = dataclasses.replace(PVC, backoff_limit=5)
    replicas = kubernetes.tfjob(CPU_JOB, options)["spec"]["tfReplicaSpecs"]
    for replica in replicas.values():
      self.assertEqual(replica["restartPolicy"], "ExitCode")
      command = container(replica)["command"]
      self.assertEqual(command[:7], ["python3", "-m", "launch.retry_budget", "--limit=5",
                                     "--model_dir=/runs/tiny", "--ledger=tiny", "--"])
    self.assertLess(retry_budget.EXIT_RETRIES_SPENT, 128)  # not retried by ExitCode
    self.assertGreaterEqual(trainer_errors.EXIT_PEER_LOST, 128)  # retried


if __name__ == "__main__":
  absltest.main()
