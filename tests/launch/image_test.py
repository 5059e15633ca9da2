"""//launch/image's CPU and GPU build contexts: complete, reproducible, tagged by content.

Each context must install its flavour's lock (the workspace's bytes) by hash, hold every
Python and Gin file of recipes/, zoo/, tricks/ and launch/ as in the workspace and
nothing of tests/, import and include only what it holds, and start the flagship's
configuration from its own files alone, as `cd /opt/zoo && python3 -m recipes.train`
does in the image.
"""

import ast
import gzip
import hashlib
import io
import os
import re
import subprocess
import sys
import tarfile
import tempfile

from absl.testing import absltest

from launch import job
from launch.image import build_context

_LOCKS = {
    "cpu": "third_party/py/requirements_lock.txt",
    "gpu": "third_party/py/requirements_gpu_lock.txt",
}
_ROOTS = ("launch", "recipes", "tricks", "zoo")
_OURS = set(_ROOTS)
_GPU_ONLY = ("LD_LIBRARY_PATH", "NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES")


def context_path(flavour):
  return os.path.join("launch", "image", f"{flavour}_context.tar.gz")


def read_bytes(path):
  with open(path, "rb") as f:
    return f.read()


def workspace_sources():
  """The workspace paths of the .py and .gin files of recipes/, zoo/, tricks/ and launch/
  (IMAGE_SOURCES, set by the BUILD file from //launch/image:sources)."""
  paths = os.environ["IMAGE_SOURCES"].split()
  for path in paths:
    if path.split("/", 1)[0] not in _ROOTS or not path.endswith((".py", ".gin")):
      raise ValueError(f"IMAGE_SOURCES holds {path!r}, not a source of {', '.join(_ROOTS)}")
  return sorted(paths)


def members(flavour):
  """(tar bytes, [TarInfo], {name: bytes}) of the flavour's built context."""
  tar = gzip.decompress(read_bytes(context_path(flavour)))
  with tarfile.open(fileobj=io.BytesIO(tar)) as archive:
    infos = archive.getmembers()
    files = {i.name: archive.extractfile(i).read() for i in infos if i.isfile()}
  return tar, infos, files


def instructions(dockerfile):
  """[(INSTRUCTION, arguments)] of a Dockerfile, continuation lines joined."""
  text = re.sub(r"\\\n", " ", dockerfile)
  out = []
  for line in text.splitlines():
    line = line.strip()
    if line and not line.startswith("#"):
      word, _, rest = line.partition(" ")
      out.append((word.upper(), " ".join(rest.split())))
  return out


def base_image(files):
  """The default of the Dockerfile's BASE_IMAGE build argument."""
  for word, args in instructions(files["Dockerfile"].decode()):
    if word == "ARG" and args.startswith("BASE_IMAGE="):
      return args.split("=", 1)[1]
  return None


def environment(files):
  """{name: value} of the Dockerfile's ENV instructions (NAME=VALUE form, no quotes)."""
  env = {}
  for word, args in instructions(files["Dockerfile"].decode()):
    if word == "ENV":
      env.update(item.split("=", 1) for item in args.split())
  return env


def top_level_names(data, name):
  """Names a module defines at its top level (functions, classes, assignments, imports)."""
  names = set()
  for node in ast.parse(data, name).body:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
      names.add(node.name)
    elif isinstance(node, (ast.Import, ast.ImportFrom)):
      names.update((a.asname or a.name).split(".")[0] for a in node.names)
    elif isinstance(node, ast.Assign):
      names.update(t.id for t in node.targets if isinstance(t, ast.Name))
  return names


def missing_imports(files):
  """Imports of our packages (recipes, zoo, tricks, launch) in `files` ({path: bytes})
  that no file of `files` provides, as 'path: module'."""
  modules, packages = set(), set()
  for name in files:
    if name.endswith(".py"):
      parts = name[:-3].split("/")
      packages.update(".".join(parts[:i]) for i in range(1, len(parts)))
      if parts[-1] != "__init__":
        modules.add(".".join(parts))
  missing = []
  for name, data in sorted(files.items()):
    if not name.endswith(".py"):
      continue
    for node in ast.walk(ast.parse(data, name)):
      if isinstance(node, ast.Import):
        wanted = [(a.name, None) for a in node.names]
      elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
        wanted = [(node.module, a.name) for a in node.names]
      else:
        continue
      for module, attribute in wanted:
        if module.split(".")[0] not in _OURS:
          continue
        if module not in modules | packages:
          missing.append(f"{name}: {module}")
        elif attribute and module in packages and f"{module}.{attribute}" not in modules:
          # A package's attribute: defined by its __init__.py (or its __getattr__).
          init = module.replace(".", "/") + "/__init__.py"
          defined = top_level_names(files[init], init) if init in files else set()
          if attribute not in defined and "__getattr__" not in defined:
            missing.append(f"{name}: {module}.{attribute}")
  return missing


