"""`bazel run //launch -- --backend=B --recipe=R [flags] [-- recipe flags]`: one recipe
on a cluster engine, or as local worker processes.

    --backend       local | kubernetes | vertex | tpu_vm | slurm
    --recipe        the recipe (recipes/<recipe>.gin), e.g. nfnet_long_tail
    --workers       processes training together (multi_worker_mirrored); default 1
    --name          the job's name on the engine; default the recipe's, '_' -> '-'
    --model_dir     where the run is written, reachable from every worker: a shared
                    path, or gs://BUCKET/PATH (kubernetes, vertex, tpu_vm), which the
                    trainer sees at the bucket's Cloud Storage FUSE mount,
                    /gcs/BUCKET/PATH
    --image         the container image; default <--registry>/<tag built by
                    //launch/image:cpu or :gpu> (GPU image with --accelerators_per_worker);
                    REPO@sha256:<digest> pins it (a tag is mutable: the launcher warns)
    --accelerator, --accelerators_per_worker, --machine_type: what a worker runs on
    --dry_run       print what would be submitted (each file, then the command); run nothing
    --submission_id the suffix of this submission's engine name, <name>-<id>; default
                    a fresh random one, so every launch is a new engine job (the run,
                    its model_dir, keeps --name and resumes)
and each backend's options (--helpfull lists them): kubernetes --k8s_kind,
--namespace, --volume_claim, --volume_mount, --backoff_limit, --accelerator_label,
--k8s_cpu, --k8s_memory, --spot; vertex --project, --region, --spot, --vertex_timeout_hours,
--service_account, --vertex_tensorboard; tpu_vm --project, --zone, --tpu_name,
--tpu_create, --spot, --tpu_runtime_version, --tpu_packages; slurm --slurm_partition, --slurm_time,
--slurm_account, --slurm_workdir, --slurm_setup, --slurm_container_mounts,
--slurm_tasks_per_node, --slurm_cpus_per_task, --slurm_mem, --slurm_exclusive,
--slurm_signal_seconds.

    --status=JOB, --cancel=JOB (with --backend=local or slurm): a submitted job's
                    state, or an end to it (JOB: the id the local launch printed, or
                    sbatch's job id)


Recipe flags (--gin_bindings=..., more --gin_file=...; each --flag=value) follow a
literal `--`, after the launcher's own: `bazel run //launch -- --backend=vertex
--recipe=nfnet_long_tail_full ... -- --gin_bindings="DATA_DIR = '/gcs/bucket/tfds'"` (Vertex mounts buckets there).
The launcher sets --strategy, --model_dir, --tpu and --cluster itself.

A cluster backend submits with kubectl, gcloud or sbatch, which must be on PATH; after
a submission it prints the job's name and the engine's commands for its status, logs
and cancelling, and TensorBoard's --logdir (launch/next_steps.py). Bad
input ends with one line on stderr, `error: <problem and fix>`, and exit status 2; a
failing submission command exits with its status.
"""

import dataclasses
import os
import subprocess
import sys

from absl import app
from absl import flags

from launch import kubernetes
from launch import local
from launch import next_steps
from launch import slurm
from launch import submit
from launch import tpu_vm
from launch import vertex
from launch.job import Job
from launch.job import LaunchError
from launch.job import image_line
from launch.job import new_submission
from launch.job import Step

EXIT_BAD_INPUT = 2
BACKENDS = ("local", "kubernetes", "vertex", "tpu_vm", "slurm")
# Flags the launcher gives recipes.train itself.
_OWN_RECIPE_FLAGS = ("--strategy", "--model_dir", "--tpu", "--cluster", "--cpu_replicas")
# The runfiles (or source) root: recipes/*.gin and launch/image/*_image.txt are here.
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def roots():
  """Where workspace files are looked for: the runfiles, then (under `bazel run`) the
  workspace and its bazel-bin, for files the binary's data does not carry."""
  found = [ROOT]
  workspace = os.environ.get("BUILD_WORKSPACE_DIRECTORY")
  if workspace:
    found += [workspace, os.path.join(workspace, "bazel-bin")]
  return found

FLAGS = flags.FLAGS
flags.DEFINE_enum("backend", None, BACKENDS, "Where the workers run.")
flags.DEFINE_string("recipe", None, "The recipe: recipes/<recipe>.gin.")
flags.DEFINE_integer("workers", 1, "Processes that train together.")
flags.DEFINE_string("name", None, "The job's name; default the recipe's, '_' -> '-'.")
flags.DEFINE_string("model_dir", "", "Where the run is written: a path every worker "
                    "reaches, or gs://BUCKET/PATH (mounted at /gcs/BUCKET/PATH).")
