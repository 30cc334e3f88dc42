"""Tokenise the text column of Parquet files (or a Hugging Face Dataset) a chunk of rows at a time.

    source = parquet_source("train-*.parquet")             # the files, and what messages and caches call them
    corpus = source.read(tokenizer, text_field="text", label_field="label")
    corpus.tokens[0], corpus.labels[0], corpus.rows[0]      # ids, 3, 0

The rules are the JSONL route's (:func:`recipes.text.corpus_files.check_fields`): a null, empty
or non-string text, a null or non-scalar label is a :class:`DataError` naming the file and row
(``on_error="skip"``: the row is dropped with a warning), and the labels are numbered as
:func:`recipes.text.corpus_files.label_ids` numbers them (integers kept, strings by their place
in the sorted names). Texts become Python strings one chunk at a time, for ``encode_batch``; what
is kept is numpy only: the ids, the labels and each sample's row number. :func:`parquet_source`
resolves a source once for :class:`recipes.text.TokenizedTextDataset`: its files, its name in
messages, and the content digest its token cache is keyed by.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from tokenizers import Tokenizer

from recipes.core import DataError, arrays, check_on_error, parquet, skip_or_raise, storage, tokenizing
from recipes.text.corpus_files import check_fields, extra_arrays, extra_value, integer_label

CHUNK_ROWS = 8192  # texts per encode_texts call: the Python strings alive at once


@dataclass
class ParquetCorpus:
    """Token ids, int64 labels (None without a label field) with their names, and row numbers."""

    tokens: arrays.TokenArray
    labels: np.ndarray | None
    label_names: list[str] | None
    rows: np.ndarray  # int64: each sample's row, counted from 0 across the entries in order
    extras: dict[str, np.ndarray] = field(default_factory=dict)  # extra_fields: int64 or float32 [N] each


@dataclass
class ParquetSource:
    """A Parquet source resolved once (:func:`parquet_source`): its entries and the names it goes by."""

    entries: list[Any]  # from recipes.core.parquet.parquet_entries
    path: Any  # what the dataset shows as its path: the source as given, or the Dataset's description
    name: str  # what messages call it
    key_path: Any  # what names its token-cache entry: the first file, or "dataset.parquet" for a Dataset
    storage_options: dict[str, Any] | None = None

    def fingerprint(self) -> bytes:
        """A digest of the entries' content, for a cache key; it reads every byte, so call it only for one."""
        return parquet.fingerprint(self.entries, self.storage_options)

    def read(
        self,
        tokenizer: Tokenizer | tokenizing.TruncatingEncoder,
        *,
        text_field: str = "text",
        label_field: str | None = None,
        max_length: int | None = None,
        on_error: str = "raise",
        max_row_group_bytes: int = parquet.MAX_ROW_GROUP_BYTES,
        max_chars: int | None = None,
        extra_fields: Sequence[str] = (),
    ) -> ParquetCorpus:
        """Read and tokenise every row: :func:`read_parquet_corpus` of the entries."""
        return read_parquet_corpus(
            self.entries,
            tokenizer,
            text_field=text_field,
            label_field=label_field,
            max_length=max_length,
            on_error=on_error,
            storage_options=self.storage_options,
            max_row_group_bytes=max_row_group_bytes,
            max_chars=max_chars,
            extra_fields=extra_fields,
        )


def parquet_source(source: Any, storage_options: dict[str, Any] | None = None) -> ParquetSource:
    """Resolve a ``.parquet`` path or URL, a list or glob of them, or a Hugging Face ``datasets.Dataset``.

    Raises:
        FileNotFoundError: a local file is missing, or a glob matches nothing.
    """
    entries = parquet.parquet_entries(source, storage_options)
    dataset = parquet.is_arrow_dataset(source)
    return ParquetSource(
        entries,
        path=parquet.entry_name(source) if dataset else source,
        name=storage.shown(source) if isinstance(source, (str, os.PathLike)) else parquet.entry_name(entries[0]),
        key_path="dataset.parquet" if dataset else entries[0],
        storage_options=storage_options,
    )


def check_record(
    record: dict[str, Any], where: str, *, text_field: str, label_field: str | None, max_chars: int | None = None,
    extra_fields: Sequence[str] = (),
) -> tuple[str, Any]:
    """``(text, label)`` of one Parquet row, checked as a JSONL row is; a null counts as missing
    (in the ``extra_fields`` too); a text over ``max_chars`` characters is refused (None: no limit)."""
    for name in (text_field, label_field, *extra_fields):
        if name is not None and record[name] is None:
            raise DataError(f"{where}: column {name!r} is null; drop the row", skip_hint="or pass on_error='skip'")
    return check_fields(record, where, text_field=text_field, label_field=label_field, max_chars=max_chars)