def missing_includes(files):
  """Gin `include` lines of `files` naming a file that `files` lacks."""
  missing = []
  for name, data in sorted(files.items()):
    if name.endswith(".gin"):
      for included in re.findall(r"^include\s+['\"]([^'\"]+)['\"]", data.decode(), re.M):
        if included not in files:
          missing.append(f"{name}: {included}")
  return missing


class ImageTest(absltest.TestCase):

  def test_installs_its_own_lock_by_hash(self):
    for flavour, lock in _LOCKS.items():
      with self.subTest(flavour):
        files = members(flavour)[2]
        steps = instructions(files["Dockerfile"].decode())
        self.assertEqual([("ARG", f"BASE_IMAGE={base_image(files)}"), ("FROM", "${BASE_IMAGE}")],
                         steps[:2])
        self.assertRegex(base_image(files),
                         r"^python:3\.11\.7-slim-bookworm(@sha256:[0-9a-f]{64})?$")
        self.assertEqual([job.IMAGE_WORKDIR],
                         [args for word, args in steps if word == "WORKDIR"])
        installs = [args for word, args in steps if word == "RUN" and " pip install " in args]
        self.assertLen(installs, 1)
        # A virtual environment, first on PATH: `python3` is its interpreter on any base.
        venv, _, install = installs[0].partition(" && ")
        self.assertEqual(f"{job.IMAGE_PYTHON} -m venv /opt/venv", venv)
        self.assertTrue(environment(files)["PATH"].startswith("/opt/venv/bin:"))
        words = install.split()
        self.assertEqual([f"/opt/venv/bin/{job.IMAGE_PYTHON}", "-m", "pip", "install"],
                         words[:4])
        self.assertIn("--require-hashes", words)
        self.assertIn("--no-deps", words)
        installed = words[words.index("-r") + 1]
        self.assertEqual(read_bytes(lock), files[installed], f"{installed} is not {lock}")
        self.assertIn(("COPY", f"{installed} ./"), steps[:steps.index(("RUN", installs[0]))])

  def test_gpu_flavour_sets_what_the_gpu_hooks_need(self):
    # The NVIDIA container toolkit's hooks (Docker, enroot under pyxis) act only when
    # NVIDIA_VISIBLE_DEVICES is set; GKE mounts the driver at /usr/local/nvidia/lib64,
    # found only through LD_LIBRARY_PATH. Checked in the Dockerfile: no GPU image is
    # built here (image_real_test builds and inspects the CPU one).
    gpu = environment(members("gpu")[2])
    self.assertEqual("all", gpu.get("NVIDIA_VISIBLE_DEVICES"))
    self.assertEqual({"compute", "utility"},
                     set(gpu.get("NVIDIA_DRIVER_CAPABILITIES", "").split(",")))
    self.assertIn("/usr/local/nvidia/lib64", gpu.get("LD_LIBRARY_PATH", "").split(":"))
    cpu = environment(members("cpu")[2])
    self.assertNotIn("NVIDIA_VISIBLE_DEVICES", cpu)
    self.assertEqual({k: v for k, v in gpu.items() if k not in _GPU_ONLY}, cpu)

  def test_flavours_hold_the_same_sources(self):
    cpu, gpu = members("cpu")[2], members("gpu")[2]
    self.assertEqual(sorted(set(cpu) - {"requirements_lock.txt"}),
                     sorted(set(gpu) - {"requirements_gpu_lock.txt"}))
    for name in cpu:
      if name.split("/", 1)[0] in _ROOTS:
        self.assertEqual(cpu[name], gpu[name], name)

  def test_holds_every_source_as_in_the_workspace(self):
    sources = workspace_sources()
    for must in ["recipes/train.py", "recipes/nfnet_long_tail.gin", "recipes/data/pipeline.py",
                 "recipes/configs/models/nfnet_nano.gin", "zoo/nfnet.py", "tricks/agc.py",
                 "launch/job.py", "launch/indexed_worker.py"]:
      self.assertIn(must, sources)
    for flavour in _LOCKS:
      with self.subTest(flavour):
        files = members(flavour)[2]
        self.assertEqual([], [p for p in sources if p not in files], "missing")
        self.assertEqual([], [p for p in sources if p in files and read_bytes(p) != files[p]],
                         "not as in the workspace")
        extra = set(files) - set(sources) - {"Dockerfile", os.path.basename(_LOCKS[flavour])}
        self.assertEqual(set(), extra)

  def test_holds_no_tests_nor_build_files(self):
    for flavour in _LOCKS:
      for name in members(flavour)[2]:
        self.assertNotIn("tests", name.split("/"), name)
        self.assertNotIn(os.path.basename(name), ("BUILD", "BUILD.bazel"), name)
        self.assertTrue(name.split("/", 1)[0] in _ROOTS or "/" not in name, name)

  def test_imports_and_includes_resolve_inside(self):
    for flavour in _LOCKS:
      files = members(flavour)[2]
      self.assertEqual([], missing_imports(files), flavour)
      self.assertEqual([], missing_includes(files), flavour)

  def test_missing_imports_and_includes_are_found(self):
    files = {"recipes/a.py": b"from recipes import b, c\nimport zoo.d\nimport numpy\n"
                             b"from launch.job import Job\nfrom launch import e\n",
             "recipes/__init__.py": b"c = 1\n", "recipes/b.py": b"", "launch/job.py": b"",
             "recipes/x.gin": b"include 'recipes/configs/y.gin'\n"}
    self.assertEqual(["recipes/a.py: launch.e", "recipes/a.py: zoo.d"],
                     sorted(missing_imports(files)))
    self.assertEqual(["recipes/x.gin: recipes/configs/y.gin"], missing_includes(files))

  def test_entries_are_sorted_and_owned_by_root_at_time_zero(self):
    for flavour in _LOCKS:
      with self.subTest(flavour):
        gz = read_bytes(context_path(flavour))
        self.assertEqual(b"\x1f\x8b\x08", gz[:3])
        self.assertEqual(0, gz[3] & 0x08, "gzip header names a file")
        self.assertEqual(b"\0\0\0\0", gz[4:8], "gzip mtime is not 0")
        infos = members(flavour)[1]
        names = [i.name for i in infos]
        self.assertEqual(sorted(names), names)
        self.assertEqual(len(set(names)), len(names))
        for info in infos:
          self.assertTrue(info.isfile() or info.isdir(), info.name)
          self.assertEqual((0, 0, 0, 0o644 if info.isfile() else 0o755, "", ""),
                           (info.mtime, info.uid, info.gid, info.mode, info.uname, info.gname),
                           info.name)
        directories = {i.name for i in infos if i.isdir()}
        for name in names:
          if "/" in name:
            self.assertIn(os.path.dirname(name), directories, name)

  def test_tag_is_the_content_digest(self):
    for flavour in _LOCKS:
      with self.subTest(flavour):
        tar = members(flavour)[0]
        with open(os.path.join("launch", "image", f"{flavour}_image.txt")) as f:
          tag = f.read()
        self.assertEqual(f"model-zoo:{flavour}-{hashlib.sha256(tar).hexdigest()[:12]}\n", tag)

  def test_building_again_gives_the_same_bytes(self):
    for flavour, lock in _LOCKS.items():
      with self.subTest(flavour):
        files = members(flavour)[2]
        base = base_image(files)
        sources = [n for n in files if n.split("/", 1)[0] in _ROOTS]
        context, tag = build_context.build(flavour, lock, base, sources)
        self.assertEqual(read_bytes(context_path(flavour)), context)
        self.assertTrue(tag.startswith(f"model-zoo:{flavour}-"))

  def test_constants_match_the_launcher(self):
    self.assertEqual(job.IMAGE_WORKDIR, build_context.WORKDIR)
    self.assertEqual(job.IMAGE_PYTHON, build_context.PYTHON)

  def test_refuses_sources_outside_the_image(self):
    for path in ["tests/launch/image_test.py", "bazel-out/k8/bin/x.py", "/abs/recipes/a.py",
                 "../recipes/a.py", "setup.py"]:
      with self.assertRaises(build_context.ContextError, msg=path):
        build_context.archive_name(path)
    self.assertEqual("recipes/a.py", build_context.archive_name("recipes/a.py"))

  def test_flagship_configuration_starts_from_the_context_alone(self):
    # The image's `cd /opt/zoo && python3 -m recipes.train --gin_file=...`, up to
    # training: our modules from the context, the Gin file and its includes parsed.
    files = members("cpu")[2]
    with tempfile.TemporaryDirectory(dir=os.environ.get("TEST_TMPDIR")) as root:
      with tarfile.open(fileobj=io.BytesIO(members("cpu")[0])) as archive:
        archive.extractall(root)
      env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONSAFEPATH")}
      env["PYTHONPATH"] = root  # as the image's ENV; the working directory as its WORKDIR
      script = ("import recipes.train as t, launch.indexed_worker as w, gin; "
                "t.parse_config(['recipes/nfnet_long_tail.gin'], []); "
                "print(t.__file__); print(w.__file__); print(gin.query_parameter('%EPOCHS'))")
      done = subprocess.run([sys.executable, "-c", script], cwd=root, env=env,
                            capture_output=True, text=True, timeout=240, check=False)
      self.assertEqual(0, done.returncode, done.stderr[-3000:])
      train, worker, epochs = done.stdout.split()[-3:]
      self.assertEqual(os.path.join(root, "recipes", "train.py"), train)
      self.assertEqual(os.path.join(root, "launch", "indexed_worker.py"), worker)
      self.assertGreater(int(epochs), 0)
    self.assertIn("recipes/nfnet_long_tail.gin", files)


if __name__ == "__main__":
  absltest.main()
