"""The peer of //benchmarks:zoo: one timm model's training step, run by an interpreter
that has PyTorch and timm (not a project dependency: `--timm_python` names it).

    python peer_timm.py MODEL IMAGE_SIZE BATCH CLASSES

Builds the model (random weights, train mode), SGD with momentum 0.9 and
cross-entropy on one fixed random batch (NCHW, PyTorch's default layout), runs two
untimed steps, prints "ready", then for each line N read from stdin runs N steps and
prints their mean seconds a step; exits at end of input. Between chunks it waits on
stdin, so chunks alternate with the project's without sharing the CPU.
"""

import sys
import time

import timm  # pylint: disable=import-error
import torch  # pylint: disable=import-error


def main(name, image_size, batch, classes):
  torch.manual_seed(0)
  model = timm.create_model(name, num_classes=classes)
  model.train()
  optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
  loss_fn = torch.nn.CrossEntropyLoss()
  images = torch.randn(batch, 3, image_size, image_size)
  labels = torch.randint(0, classes, (batch,))

  def step():
    optimizer.zero_grad(set_to_none=True)
    loss = loss_fn(model(images), labels)
    loss.backward()
    optimizer.step()
    return loss.item()

  step()
  step()
  print(f"ready torch {torch.__version__} timm {timm.__version__} "
        f"threads {torch.get_num_threads()}", flush=True)
  for line in sys.stdin:
    steps = int(line)
    start = time.perf_counter()
    for _ in range(steps):
      step()
    print((time.perf_counter() - start) / steps, flush=True)


if __name__ == "__main__":
  main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
