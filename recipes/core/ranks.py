"""Ranks and what they agree on: this process's rank and world size, and a seed or a result
computed once and shared by all.

``from recipes.core import ranks``, then ``ranks.shared_seed(...)``: one name of the facade for these, each
documented on the reference page and loaded on first use.
"""

# ruff: noqa: F401  (the TYPE_CHECKING block below imports each name for static readers)
from __future__ import annotations

from typing import TYPE_CHECKING

from recipes.core.contracts.lazy import lazy_names

# public name -> the module of recipes.core that defines it
HOMES = {
    "distributed_rank_and_size": "sampling.distributed",
    "resolve_rank": "sampling.distributed",
    "shared_result": "sampling.distributed",
    "shared_seed": "sampling.distributed",
}
__all__ = sorted(HOMES)
__getattr__, __dir__ = lazy_names(__name__, HOMES)

if TYPE_CHECKING:  # where each name lives, for static readers
    from recipes.core.sampling.distributed import distributed_rank_and_size, resolve_rank, shared_result, shared_seed
