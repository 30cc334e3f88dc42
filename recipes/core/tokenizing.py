"""Token ids: loading tokenizers and their pad ids, encoding texts in batches, truncation that
keeps special tokens, and padding ids into batches.

``from recipes.core import tokenizing``, then ``tokenizing.load_tokenizer(...)``: one name of the facade for these, each
documented on the reference page and loaded on first use.
"""

# ruff: noqa: F401  (the TYPE_CHECKING block below imports each name for static readers)
from __future__ import annotations

from typing import TYPE_CHECKING

from recipes.core.contracts.lazy import lazy_names

# public name -> the module of recipes.core that defines it
HOMES = {
    "TruncatingEncoder": "tokens.encoding",
    "batch_safe_tokenizer": "tokens.encoding",
    "encode_texts": "tokens.encoding",
    "find_pad_id": "tokens.encoding",
    "load_tokenizer": "tokens.encoding",
    "pad_id_of": "tokens.encoding",
    "require_pad_id": "tokens.encoding",
    "token_dtype": "tokens.encoding",
    "pad_batch": "tokens.padding",
    "pad_to_width": "tokens.padding",
    "check_truncation": "tokens.truncation",
    "cut_tokens": "tokens.truncation",
}
__all__ = sorted(HOMES)
__getattr__, __dir__ = lazy_names(__name__, HOMES)

if TYPE_CHECKING:  # where each name lives, for static readers
    from recipes.core.tokens.encoding import (
        TruncatingEncoder,
        batch_safe_tokenizer,
        encode_texts,
        find_pad_id,
        load_tokenizer,
        pad_id_of,
        require_pad_id,
        token_dtype,
    )
    from recipes.core.tokens.padding import pad_batch, pad_to_width
    from recipes.core.tokens.truncation import check_truncation, cut_tokens