flags.DEFINE_string("image", None, "Container image; default <--registry>/<built tag>.")
flags.DEFINE_string("registry", None, "Registry of the default image, e.g. "
                    "us-docker.pkg.dev/my-project/zoo.")
flags.DEFINE_string("accelerator", "", "Accelerator type: GKE node label value, Vertex "
                    "enum, TPU type (v4-8) or Slurm GPU type.")
flags.DEFINE_integer("accelerators_per_worker", 0, "GPUs a worker uses.")
flags.DEFINE_string("machine_type", "", "Machine type (Vertex; default n1-standard-8).")
flags.DEFINE_boolean("dry_run", False, "Print what would be submitted; run nothing.")
flags.DEFINE_string("submission_id", None, "6 lower-case letters or digits: the engine "
                    "job is <name>-<id>; default a fresh random one.")
flags.DEFINE_boolean("spot", False, "Spot VMs (kubernetes: GKE Spot nodes; vertex: "
                     "scheduling.strategy SPOT; tpu_vm: a Spot TPU VM with --tpu_create).")
# kubernetes
flags.DEFINE_enum("k8s_kind", "tfjob", kubernetes.KINDS, "Kubeflow TFJob, or a plain "
                  "Service + Indexed Job.")
flags.DEFINE_string("namespace", "", "Kubernetes namespace (kubectl's default when empty).")
flags.DEFINE_string("volume_claim", "", "PersistentVolumeClaim (ReadWriteMany) for "
                    "model_dir.")
flags.DEFINE_string("volume_mount", "/runs", "Where --volume_claim is mounted.")
flags.DEFINE_integer("backoff_limit", 3, "TFJob backoffLimit; Indexed Job "
                     "backoffLimitPerIndex.")
flags.DEFINE_string("accelerator_label", kubernetes.GKE_ACCELERATOR_LABEL,
                    "Node label selecting --accelerator.")
flags.DEFINE_string("k8s_cpu", kubernetes.Options.cpu, "CPU each worker's container "
                    "requests (a Kubernetes quantity).")
flags.DEFINE_string("k8s_memory", kubernetes.Options.memory, "Memory each worker's "
                    "container requests and is limited to (a Kubernetes quantity).")
# vertex and tpu_vm
flags.DEFINE_string("project", "", "Google Cloud project (gcloud's default when empty).")
flags.DEFINE_string("region", "", "Vertex AI region, e.g. us-central1.")
flags.DEFINE_integer("vertex_timeout_hours", vertex.DEFAULT_TIMEOUT_HOURS, "Vertex "
                     "scheduling.timeout: the job ends after this many hours.")
flags.DEFINE_string("service_account", "", "Vertex: the job's service account e-mail.")
flags.DEFINE_string("vertex_tensorboard", "", "Vertex AI TensorBoard resource name "
                    "(projects/P/locations/L/tensorboards/ID); needs --service_account "
                    "and --model_dir=gs://.../logs.")
flags.DEFINE_string("zone", "", "The TPU VM's zone.")
flags.DEFINE_string("tpu_name", "", "The TPU VM.")
flags.DEFINE_boolean("tpu_create", False, "Create the TPU VM (type --accelerator) first.")
flags.DEFINE_string("tpu_runtime_version", tpu_vm.DEFAULT_RUNTIME_VERSION,
                    "TPU VM software version for --tpu_create.")
flags.DEFINE_string("tpu_packages", tpu_vm.TPU_PACKAGES, "pip requirements replacing "
                    "the image's tensorflow on a TPU VM.")
# slurm
flags.DEFINE_string("slurm_partition", "", "sbatch --partition.")
flags.DEFINE_string("slurm_time", "", "sbatch --time, e.g. 24:00:00.")
flags.DEFINE_string("slurm_account", "", "sbatch --account.")
flags.DEFINE_string("slurm_workdir", "", "The workspace on the cluster (without --image).")
flags.DEFINE_multi_string("slurm_setup", [], "Shell line run before srun (repeatable).")
flags.DEFINE_string("slurm_container_mounts", "", "More pyxis --container-mounts.")
flags.DEFINE_integer("slurm_tasks_per_node", 1, "Workers a node (all on one node: "
                     "--workers).")
flags.DEFINE_integer("slurm_cpus_per_task", 8, "sbatch --cpus-per-task.")
flags.DEFINE_string("slurm_mem", "", "sbatch --mem (a node's), e.g. 64G; default the "
                    "cluster's.")
