"""Token ids back to text a person can read, for ``recipes show`` (captions and token rows).

    caption_text(tokenizer, ids)      # "Ready but she and." (decoder) or "R·##e·##ad·##y·but" (none)
    token_pieces(tokenizer, ids)      # ["[CLS]", " R", "e", "ad", "y", " but", ...]: one string per id

A tokenizer without a decoder joins its pieces with spaces when asked to ``decode``, which turns
sub-word pieces into nonsense ("Re ad y"); here its raw pieces are shown instead, joined by
``SEPARATOR`` so that a reader sees they are pieces.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

SEPARATOR = "·"  # between the raw pieces of a tokenizer without a decoder


def has_decoder(tokenizer: Any) -> bool:
    return tokenizer.decoder is not None


def _pieces(tokenizer: Any, ids: Sequence[int], *, skip_special_tokens: bool) -> list[str]:
    special = {i for i, token in tokenizer.get_added_tokens_decoder().items() if token.special}
    return [tokenizer.id_to_token(i) or f"<{i}>" for i in ids if not (skip_special_tokens and i in special)]


def caption_text(tokenizer: Any, ids: Sequence[int]) -> str:
    """The decoded text without special tokens; without a decoder, the pieces joined by ``SEPARATOR``."""
    if has_decoder(tokenizer):
        return tokenizer.decode(list(ids), skip_special_tokens=True)
    return SEPARATOR.join(_pieces(tokenizer, ids, skip_special_tokens=True))


def token_pieces(tokenizer: Any, ids: Sequence[int]) -> list[str]:
    """One string per id. With a decoder they join to ``tokenizer.decode(ids, skip_special_tokens=False)``
    exactly (each is what decoding one more id adds; a leading space starts a word); without one
    they are the raw pieces (``id_to_token``)."""
    ids = list(ids)
    if not has_decoder(tokenizer):
        return _pieces(tokenizer, ids, skip_special_tokens=False)
    full = tokenizer.decode(ids, skip_special_tokens=False)
    pieces, done = [], 0
    for count in range(1, len(ids) + 1):
        prefix = full if count == len(ids) else tokenizer.decode(ids[:count], skip_special_tokens=False)
        # a decoder may rewrite what came before (clean-up of " ." to "."): keep what agrees with the whole
        end = max(done, len(os.path.commonprefix([prefix, full])))
        pieces.append(full[done:end])
        done = end
    return pieces
