"""Prints every zoo model: name, parameters (1000 classes), default resolution, source.

    ./bazelw run //zoo:list
    ./bazelw run //zoo:list -- --names=resnet50,inception_v3
"""

from absl import app
from absl import flags
import tf_keras

from zoo import registry

flags.DEFINE_list("names", None, "only these models (default: all)")
FLAGS = flags.FLAGS


def main(argv):
  del argv
  names = FLAGS.names or list(registry.MODELS)
  unknown = [n for n in names if n not in registry.MODELS]
  if unknown:
    raise app.UsageError(f"unknown zoo models {unknown}; known: "
                         f"{', '.join(registry.MODELS)}")
  width = max(16, max(len(n) for n in names) + 2)
  print(f"{'name':<{width}}{'parameters':>14}  {'resolution':>10}  source")
  for name in names:
    tf_keras.backend.clear_session()
    entry = registry.MODELS[name]
    model = registry.build(name, num_classes=1000)
    print(f"{name:<{width}}{model.count_params():>14,}  {entry.card.train_size:>8}px  "
          f"{entry.source}", flush=True)


if __name__ == "__main__":
  app.run(main)
