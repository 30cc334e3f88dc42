"""Where a text dataset's ids come from: a tokenizer that encodes the text, or a Parquet column of stored ids.

    source = token_source(tokenizer, max_length=512, truncation="tokenizer", pad_id=None)
    source.encoder(texts)                       # ids cut to max_length, special tokens kept
    source = token_source(None, max_length=512, truncation="slice", pad_id=0, ids_field="input_ids")
    source.ids.chunks(entries, sizes)           # stored ids, checked and cut a row group at a time

:class:`recipes.text.TokenizedTextDataset` and :class:`recipes.text.StreamingTextDataset` take the
same ``tokenizer``, ``max_length``, ``pad_id`` and ``from_ids`` keywords: here they are checked and
turned into what makes the ids, so both datasets cut a text, and stored ids, alike.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from tokenizers import Tokenizer

from recipes.core import tokenizing
from recipes.text.parquet_ids import IdsColumn

IDS_READ_OPTIONS = ("truncation", "max_row_group_bytes", "vocab_size")  # what from_ids reads of its ReadOptions

Built = TypeVar("Built")


@dataclass(frozen=True)
class TokenSource:
    """What makes a dataset's ids: ``encoder`` tokenises text (None without a tokenizer), ``ids``
    reads a stored column (None for text), ``pad_id`` is None where nothing names one."""

    tokenizer: Tokenizer | None
    encoder: tokenizing.TruncatingEncoder | None
    ids: IdsColumn | None
    pad_id: int | None


def token_source(
    tokenizer: Tokenizer | str | os.PathLike | None,
    *,
    max_length: int | None,
    truncation: str,
    pad_id: int | None,
    ids_field: str | None = None,
    vocab_size: int | None = None,
    label_field: str | None = None,
    on_error: str = "raise",
    extra_fields: tuple[str, ...] = (),
) -> TokenSource:
    """Check ``max_length`` and ``truncation``, load the tokenizer and build what makes the ids.

    Args:
        tokenizer: a ``tokenizers.Tokenizer``, a ``tokenizer.json`` path, or None (stored ids only).
        max_length, truncation: the cut (:class:`recipes.core.tokenizing.TruncatingEncoder`).
        pad_id: the padding id; None reads the tokenizer's padding config or its pad token.
        ids_field, vocab_size, label_field, on_error, extra_fields: with ``ids_field``, the stored column's
            :class:`recipes.text.parquet_ids.IdsColumn`, which cuts with the encoder when there is one.
    """
    tokenizing.check_truncation(max_length, truncation)
    tokenizer = None if tokenizer is None else tokenizing.load_tokenizer(tokenizer)
    encoder = None if tokenizer is None else tokenizing.TruncatingEncoder(tokenizer, max_length, truncation=truncation)
    ids = None
    if ids_field is not None:
        ids = IdsColumn(ids_field, label_field=label_field, vocab_size=vocab_size, max_length=max_length,
                        encoder=encoder, on_error=on_error, extra_fields=extra_fields)
    # only padding needs it (pack_collate does not); without a tokenizer, only pad_id names one
    if tokenizer is not None:
        pad_id = tokenizing.find_pad_id(tokenizer, pad_id)
    elif pad_id is not None:
        pad_id = int(pad_id)
    return TokenSource(tokenizer, encoder, ids, pad_id)


def from_ids_instance(cls: type[Built], initialise: Callable[..., None], *args: Any, **options: Any) -> Built:
    """What both datasets' ``from_ids`` return: a new ``cls`` set up by ``initialise``, its ids initialiser."""
    instance = cls.__new__(cls)
    initialise(instance, *args, **options)
    return instance
