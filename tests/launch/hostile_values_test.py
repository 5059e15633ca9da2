"""Hostile values in every launcher input that reaches a shell or a manifest, for the
Kubernetes, Vertex AI and TPU VM backends: each is refused with a LaunchError, or
arrives as one unchanged word. "Arrives" is checked for real: every shell command the
launcher writes (the TPU hosts' ssh commands, the Dockerfile's RUN line, the dry run's
commands and the printed next steps) runs in bash with stand-in tools, in an empty
directory, and must not run the injected `touch PWNED` nor redirect into a file;
manifests must read back with the value unchanged (after Kubernetes' `$` expansion)."""

import dataclasses
import os
import shlex
import shutil
import subprocess

from absl.testing import absltest
from absl.testing import parameterized
import yaml

from launch import kubernetes
from launch import next_steps
from launch import submit
from launch import tpu_vm
from launch import vertex
from launch.job import Job
from launch.job import LaunchError
from tests.launch.k8s_expansion import expand

BASH = shutil.which("bash") or "/bin/bash"
HOSTILE = ("$(touch PWNED)", "`touch PWNED`", "x;touch PWNED", "x' ;touch PWNED;'",
           "x\ntouch PWNED", "x|touch PWNED", "x&&touch PWNED", "x>PWNED",
           "$(ZOO_JOB_NAME)$$x", "-x --privileged")
# Tools the commands call, as stand-ins that do nothing (sudo runs its command).
TOOLS = ("docker", "gcloud", "kubectl", "gcsfuse", "mountpoint", "curl", "apt-get", "tee",
         "lsb_release", "mkdir", "xargs", "python3", "tensorboard", "squeue", "sacct",
         "scancel", "tail")

JOBS = {
    "kubernetes": Job(name="tiny", recipe="nfnet_long_tail", workers=2,
                      model_dir="gs://bucket/runs/tiny", image="r/zoo-cpu:1",
                      submission="abc123"),
    "vertex": Job(name="tiny", recipe="nfnet_long_tail", workers=2,
                  model_dir="gs://bucket/runs/tiny", image="r/zoo-cpu:1",
                  submission="abc123"),
    "tpu_vm": Job(name="tiny", recipe="nfnet_long_tail", model_dir="gs://bucket/runs/tiny",
                  image="r/zoo-cpu:1", accelerator="v4-8", submission="abc123"),
}
OPTIONS = {
    "kubernetes": kubernetes.Options(namespace="ml"),
    "vertex": vertex.Options(region="us-central1", project="my-project"),
    "tpu_vm": tpu_vm.Options(tpu_name="my-tpu", zone="us-central2-b", project="my-project",
                             create=True),
}
STEPS = {"kubernetes": kubernetes.steps, "vertex": vertex.steps, "tpu_vm": tpu_vm.steps}
JOB_FIELDS = ("name", "image", "model_dir", "recipe_args", "accelerator", "machine_type")
OPTION_FIELDS = {
    "kubernetes": ("namespace", "volume_claim", "volume_mount", "accelerator_label", "cpu",
                   "memory"),
    "vertex": ("region", "project", "service_account", "tensorboard"),
    "tpu_vm": ("tpu_name", "zone", "project", "runtime_version", "packages"),
}
CASES = [(f"{backend}_{field}", backend, field)
         for backend in STEPS for field in JOB_FIELDS + OPTION_FIELDS[backend]]


def with_value(backend, field, value):
  """(job, options) with `field` set to `value` (a recipe flag, a gs:// path)."""
  job, options = JOBS[backend], OPTIONS[backend]
  if field == "recipe_args":
    return dataclasses.replace(job, recipe_args=(f"--gin_bindings=NOTE = '{value}'",)), \
        options
  if field == "model_dir":
    value = f"gs://bucket/{value}"
  if field in JOB_FIELDS:
    extra = {"accelerators_per_worker": 1} if field == "accelerator" and \
        backend != "tpu_vm" else {}
    return dataclasses.replace(job, **{field: value}, **extra), options
  return job, dataclasses.replace(options, **{field: value})


def shell_commands(steps, text):
  """Every command line a shell runs: the dry run's, the hosts' ssh --command values,
  the Dockerfile's RUN lines, and the next steps' commands."""
  commands = [line[2:] for line in submit.render(steps).splitlines()
              if line.startswith("$ ")]
  for step in steps:
    commands += [a[len("--command="):] for a in step.argv if a.startswith("--command=")]
    for _, content in step.files:
      if content.startswith("FROM "):
        commands.append(content.split("RUN ", 1)[1].split("\nWORKDIR")[0]
                        .replace("\\\n", " "))
  commands += [line[4:] for line in text.splitlines() if line.startswith("  $ ")]
  return commands


class HostileValuesTest(parameterized.TestCase):

  def setUp(self):
    super().setUp()
    self.tools = tools = self.create_tempdir().full_path
    for name in TOOLS:
      path = os.path.join(tools, name)
      with open(path, "w") as f:
        f.write("#!/bin/sh\nexit 0\n")
      os.chmod(path, 0o755)
    with open(os.path.join(tools, "sudo"), "w") as f:
      f.write('#!/bin/sh\nexec "$@"\n')
    os.chmod(os.path.join(tools, "sudo"), 0o755)
    os.symlink(shutil.which("touch"), os.path.join(tools, "touch"))

  def run_in_bash(self, command):
    """`command` in bash with stand-in tools and a real `touch`, in an empty directory;
    the directory's contents afterwards."""
    tools, here = self.tools, self.create_tempdir().full_path
    subprocess.run([BASH, "-c", command], cwd=here, env={"PATH": tools},
                   capture_output=True, timeout=30, check=False)
    return os.listdir(here)

  def arrives_unchanged_in_manifests(self, backend, steps, value):
    for step in steps:
      for name, content in step.files:
        if not name.endswith(".yaml"):
          continue
        for document in yaml.safe_load_all(content):
          text = yaml.safe_dump(document)
          self.assertNotIn("PWNED:", text)  # no key injected into the YAML
    if backend == "kubernetes":  # after Kubernetes' expansion of `$`
      tfjob, = [d for d in yaml.safe_load_all(steps[0].files[0][1]) if d["kind"] == "TFJob"]
      container = tfjob["spec"]["tfReplicaSpecs"]["Chief"]["template"]["spec"][
          "containers"][0]
      argv = [expand(a, {}) for a in container["command"]]
      self.assertIn(f"--gin_bindings=NOTE = '{value}'", argv)

  @parameterized.named_parameters(*CASES)
  def test_refused_or_one_unchanged_word(self, backend, field):
    for value in HOSTILE:
      try:
        job, options = with_value(backend, field, value)
        steps = STEPS[backend](job, options)
        text = next_steps.text(backend, job, options)
      except LaunchError as e:
        self.assertNotIn("\n", str(e), f"{field}={value!r}: not one line")
        continue
      for command in shell_commands(steps, text):
        self.assertEqual(self.run_in_bash(command), [], f"{field}={value!r}: {command}")
      if field == "recipe_args":
        self.arrives_unchanged_in_manifests(backend, steps, value)
        for command in shell_commands(steps, ""):
          if command.startswith("sudo docker ps") and "recipes.train" in command:
            run = command[command.index("sudo docker run"):]
            self.assertIn(f"--gin_bindings=NOTE = '{value}'", shlex.split(run))


if __name__ == "__main__":
  absltest.main()