flags.DEFINE_boolean("slurm_exclusive", False, "sbatch --exclusive: whole nodes.")
flags.DEFINE_integer("slurm_signal_seconds", slurm.SIGNAL_SECONDS, "SIGTERM (save and "
                     "requeue) this long before --slurm_time.")
# A submitted job (local and slurm): its state, or an end to it.
flags.DEFINE_string("status", None, "Print a submitted job's state: the id the launch "
                    "printed (local) or sbatch's job id (slurm).")
flags.DEFINE_string("cancel", None, "Stop a submitted job (local: its workers save and "
                    "exit 143; slurm: scancel).")


def split_argv(argv):
  """(the launcher's argv, the recipe flags after the first literal `--`)."""
  if "--" in argv:
    at = argv.index("--")
    return argv[:at], argv[at + 1:]
  return argv, []


def check_recipe_args(args):
  for arg in args:
    if not arg.startswith("--"):
      raise LaunchError(f"recipe flag {arg!r} does not start with --; recipe flags are "
                        "flags of recipes.train, e.g. --gin_bindings='EPOCHS = 3'")
    if arg.split("=", 1)[0] in _OWN_RECIPE_FLAGS:
      raise LaunchError(f"recipe flag {arg!r} is the launcher's to set; drop it (give "
                        "--model_dir before the --)")
    if arg.split("=", 1)[0] == "--flagfile":
      raise LaunchError(f"recipe flag {arg!r} is refused: a flag file could set the "
                        "launcher's own flags (--model_dir, --strategy); give its flags "
                        "after the -- one by one")
    if submit.DIR in arg:
      raise LaunchError(f"recipe flag {arg!r} holds {submit.DIR}, the launcher's "
                        "placeholder for the files it submits (replaced inside quoted "
                        "commands); spell the path out")


def find(path, where):
  """The first of where/<path> that is a file, else None."""
  return next((os.path.join(r, path) for r in where
               if os.path.isfile(os.path.join(r, path))), None)


def check_recipe(recipe, where=None):
  where = where or roots()
  if find(os.path.join("recipes", f"{recipe}.gin"), where):
    return
  names = sorted({n[:-4] for r in where if os.path.isdir(os.path.join(r, "recipes"))
                  for n in os.listdir(os.path.join(r, "recipes")) if n.endswith(".gin")})
  raise LaunchError(f"--recipe={recipe!r}: recipes/{recipe}.gin not found; choose one of "
                    f"{', '.join(names) or '(none found)'}")


def default_image(registry, gpu, where=None):
  """<registry>/<tag>, the tag read from launch/image/{cpu,gpu}_image.txt."""
  kind = "gpu" if gpu else "cpu"
  path = find(os.path.join("launch", "image", f"{kind}_image.txt"), where or roots())
  if path is None:
    raise LaunchError(f"no image: give --image=<reference> (launch/image/{kind}_image.txt, "
                      f"made by //launch/image:{kind}, is not here)")
  with open(path) as f:
    tag = f.read().strip()
  if not registry:
    raise LaunchError(f"no image: give --registry=<host/path> for {tag}, or "
                      "--image=<reference>")
  return f"{registry.rstrip('/')}/{tag}"


def needs_image():
  """Whether the backend runs a container (slurm only with --image given)."""
  return FLAGS.backend in ("kubernetes", "vertex", "tpu_vm")


def make_job(recipe_args):
  if not FLAGS.backend:
    raise LaunchError(f"no --backend; choose one of {', '.join(BACKENDS)}")
  if not FLAGS.recipe:
    raise LaunchError("no --recipe; name one, e.g. --recipe=nfnet_long_tail")
  check_recipe_args(recipe_args)
  job = Job(name=FLAGS.name if FLAGS.name is not None else FLAGS.recipe.replace("_", "-"),
            recipe=FLAGS.recipe, workers=FLAGS.workers, model_dir=FLAGS.model_dir,
            recipe_args=tuple(recipe_args), image=FLAGS.image or "",
            accelerator=FLAGS.accelerator,
            accelerators_per_worker=FLAGS.accelerators_per_worker,
            machine_type=FLAGS.machine_type,
            submission="" if FLAGS.backend == "local" else (
                new_submission() if FLAGS.submission_id is None else FLAGS.submission_id))
  check_recipe(job.recipe)
  if not job.image and needs_image():
    gpu = job.accelerators_per_worker > 0 and FLAGS.backend != "tpu_vm"
    job = dataclasses.replace(job, image=default_image(FLAGS.registry, gpu))
  return job


