"""What a text stream's readers make of their share: rows as samples, and a block of samples as items.

    samples = line_samples(lines, text_field="text", label_field=None, max_chars=None, on_error="raise")
    items = encoded_items(block, None, encoder, None)     # {"input_ids", "index"[, "label"]} each

:class:`recipes.text.StreamingTextDataset` reads a byte range of lines (or a slice of Parquet rows,
or of stored ids) through these: a bad line is skipped or raises here, by itself, since a reader
sees only its share; a block of texts is tokenised in one ``encode_batch`` call.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import torch

from recipes.core import DataError, skip_or_raise, tokenizing
from recipes.text.corpus_files import integer_label, parse_line
from recipes.text.parquet_corpus import check_record


def id_rows(chunks: Iterator[Any], on_error: str) -> Iterator[tuple[int, tuple]]:
    """Parquet ids: ``(row, (row, ids, label))`` for each usable row of ``chunks`` (checked and cut a
    row group at a time)."""
    for chunk in chunks:
        for k in range(len(chunk.tokens)):
            row, label = int(chunk.rows[k]), None
            if chunk.labels is not None:
                raw = chunk.labels[k].item()
                label = integer_label(raw)
                if label is None:
                    reason = f"label {raw!r} is not an integer (streaming cannot number names)"
                    skip_or_raise(DataError(f"{chunk.where(k)}: {reason}"), on_error)
                    continue
            yield row, (row, chunk.tokens[k], label)


def line_samples(lines: Iterator[tuple[int, str, bool | None, Any]], *, text_field: str, label_field: str | None,
             max_chars: int | None, on_error: str) -> Iterator[tuple[int, tuple]]:
    """``(offset, (offset, text, label))`` for each line (or Parquet record: json_row None) that holds a sample."""
    fields = {"text_field": text_field, "label_field": label_field}
    for offset, where, json_row, raw in lines:
        try:
            if json_row is None:
                row = check_record(raw, where, max_chars=max_chars, **fields)
            else:
                row = parse_line(raw, where, json_row=json_row, max_chars=max_chars, **fields)
            if row is not None and label_field is not None and integer_label(row[1]) is None:
                raise DataError(f"{where}: label {row[1]!r} is not an integer (streaming cannot number names)")
        except DataError as error:
            # each line on its own: a reader sees only its share, so a field missing from all of
            # it may still be in the others' (two schemas in one file); TokenizedTextDataset,
            # which reads a whole file, refuses a field that no line has
            skip_or_raise(error, on_error)
            continue
        if row is not None:
            yield offset, (offset, *row)


def encoded_items(chunk: list[tuple[int, Any, Any]], ids: Any, encoder: Any,
             label_field: str | None) -> Iterator[dict[str, Any]]:
    """A block's items: stored ids as they are (``ids``), else its texts tokenised in one ``encoder`` call."""
    if not chunk:
        return
    if ids is not None:  # ids already made
        for row, row_ids, label in chunk:
            item = {"input_ids": torch.from_numpy(row_ids.astype(np.int64)), "index": row}
            yield item if label is None else item | {"label": label}
        return
    tokens = tokenizing.encode_texts(encoder, [text for _, text, _ in chunk], progress=False)
    for position, (offset, _, label) in enumerate(chunk):
        item: dict[str, Any] = {"input_ids": tokens.tensor(position), "index": offset}
        if label_field is not None:
            item["label"] = integer_label(label)
        yield item
