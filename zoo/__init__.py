"""Model zoo: image classifiers built in the tf_keras functional style.

`zoo.build(name, num_classes=...)`, `zoo.model_card(name)` (a model's `ModelCard`),
`zoo.card_of(model)`, `zoo.attach_card(model, card)` and `zoo.MODELS` come from
`zoo.registry`, imported on first use (PEP 562), so that a library such as //zoo:nfnet
does not pull in the registry's dependencies.
"""

import importlib

_FROM_REGISTRY = {"build": "build", "model_card": "card", "card_of": "card_of",
                  "attach_card": "attach_card", "MODELS": "MODELS"}


def __getattr__(name):
  if name in _FROM_REGISTRY:
    return getattr(importlib.import_module("zoo.registry"), _FROM_REGISTRY[name])
  raise AttributeError(f"module 'zoo' has no attribute {name!r}")


def __dir__():
  return sorted(set(globals()) | set(_FROM_REGISTRY))
