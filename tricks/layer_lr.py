"""Per-layer-group learning rates (discriminative fine-tuning; Howard & Ruder 2018, eq. 2).

Each variable gets the learning rate eta_g = m_g * eta of the first group whose regex
matches its name (eta itself where none does):

    theta_g <- theta_g + m_g * (optimizer step of theta_g at rate eta)

Scaling the step is exactly a per-group rate for every optimizer whose step is linear
in the rate and whose state does not depend on it: SGD with (Nesterov) momentum in
Keras's form, Adam, AdamW (its decay is eta * lambda * theta), RMSprop, Adagrad, SM3.
It is not for Adafactor's relative step, min(eta, 1 / sqrt(t)), which clips eta
before m_g applies. A weight average kept by the optimizer (`use_ema`) is corrected
so that it averages the scaled weights.

Usage: `LayerLearningRates({"logits": 1.0, "conv5_": 0.3, ".*": 0.1})`, then
`build(variables)` once and `apply_gradients(optimizer, grads_and_vars)` in place of
`optimizer.apply_gradients(grads_and_vars)`.

Layer-wise learning-rate decay (BEiT, Bao et al. 2022, arXiv:2106.08254, sec. 2.6 and
its optim_factory.py's LayerDecayValueAssigner; timm's `--layer-decay`,
`param_groups_layer_decay`) is such a grouping: `layer_decay(groups, decay)` gives the
variables of layer i of [stem (0), blocks 1..L, head (L + 1)] the multiplier

    m_i = decay^(L + 1 - i),

so the head keeps the rate, the last block gets decay times it, the stem decay^(L + 1).
"""

import numbers
import re

import tensorflow as tf

from tricks import weight_ema


class LayerLearningRates:
  """Learning-rate multipliers for groups of variables picked by name."""

  def __init__(self, multipliers):
    """`multipliers`: an ordered mapping (or pairs) regex -> multiplier >= 0."""
    pairs = list(multipliers.items() if hasattr(multipliers, "items") else multipliers)
    if not pairs:
      raise ValueError("layer learning rates: no groups given; map a name regex to a "
                       "multiplier, e.g. {'logits': 1.0, '.*': 0.1}")
    self.groups = []
    for pattern, multiplier in pairs:
      try:
        compiled = re.compile(pattern)
      except re.error as e:
        raise ValueError(f"layer learning rates: {pattern!r} is not a regex ({e})") from None
      if not multiplier >= 0:
        raise ValueError(f"layer learning rates: multiplier {multiplier!r} for {pattern!r} "
                         "must be >= 0")
      self.groups.append((compiled, float(multiplier)))
    self._multipliers = {}

  def multiplier(self, name):
    """The multiplier of the first group matching variable `name` (1 if none)."""
    if name not in self._multipliers:
      self._multipliers[name] = next(
          (m for pattern, m in self.groups if pattern.search(name)), 1.0)
    return self._multipliers[name]

  def build(self, variables):
    """Checks every group matches some variable; returns {multiplier: count}."""
    names = [v.name for v in variables]
    for pattern, _ in self.groups:
      if not any(pattern.search(n) for n in names):
        raise ValueError(f"layer learning rates: {pattern.pattern!r} matches no trainable "
                         f"variable (e.g. {names[0]!r}); fix the regex or drop the group")
    counts = {}
    for name in names:
      m = self.multiplier(name)
      counts[m] = counts.get(m, 0) + 1
    return counts

  def apply_gradients(self, optimizer, grads_and_vars, **kwargs):
    """`optimizer.apply_gradients`, each variable's step scaled by its multiplier."""
    pairs = list(grads_and_vars)
    scaled = [(v, self.multiplier(v.name)) for _, v in pairs if self.multiplier(v.name) != 1.0]
    before = [tf.identity(v) for v, _ in scaled]
    result = optimizer.apply_gradients(pairs, **kwargs)
    if scaled:
      tf.distribute.get_replica_context().merge_call(
          self._rescale, args=(optimizer, [v for v, _ in scaled], [m for _, m in scaled],
                               before))
    return result

  @staticmethod
  def _rescale(strategy, optimizer, variables, multipliers, before):
    keeper = weight_ema.inner(optimizer)
    ema = bool(keeper.use_ema)
    if ema and keeper.ema_overwrite_frequency:
      raise ValueError("layer learning rates cannot follow an optimizer that overwrites "
                       "weights with their average (ema_overwrite_frequency); unset it")
    for variable, multiplier, old in zip(variables, multipliers, before):

      def update(v, old, m=multiplier):
        return v.assign(old + m * (v - old))

      if ema:  # the average took (1 - mu) * the unscaled weight: move it to the scaled one
        average = keeper._model_variables_moving_average[  # pylint: disable=protected-access
            keeper._index_dict[keeper._var_key(variable)]]  # pylint: disable=protected-access
        mu = keeper.ema_momentum

        def correct(a, v, old, m=multiplier, mu=mu):
          return a.assign_add((1.0 - mu) * (m - 1.0) * (v - old))

        strategy.extended.update(average, correct, args=(variable, old), group=False)
      strategy.extended.update(variable, update, args=(old,), group=False)


def layer_decay(groups, decay):
  """BEiT's layer-wise rate decay as ordered (regex, multiplier) pairs for
  `LayerLearningRates`: `groups` lists the variable names of each layer, [stem,
  block 1, ..., block L, head]; layer i's names get decay^(L + 1 - i), the head 1.
  An empty group (a frozen layer) is left out; its depth still counts."""
  if isinstance(decay, bool) or not isinstance(decay, numbers.Real) or not 0 < decay <= 1:
    raise ValueError(f"layer decay {decay!r} must be a number in (0, 1], e.g. 0.75")
  groups = [list(g) for g in groups]
  if len(groups) < 2:
    raise ValueError(f"layer decay needs at least a stem and a head, got {len(groups)} "
                     "layer groups")
  deepest = len(groups) - 1  # the head: L + 1
  return [("^(?:" + "|".join(re.escape(n) for n in names) + ")$",
           float(decay) ** (deepest - i)) for i, names in enumerate(groups) if names]
