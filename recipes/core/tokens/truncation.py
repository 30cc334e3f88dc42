"""Where a tokenizer puts its special tokens, and cuts of token ids that keep them.

    head, tail = special_ends(tokenizer)          # ([CLS], [SEP]) for BERT, ([], [</s>]) for T5
    cut = cut_tokens(tokens, 128, head=len(head), tail=len(tail))   # [CLS] ... [SEP] kept

The tokenizer's own truncation (``Tokenizer.enable_truncation``) cuts the content and keeps the
post-processor's special tokens. These functions find where those tokens sit from a probe text
and cut stored ids (a pre-tokenised column) the same way, vectorised, whatever made the ids:
:class:`recipes.core.tokens.encoding.TruncatingEncoder` cuts encoded texts with them, and the datasets of
pre-tokenised ids cut their columns. In the core because text, captions and transcripts share them.
"""

from __future__ import annotations

import numpy as np
from tokenizers import Tokenizer

from recipes.core.contracts.arrays import TokenArray
from recipes.core.contracts.parameters import check_count

TRUNCATIONS = ("tokenizer", "slice")
SPECIAL_PROBES = ("a", "the", "0", ".", "x")  # texts encoded to see where the special tokens go


def check_truncation(max_length: int | None, truncation: str = "tokenizer") -> None:
    """ValueError unless ``max_length`` is None or >= 1 and ``truncation`` one of :data:`TRUNCATIONS`."""
    if truncation not in TRUNCATIONS:
        raise ValueError(f"truncation must be one of {TRUNCATIONS}, got {truncation!r}")
    check_count("max_length", max_length, owner="the tokenizer's cut")


def special_ends(tokenizer: Tokenizer) -> tuple[list[int], list[int]]:
    """The ids ``tokenizer``'s post-processor puts before and after a single text's content,
    read from the special-tokens mask of a probe text it encodes; ValueError if it cannot be told."""
    processor = tokenizer.post_processor
    added = processor.num_special_tokens_to_add(False) if processor is not None else 0
    if added == 0:
        return [], []
    raw = copy_tokenizer(tokenizer)
    raw.no_truncation()
    raw.no_padding()
    for probe in SPECIAL_PROBES:
        content = raw.encode(probe, add_special_tokens=False)
        if not content.ids:
            continue
        done = raw.post_process(content)
        mask = done.special_tokens_mask
        head = next((k for k, special in enumerate(mask) if not special), len(mask))
        tail = next((k for k, special in enumerate(reversed(mask)) if not special), len(mask))
        if head + tail == added == len(done.ids) - len(content.ids):
            return done.ids[:head], done.ids[len(done.ids) - tail :]
        break
    raise ValueError(
        f"cannot tell where the tokenizer's post-processor puts its {added} special tokens around a text; "
        "pass truncation='slice' to cut stored ids as they are"
    )


def special_counts(tokenizer: Tokenizer, added: int) -> tuple[int, int] | None:
    """How many special tokens ``tokenizer``'s post-processor puts before and after a single text's
    content, read from a probe it encodes as it is; None when the probe cannot tell (then the
    tokenizer's own truncation is used on a copy)."""
    if added == 0:
        return 0, 0
    for probe in SPECIAL_PROBES:
        content = tokenizer.encode(probe, add_special_tokens=False)
        if not content.ids or tokenizer.truncation is not None and len(content.ids) + added > tokenizer.truncation["max_length"]:
            continue
        mask = tokenizer.post_process(content).special_tokens_mask
        head = next((k for k, special in enumerate(mask) if not special), len(mask))
        tail = next((k for k, special in enumerate(reversed(mask)) if not special), len(mask))
        return (head, tail) if head + tail == added == len(mask) - len(content.ids) else None
    return None


def cut_tokens(
    tokens: TokenArray, max_length: int, *, head: int = 0, tail: int = 0, keep_end: bool = False
) -> TokenArray:
    """Each sequence longer than ``max_length`` cut to ``max_length`` ids: its first ``head`` and
    last ``tail`` ids kept (special tokens), and of those between, the first ones (``keep_end``:
    the last ones). With ``head = tail = 0`` it is a slice, ``ids[:max_length]``. Vectorised: one
    gather over the kept ids, no loop over sequences."""
    lengths = tokens.lengths
    if len(lengths) == 0 or int(lengths.max()) <= max_length:
        return tokens
    if head + tail > max_length:
        raise ValueError(f"max_length={max_length} leaves no room for {head + tail} special tokens")
    kept = np.minimum(lengths, max_length)
    offsets = np.zeros(len(kept) + 1, dtype=np.int64)
    np.cumsum(kept, out=offsets[1:])
    # position of each kept id in its sequence, and where the ids taken from the far end begin
    position = np.arange(offsets[-1], dtype=np.int64) - np.repeat(offsets[:-1], kept)
    jump = head if keep_end else max_length - tail
    dropped = np.repeat(lengths - kept, kept)  # 0 for a sequence that is not cut
    source = np.repeat(tokens.offsets[:-1], kept) + position + np.where(position >= jump, dropped, 0)
    return TokenArray(tokens.ids[source], offsets)


def copy_tokenizer(tokenizer: Tokenizer) -> Tokenizer:
    """A copy of ``tokenizer`` whose settings change without changing it."""
    return Tokenizer.from_str(tokenizer.to_str())
