"""Batches of text items: padded to the longest (:func:`text_collate`) or packed into one row (:func:`pack_collate`).

    loader = DataLoader(dataset, batch_size=32, collate_fn=TextCollate(pad_id=dataset.pad_id, pad_to_multiple_of=8))
    loader = text_loader(dataset, max_tokens=4096, collate_fn=pack_collate)   # no padding at all

They batch the items of :class:`recipes.text.TokenizedTextDataset`, of
:class:`recipes.text.StreamingTextDataset` (:func:`stream_collate` pads through :func:`padded_batch`
too) and of their mixtures; ``text_collate_for`` and ``stream_collate_for`` are the presets' usual
collates, with a dataset's pad id; ``pack_collate`` also packs :class:`recipes.text.InstructionDataset`'s
per-token labels. Any other key of the items is batched as :func:`recipes.core.arrays.extra_columns`
does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from recipes.core import arrays, drop_skipped, hooks, tokenizing
from recipes.text.chat.instructions import IGNORE_INDEX

ITEM_KEYS = ("input_ids", "index", "label")  # what the collates read; other item keys are carried


def text_collate(
    batch: list[dict[str, Any] | None],
    *,
    pad_id: int = 0,
    pad_to_multiple_of: int | None = None,
    padding_side: str = "right",
) -> dict[str, torch.Tensor]:
    """Pad a list of items into one batch with a single preallocated fill.

    Use ``TextCollate(pad_id=dataset.pad_id)`` for a DataLoader.

    Returns:
        ``input_ids`` int64 [B,T], ``attention_mask`` int64 [B,T] (1 = real token),
        ``lengths`` int64 [B] (for ``pack_padded_sequence``), ``index`` int64 [B], and
        ``labels`` int64 [B] when the items have labels. T is the longest sample, rounded up to
        ``pad_to_multiple_of`` (8 or 64 suits tensor cores). ``None`` items (skipped) are dropped.
        Any other key of the items is batched too (:func:`recipes.core.arrays.extra_columns`).
    """
    return padded_batch(batch, caller="text_collate", pad_id=pad_id, pad_to_multiple_of=pad_to_multiple_of,
                        padding_side=padding_side)


def padded_batch(
    batch: list[dict[str, Any] | None], *, caller: str, pad_id: int = 0, **padding: Any
) -> dict[str, torch.Tensor]:
    """:func:`text_collate`'s batch, for it and for collates of the same items under other names
    (``stream_collate``): ``caller`` is the name a clashing item key's ValueError gives;
    ``padding``: ``pad_to_multiple_of`` and ``padding_side``."""
    batch = drop_skipped(batch)
    input_ids, attention_mask, lengths = tokenizing.pad_batch([item["input_ids"] for item in batch], pad_id=pad_id,
                                                              **padding)
    out = {"input_ids": input_ids, "attention_mask": attention_mask, "lengths": lengths, "index": _column(batch, "index")}
    if batch and "label" in batch[0]:
        out["labels"] = _column(batch, "label")
    return out | arrays.extra_columns(batch, ITEM_KEYS, out, caller=caller)


@dataclass(frozen=True)
class TextCollate:
    """:func:`text_collate` with its options as fields: a DataLoader's ``collate_fn`` that pickles
    for spawned workers and shows its options, ``TextCollate(pad_id=0, pad_to_multiple_of=8)``."""

    pad_id: int = 0
    pad_to_multiple_of: int | None = None
    padding_side: str = "right"

    def __call__(self, batch: list[dict[str, Any] | None]) -> dict[str, torch.Tensor]:
        return text_collate(batch, **vars(self))


def stream_collate(batch: list[dict[str, Any] | None], *, pad_id: int = 0) -> dict[str, torch.Tensor]:
    """Pad stream items: the keys and dtypes of :func:`recipes.text.text_collate`, whose code pads
    them (:func:`recipes.text.collates.padded_batch`); other item keys are carried alike."""
    return padded_batch(batch, caller="stream_collate", pad_id=pad_id)


@dataclass(frozen=True)
class StreamCollate:
    """:func:`stream_collate` with its pad id as a field (a ``collate_fn`` that pickles and shows it)."""

    pad_id: int = 0

    def __call__(self, batch: list[dict[str, Any] | None]) -> dict[str, torch.Tensor]:
        return stream_collate(batch, pad_id=self.pad_id)


def stream_collate_for(dataset: Any) -> StreamCollate:
    """:class:`StreamCollate` with ``dataset``'s pad id (:func:`recipes.core.hooks.dataset_pad_id`);
    a ValueError says what to pass where it has none."""
    return StreamCollate(pad_id=tokenizing.require_pad_id(hooks.dataset_pad_id(dataset), type(dataset).__name__))


def text_collate_for(dataset: Any) -> TextCollate:
    """:class:`TextCollate` with ``dataset``'s pad id (:func:`recipes.core.hooks.dataset_pad_id`);
    a ValueError says what to pass where it has none."""
    return TextCollate(pad_id=tokenizing.require_pad_id(hooks.dataset_pad_id(dataset), type(dataset).__name__))


def pack_collate(batch: list[dict[str, Any] | None]) -> dict[str, Any]:
    """Concatenate the items into one row, for variable-length (flash / block-diagonal) attention.

    Returns:
        ``input_ids`` int64 [1,N] (N = total tokens, no padding), ``position_ids`` int64 [1,N]
        restarting at 0 for each sequence, ``cu_seqlens`` int32 [B+1] (sequence ``b`` is
        ``cu_seqlens[b]:cu_seqlens[b+1]``), ``max_seqlen`` int, ``index`` int64 [B], and
        ``labels`` int64 [B] when the items have a ``label``; other keys of the items as in :func:`text_collate`.
        Items with per-token ``labels`` (:class:`recipes.text.InstructionDataset`) give ``labels``
        int64 [1,N], each sample's first label -100: a model shifts labels by one, and the last
        token of one sample must not learn to predict the first of the next (the layout of HF's
        ``DataCollatorWithFlattening``). transformers models read the sample boundaries from
        ``position_ids`` only without a KV cache: pass ``use_cache=False`` (in training too, or set
        ``model.config.use_cache = False``), else samples attend to each other.
    """
    batch = drop_skipped(batch)
    sequences = [item["input_ids"] for item in batch]
    lengths = torch.tensor([len(sequence) for sequence in sequences], dtype=torch.int64)
    cu_seqlens = torch.zeros(len(batch) + 1, dtype=torch.int32)
    torch.cumsum(lengths, dim=0, out=cu_seqlens[1:])
    input_ids = torch.cat(sequences) if sequences else torch.zeros(0, dtype=torch.int64)
    starts = torch.repeat_interleave(cu_seqlens[:-1].to(torch.int64), lengths)
    out = {
        "input_ids": input_ids[None],
        "position_ids": (torch.arange(len(input_ids)) - starts)[None],
        "cu_seqlens": cu_seqlens,
        "max_seqlen": int(lengths.max()) if len(batch) else 0,
        "index": _column(batch, "index"),
    }
    if batch and "label" in batch[0]:
        out["labels"] = _column(batch, "label")
    elif batch and "labels" in batch[0]:  # per-token labels: no loss across a boundary
        labels = torch.cat([item["labels"] for item in batch]).to(torch.int64)
        labels[cu_seqlens[:-1].to(torch.int64)] = IGNORE_INDEX
        out["labels"] = labels[None]
    return out | arrays.extra_columns(batch, (*ITEM_KEYS, "labels"), [*out, "labels", "lengths"], caller="pack_collate")


def _column(batch: list[dict[str, Any]], key: str) -> torch.Tensor:
    # through numpy: torch.tensor reads a list of Python ints more slowly
    return torch.from_numpy(np.array([item[key] for item in batch], dtype=np.int64))
