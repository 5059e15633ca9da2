"""Model rewrites that read the model's zoo card.

`recompute(model, every, pattern)`: gradient checkpointing (Chen et al. 2016,
arXiv:1604.06174; `tricks.recompute`) of every `every` blocks, the blocks named by
`pattern` or, when it is None, by the card's `block_pattern`. The rebuilt model keeps
the card.
"""

from tricks import recompute as recompute_lib
from zoo import card as card_lib


def recompute(model, every=1, pattern=None):
  """`model` rebuilt with each `every` consecutive blocks recomputed in backward."""
  card = card_lib.card_of(model)
  if pattern is None:
    pattern = card.block_pattern if card is not None else None
  if pattern is None:
    why = "its zoo card has no block pattern" if card else "it has no zoo card"
    raise ValueError(f"recompute: model {model.name!r} names no blocks ({why}); bind "
                     "recompute.pattern to a regex whose first group names a block")
  rebuilt = recompute_lib.recompute(model, pattern, every)
  return card_lib.attach_card(rebuilt, card) if card is not None else rebuilt
