"""The peer of //benchmarks:zoo: one timm model's training step, run by an interpreter
that has PyTorch and timm (not a project dependency: `--timm_python` names it).

    python peer_timm.py MODEL IMAGE_SIZE BATCH CLASSES [SETTING]

Builds the model (random weights, train mode), SGD with momentum 0.9 and
cross-entropy on one fixed random batch, runs two untimed steps, prints "ready", then
for each line N read from stdin runs N steps and prints their mean seconds a step;
exits at end of input. Between chunks it waits on stdin, so chunks alternate with the
project's without sharing the CPU.

SETTING (SETTINGS) is how a PyTorch user would run it on a CPU: "default" (NCHW,
eager), "channels_last" (NHWC memory format for model and batch, which oneDNN's
convolutions prefer), "compile" (`torch.compile`, Inductor's default mode: it writes
and builds C++ kernels, so it needs a C++ compiler) and "compile_channels_last".
Where the setting cannot run (compile failing), prints one line "skipped REASON" in
place of "ready" and exits 0.
"""

import sys
import time

import timm  # pylint: disable=import-error
import torch  # pylint: disable=import-error

SETTINGS = ("default", "channels_last", "compile", "compile_channels_last")


def build_step(name, image_size, batch, classes, setting):
  """A function running one training step of timm's `name` under `setting`."""
  torch.manual_seed(0)
  model = timm.create_model(name, num_classes=classes)
  model.train()
  images = torch.randn(batch, 3, image_size, image_size)
  labels = torch.randint(0, classes, (batch,))
  if "channels_last" in setting:
    model = model.to(memory_format=torch.channels_last)
    images = images.contiguous(memory_format=torch.channels_last)
  optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
  loss_fn = torch.nn.CrossEntropyLoss()
  forward = torch.compile(model) if setting.startswith("compile") else model

  def step():
    optimizer.zero_grad(set_to_none=True)
    loss = loss_fn(forward(images), labels)
    loss.backward()
    optimizer.step()
    return loss.item()

  return step


def main(name, image_size, batch, classes, setting="default"):
  if setting not in SETTINGS:
    raise SystemExit(f"unknown setting {setting!r}; choose from {', '.join(SETTINGS)}")
  step = build_step(name, image_size, batch, classes, setting)
  try:
    step()  # compiles, where the setting compiles
    step()
  except Exception as error:  # pylint: disable=broad-except
    if not setting.startswith("compile"):
      raise
    reason = " ".join(str(error).split())[:200]
    print(f"skipped {type(error).__name__}: {reason}", flush=True)
    return
  print(f"ready torch {torch.__version__} timm {timm.__version__} "
        f"threads {torch.get_num_threads()}", flush=True)
  for line in sys.stdin:
    steps = int(line)
    start = time.perf_counter()
    for _ in range(steps):
      step()
    print((time.perf_counter() - start) / steps, flush=True)


if __name__ == "__main__":
  main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]),
       *sys.argv[5:6])
