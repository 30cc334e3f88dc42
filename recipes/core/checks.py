"""Checked parameters and states: counts, positive numbers and integers refused with their name,
the digest a saved state keeps of its data, and a dataset's read options or their defaults.

``from recipes.core import checks``, then ``checks.check_count(...)``: one name of the facade for these, each
documented on the reference page and loaded on first use.
"""

# ruff: noqa: F401  (the TYPE_CHECKING block below imports each name for static readers)
from __future__ import annotations

from typing import TYPE_CHECKING

from recipes.core.contracts.lazy import lazy_names

# public name -> the module of recipes.core that defines it
HOMES = {
    "check_count": "contracts.parameters",
    "check_positive": "contracts.parameters",
    "check_int": "contracts.states",
    "sampled_digest": "contracts.states",
    "read_options_or_default": "contracts.read_options",
    "MAX_LINE_CHARS": "contracts.read_options",
}
__all__ = sorted(HOMES)
__getattr__, __dir__ = lazy_names(__name__, HOMES)

if TYPE_CHECKING:  # where each name lives, for static readers
    from recipes.core.contracts.parameters import check_count, check_positive
    from recipes.core.contracts.read_options import MAX_LINE_CHARS, read_options_or_default
    from recipes.core.contracts.states import check_int, sampled_digest
