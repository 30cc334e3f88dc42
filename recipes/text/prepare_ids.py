"""A training-ready copy of a text corpus: each sample tokenised once, its ids in Parquet shards that
:meth:`TokenizedTextDataset.from_ids` reads with no tokenising, with a manifest.

    summary = prepare("train.jsonl", "prepared/", "tokenizer.json", max_length=2048, workers=16)
    print(summary)                                     # written, skipped and why, bytes, time
    dataset = TokenizedTextDataset.from_ids("prepared/shard-*.parquet", "prepared/tokenizer.json")

The source is read as :class:`TokenizedTextDataset` reads it: a ``.txt`` (a line a sample),
``.jsonl`` or ``.csv`` file (``text_field``, ``label_field``), or a ``.parquet`` file's text column.
Each text is tokenised as the text path tokenises it (:class:`recipes.core.tokenizing.TruncatingEncoder`:
the tokenizer's own truncation at ``max_length``, its special tokens kept), so the ids equal those
``TokenizedTextDataset(source, tokenizer, max_length=...)`` holds. A shard is a Parquet file of one
row group: ``input_ids`` ``list<int32>`` and, with a ``label_field``, ``label`` (int64 where every
label is an integer, else the names). The tokenizer is written beside the shards as
``tokenizer.json``, and its sha256 is among the options a rerun must match.

The shards are written as every domain's ``prepare`` writes them (:func:`recipes.core.streams.write_prepared`):
byte-identical for any ``workers``, resumed by the same call after a stop at any point, a destination
of other options refused unless ``overwrite=True``, and ``manifest.json`` with each shard's sha256.
For a corpus on a cluster, Ray Data with :class:`recipes.text.TokenizeBatch` writes the same column.
"""

from __future__ import annotations

import functools
import hashlib
import os
from typing import Any

import numpy as np

from recipes.core import DataError, parquet, skip_or_raise, storage, streams, tokenizing
from recipes.text.corpus_files import ROW_FORMATS, check_format, read_rows
from recipes.text.parquet_corpus import label_array

__all__ = ["encode_text", "prepare"]


def prepare(
    source: str | os.PathLike,
    dest: str | os.PathLike,
    tokenizer: Any,
    *,
    max_length: int | None = None,
    text_field: str = "text",
    label_field: str | None = None,
    samples_per_shard: int = 100_000,
    workers: int | None = None,
    on_error: str = "raise",
    overwrite: bool = False,
    progress: bool = True,
    storage_options: dict[str, Any] | None = None,
) -> streams.PrepareSummary:
    """Write the corpus ``source`` as Parquet shards of token ids (see the module docstring).

    Args:
        source: a local ``.txt``, ``.jsonl``, ``.csv`` or ``.parquet`` file.
        dest: the folder to write (made if missing): ``shard-000000.parquet``, ..., ``tokenizer.json``,
            ``manifest.json``.
        tokenizer: a ``tokenizers.Tokenizer`` or a tokenizer.json path.
        max_length: keep at most this many ids per sample, special tokens included (None: all).
        text_field, label_field: the text's and the label's field or column (a ``.txt`` has neither).
        samples_per_shard, workers, on_error, overwrite, progress, storage_options: as :func:`recipes.vision.prepare`
            takes them; a line that does not parse or a text that tokenises to no ids is named
            (``on_error="skip"``: left out and counted).
    """
    tokenizing.check_truncation(max_length, "tokenizer")
    streams.local_folder(source, "prepare")
    with streams.collect_skips() as dropped:  # lines that do not parse: named in the summary
        texts, labels, places = _read(source, text_field, label_field, on_error)
    kind, labels = _labels(labels)
    encoded = tokenizing.load_tokenizer(tokenizer).to_str()
    name = storage.shown(source)
    # every row holds the one tokenizer string: pickled once a shard, loaded once a worker process
    rows = [(f"{row:09d}", f"{name} {place}", (text, None if labels is None else labels[row], encoded))
            for row, (text, place) in enumerate(zip(texts, places))]
    rows += [(None, None, error) for error in dropped]
    options = {"tokenizer": hashlib.sha256(encoded.encode()).hexdigest(), "max_length": max_length, "labels": kind}
    pa = _pyarrow()
    columns = [("input_ids", pa.list_(pa.int32()))]
    if kind is not None:
        columns.append(("label", pa.int64() if kind == "int64" else pa.string()))
    return streams.write_prepared(
        dest, rows, encode_text, domain="text", options=options, source=source,
        beside={"tokenizer.json": encoded.encode()},
        run=streams.PrepareRun(samples_per_shard, workers, on_error, overwrite, progress,
                               storage_options=storage_options, shards=streams.ParquetShards(pa.schema(columns))),
    )


def encode_text(payload: tuple[str, Any, str], where: str, options: dict[str, Any]) -> tuple[
        list[tuple[str, Any]], None, int]:
    """A row's columns (its ids as the text path tokenises them, its label), no PSNR, and bytes read."""
    text, label, tokenizer = payload
    ids = np.asarray(_encoder(tokenizer, options["max_length"])([text])[0], dtype=np.int32)
    if len(ids) == 0:
        raise DataError(f"{where}: tokenises to no ids")
    row = [("input_ids", ids)] + ([] if options["labels"] is None else [("label", label)])
    return row, None, len(text.encode("utf-8"))


@functools.lru_cache(maxsize=4)
def _encoder(tokenizer: str, max_length: int | None) -> tokenizing.TruncatingEncoder:
    """The encoder of one prepare run (``tokenizer``: its JSON), made once per worker process."""
    from tokenizers import Tokenizer

    return tokenizing.TruncatingEncoder(Tokenizer.from_str(tokenizer), max_length)


def _read(source: str | os.PathLike, text_field: str, label_field: str | None,
          on_error: str) -> tuple[list[str], list[Any] | None, list[str]]:
    """The texts, raw labels (None without a ``label_field``) and each row's place for messages."""
    suffix = check_format(source, (*ROW_FORMATS, ".parquet"))
    if suffix != ".parquet":
        rows = read_rows(source, text_field=text_field, label_field=label_field, on_error=on_error)
        return rows.texts, rows.labels, [f"line {line}" for line in rows.lines]
    _pyarrow()
    import pyarrow.parquet as pq

    table = pq.read_table(os.fspath(source))
    wanted = [text_field] + ([label_field] if label_field is not None else [])
    missing = [column for column in wanted if column not in table.column_names]
    if missing:
        raise ValueError(f"{storage.shown(source)}: no column {missing}; its columns are {table.column_names}")
    texts = table.column(text_field).to_pylist()
    for row, text in enumerate(texts):
        if not isinstance(text, str) or not text:
            skip_or_raise(DataError(f"{storage.shown(source)} row {row}: the text {text_field!r} is missing or empty"),
                          on_error)
    kept = [row for row, text in enumerate(texts) if isinstance(text, str) and text]
    labels = None if label_field is None else table.column(label_field).to_pylist()
    return ([texts[row] for row in kept], None if labels is None else [labels[row] for row in kept],
            [f"row {row}" for row in kept])


def _labels(labels: list[Any] | None) -> tuple[str | None, list[Any] | None]:
    """``(column type, labels as stored)``: int64 where every label is an integer, else their text."""
    if labels is None:
        return None, None
    stored = label_array(labels)
    return ("int64" if stored.dtype == np.int64 else "string"), stored.tolist()


def _pyarrow() -> Any:
    parquet.require_pyarrow()  # its ImportError names the pip command
    import pyarrow

    return pyarrow
