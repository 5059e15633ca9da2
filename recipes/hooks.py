"""The hooks the trainer calls on what Gin builds, declared: a configured object takes
part by having the member (structural typing, `typing.Protocol`), and the trainer asks
`isinstance(obj, Hook)` instead of probing with getattr.

- `EpochAware`: a loss told each epoch before it trains (deferred re-weighting, Cao et
  al. 2019; `tricks/deferred_reweighting.py`).
- `BuiltOnModel`: a gradient transform built on the model once it exists (AGC's
  per-layer exclusions, `tricks/agc.py`).
- `WeightConstraint`: a projection applied after optimizer updates, every "step" or
  every "epoch", to one variable found on the model (`tricks/max_norm.py`).
- `CountsAware`: a model transform (`Task.model_transforms`) called with the training
  split's class counts, `transform(model, class_counts=...)`, as every loss is
  (post-hoc logit adjustment, Menon et al. 2021 eq. 9: `long_tail_heads.posthoc_adjusted`).
  A function declares it with `@takes_class_counts`; the others get `transform(model)`.
"""

from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class EpochAware(Protocol):

  def set_epoch(self, epoch: int) -> None:
    """`epoch` (0-based) is about to be trained."""


@runtime_checkable
class BuiltOnModel(Protocol):

  def build(self, model: Any) -> None:
    """Sets itself up on the built model, before the first step."""


@runtime_checkable
class WeightConstraint(Protocol):
  every: str  # "step" or "epoch"
  variable: Any  # the variable it projects, set by build

  def build(self, model: Any) -> None:
    """Finds its variable on the built model."""

  def project(self, value: Any) -> Any:
    """The projected value of the variable."""


@runtime_checkable
class CountsAware(Protocol):
  takes_class_counts: bool  # True: called as transform(model, class_counts=...)

  def __call__(self, model: Any, class_counts: Any) -> Any:
    """The transformed model."""


def takes_class_counts(transform):
  """Declares model transform `transform` `CountsAware` (Gin's wrapper keeps the mark)."""
  transform.takes_class_counts = True
  return transform
