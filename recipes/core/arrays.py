"""Per-sample tables that DataLoader workers share without copying: strings and token ids in
one buffer each, and the extra numeric columns a batch carries.

``from recipes.core import arrays``, then ``arrays.StringArray(...)``: one name of the facade for these, each
documented on the reference page and loaded on first use.
"""

# ruff: noqa: F401  (the TYPE_CHECKING block below imports each name for static readers)
from __future__ import annotations

from typing import TYPE_CHECKING

from recipes.core.contracts.lazy import lazy_names

# public name -> the module of recipes.core that defines it
HOMES = {
    "StringArray": "contracts.arrays",
    "TokenArray": "contracts.arrays",
    "concat_strings": "contracts.arrays",
    "concat_tokens": "contracts.arrays",
    "extra_columns": "contracts.batching",
}
__all__ = sorted(HOMES)
__getattr__, __dir__ = lazy_names(__name__, HOMES)

if TYPE_CHECKING:  # where each name lives, for static readers
    from recipes.core.contracts.arrays import StringArray, TokenArray, concat_strings, concat_tokens
    from recipes.core.contracts.batching import extra_columns