def parquet_rows(
    entries: list[Any],
    *,
    text_field: str = "text",
    label_field: str | None = None,
    on_error: str = "raise",
    storage_options: dict[str, Any] | None = None,
    max_row_group_bytes: int = parquet.MAX_ROW_GROUP_BYTES,
    max_chars: int | None = None,
    extra_fields: Sequence[str] = (),
) -> Iterator[tuple[int, str, Any, tuple]]:
    """``(row, text, label, extras)`` for each usable row of ``entries``, checked by :func:`check_record`,
    after checking that every entry has the columns (a :class:`DataError` listing them if not);
    ``extras`` holds the row's value of each of the ``extra_fields``."""
    check_on_error(on_error)
    for entry in entries:
        parquet.check_columns(entry, {"text_field": text_field, "label_field": label_field}, storage_options)
        for name in extra_fields:
            parquet.check_columns(entry, {"extra_fields": name}, storage_options)
    columns = [name for name in (text_field, label_field, *extra_fields) if name is not None]
    sizes = parquet.row_counts(entries, storage_options)
    fields = {"text_field": text_field, "label_field": label_field, "extra_fields": extra_fields}
    options = {"storage_options": storage_options, "max_row_group_bytes": max_row_group_bytes}
    for row, where, record in parquet.iter_rows(entries, columns, sizes, **options):
        try:
            text, label = check_record(record, where, max_chars=max_chars, **fields)
            extras = tuple(extra_value(record, where, name) for name in extra_fields)
        except DataError as error:
            skip_or_raise(error, on_error)
            continue
        yield row, text, label, extras


def read_parquet_corpus(
    entries: list[Any],
    tokenizer: Tokenizer | tokenizing.TruncatingEncoder,
    *,
    text_field: str = "text",
    label_field: str | None = None,
    max_length: int | None = None,
    on_error: str = "raise",
    storage_options: dict[str, Any] | None = None,
    max_row_group_bytes: int = parquet.MAX_ROW_GROUP_BYTES,
    max_chars: int | None = None,
    extra_fields: Sequence[str] = (),
) -> ParquetCorpus:
    """Read and tokenise every row of ``entries`` (from :func:`recipes.core.parquet.parquet_entries`).

    ``tokenizer`` may be a :class:`recipes.core.tokenizing.TruncatingEncoder` (then ``max_length`` is its own);
    a text over ``max_chars`` characters is a DataError naming its row (None: no limit); each of the
    ``extra_fields`` is kept as an array in ``extras`` (:func:`recipes.text.corpus_files.extra_arrays`).
    """
    if not isinstance(tokenizer, tokenizing.TruncatingEncoder):  # once, not a copy per chunk
        tokenizer = tokenizing.TruncatingEncoder(tokenizer, max_length)
    parts, label_parts, row_parts, texts, labels, rows = [], [], [], [], [], []

    def flush() -> None:
        parts.append(tokenizing.encode_texts(tokenizer, texts, max_length=max_length, progress=False))
        row_parts.append(np.asarray(rows, dtype=np.int64))
        if label_field is not None:
            label_parts.append(label_array(labels))
        for chunk in (texts, labels, rows):
            chunk.clear()

    fields = {"text_field": text_field, "label_field": label_field, "max_row_group_bytes": max_row_group_bytes}
    options = {"on_error": on_error, "storage_options": storage_options, "max_chars": max_chars}
    extras: dict[str, list[Any]] = {name: [] for name in extra_fields}
    for row, text, label, values in parquet_rows(entries, **options, **fields, extra_fields=extra_fields):
        for name, value in zip(extra_fields, values):
            extras[name].append(value)
        texts.append(text)
        labels.append(label)
        rows.append(row)
        if len(texts) == CHUNK_ROWS:
            flush()
    if texts:
        flush()
    label_ids, names = number_labels(label_parts) if label_field is not None else (None, None)
    rows = np.concatenate(row_parts) if row_parts else np.zeros(0, dtype=np.int64)
    return ParquetCorpus(arrays.concat_tokens(parts, tokenizer.dtype), label_ids, names, rows, extra_arrays(extras))


def label_array(labels: list[Any]) -> np.ndarray:
    """One chunk's labels: int64 if every one is an integer (or integer text), else text."""
    as_ints = [integer_label(label) for label in labels]
    if None not in as_ints:
        return np.asarray(as_ints, dtype=np.int64)
    return np.asarray([str(label) for label in labels], dtype=str)


def number_labels(parts: list[np.ndarray]) -> tuple[np.ndarray, list[str] | None]:
    """The chunks' labels as ``label_ids`` numbers them: integers kept, else sorted names."""
    if all(part.dtype == np.int64 for part in parts):
        return (np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)), None
    names, ids = np.unique(np.concatenate([part.astype(str) for part in parts]), return_inverse=True)
    return ids.astype(np.int64).reshape(-1), [str(name) for name in names]