def backend_options():
  """The cluster backend's Options from the flags."""
  if FLAGS.backend == "kubernetes":
    return kubernetes.Options(
        kind=FLAGS.k8s_kind, namespace=FLAGS.namespace, volume_claim=FLAGS.volume_claim,
        volume_mount=FLAGS.volume_mount, backoff_limit=FLAGS.backoff_limit,
        accelerator_label=FLAGS.accelerator_label, cpu=FLAGS.k8s_cpu,
        memory=FLAGS.k8s_memory, spot=FLAGS.spot)
  if FLAGS.backend == "vertex":
    return vertex.Options(region=FLAGS.region, project=FLAGS.project, spot=FLAGS.spot,
                          timeout_hours=FLAGS.vertex_timeout_hours,
                          service_account=FLAGS.service_account,
                          tensorboard=FLAGS.vertex_tensorboard)
  if FLAGS.backend == "tpu_vm":
    return tpu_vm.Options(
        tpu_name=FLAGS.tpu_name, zone=FLAGS.zone, project=FLAGS.project,
        create=FLAGS.tpu_create, runtime_version=FLAGS.tpu_runtime_version,
        packages=FLAGS.tpu_packages, spot=FLAGS.spot)
  return slurm.Options(
      partition=FLAGS.slurm_partition, time=FLAGS.slurm_time,
      account=FLAGS.slurm_account, workdir=FLAGS.slurm_workdir,
      setup=tuple(FLAGS.slurm_setup), container_mounts=FLAGS.slurm_container_mounts,
      tasks_per_node=FLAGS.slurm_tasks_per_node, cpus_per_task=FLAGS.slurm_cpus_per_task,
      mem=FLAGS.slurm_mem, exclusive=FLAGS.slurm_exclusive,
      signal_seconds=FLAGS.slurm_signal_seconds)


BACKEND_STEPS = {"kubernetes": kubernetes.steps, "vertex": vertex.steps,
                 "tpu_vm": tpu_vm.steps, "slurm": slurm.steps}


def manage(job_id, cancel):
  """--status / --cancel of a submitted local or slurm job; the exit status."""
  if FLAGS.backend == "local":
    return local.cancel(job_id) if cancel else local.status(job_id)
  if FLAGS.backend != "slurm":
    raise LaunchError(f"--status and --cancel are for --backend=local or slurm; for "
                      f"{FLAGS.backend}, use the commands printed at submission")
  commands = [slurm.cancel_command(job_id)] if cancel else slurm.status_commands(job_id)
  submit.check_tools([Step(argv=tuple(commands[0]))])
  for argv in commands:
    status = subprocess.run(argv, check=False).returncode
    if status == 0:
      return 0
  return status


def launch(recipe_args):
  """Submits (or prints) the job; returns the exit status."""
  if FLAGS.status is not None or FLAGS.cancel is not None:
    if FLAGS.status is not None and FLAGS.cancel is not None:
      raise LaunchError("give one of --status and --cancel")
    if not FLAGS.backend:
      raise LaunchError("--status and --cancel need the job's --backend (local or slurm)")
    return manage(FLAGS.cancel or FLAGS.status, cancel=FLAGS.cancel is not None)
  job = make_job(recipe_args)
  if FLAGS.backend == "local":
    return local.launch(job, dry_run=FLAGS.dry_run)
  options = backend_options()
  steps = BACKEND_STEPS[FLAGS.backend](job, options)
  if FLAGS.dry_run:
    sys.stdout.write(submit.render(steps))
    return 0
  submit.check_tools(steps)
  if job.image:  # the digest it submits, or how to pin a mutable tag (job.image_line)
    print(image_line(job.image), file=sys.stderr)
  status = submit.run(steps)
  if status == 0:
    sys.stdout.write(next_steps.text(FLAGS.backend, job, options))
  return status


def fail(message):
  print(f"error: {message}", file=sys.stderr)
  sys.exit(EXIT_BAD_INPUT)


def cli(argv=None):
  """The command line (argv: sys.argv)."""
  own, recipe_args = split_argv(list(sys.argv if argv is None else argv))

  def parse(args):
    try:
      rest = FLAGS(args)
    except flags.Error as e:
      fail(f"{' '.join(str(e).split())}; see --helpshort for the flags")
    if len(rest) > 1:
      fail(f"unexpected arguments {' '.join(rest[1:])!r}; recipe flags go after a "
           "literal --, e.g. -- --gin_bindings='EPOCHS = 3'")
    return rest

  def main(unused_argv):
    try:
      sys.exit(launch(recipe_args))
    except LaunchError as e:
      fail(str(e))

  app.run(main, argv=own, flags_parser=parse)


if __name__ == "__main__":
  cli()
