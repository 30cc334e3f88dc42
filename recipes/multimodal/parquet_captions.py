"""Image-caption rows from Parquet files (or a Hugging Face Dataset), and the numpy index built from them.

    for row in caption_rows("laion-*.parquet", image_field="image", caption_field="caption"):
        row.where, row.name, row.data, row.captions     # 'laion-0.parquet row 3', '', b'\\xff\\xd8...', ['a dog']
    index = index_caption_parquet("train.parquet", tokenizer, max_length=77)

The image column holds, per row, one of:
- a path (string) relative to the image root, checked as a manifest's names are
  (:func:`recipes.multimodal.caption_files.check_image_name`: no absolute paths, no ``..``);
- the encoded bytes (binary);
- a Hugging Face ``Image`` struct ``{"bytes", "path"}``: its bytes when present, else its path.
The caption column holds a string or a list of strings. With the default ``caption_field``
("caption") a file without that column but with a ``captions`` column uses that one, as a
JSONL manifest row may. A bad row is a :class:`DataError` naming the file and row, or is dropped
with a warning under ``on_error="skip"``. Embedded bytes are copied into a memory-mapped
:class:`recipes.core.caches.BlobFile`; names and caption ids go into flat numpy arrays.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
from tokenizers import Tokenizer

from recipes.core import DataError, arrays, caches, check_on_error, parquet, skip_or_raise, tokenizing
from recipes.multimodal.caption_files import CaptionIndex, check_caption, check_image_name

CHUNK_ROWS = 4096  # rows whose captions are tokenised in one call


@dataclass
class CaptionRow:
    """One usable row: ``name`` is the image path ('' when embedded), ``data`` its bytes (or None)."""

    source: int  # which entry (file) it came from
    row: int  # its row within that entry
    where: str
    name: str
    data: bytes | None
    captions: list[str]


def caption_rows(
    source: Any,
    *,
    image_field: str = "image",
    caption_field: str = "caption",
    on_error: str = "raise",
    storage_options: dict[str, Any] | None = None,
    max_row_group_bytes: int = parquet.MAX_ROW_GROUP_BYTES,
) -> Iterator[CaptionRow]:
    """The usable rows of a Parquet source (see the module docstring), a row group at a time."""
    check_on_error(on_error)
    entries = parquet.parquet_entries(source, storage_options)
    for number, (entry, size) in enumerate(zip(entries, parquet.row_counts(entries, storage_options))):
        captions = caption_field
        if caption_field == "caption" and "caption" not in (present := parquet.columns_of(entry, storage_options)):
            captions = "captions" if "captions" in present else caption_field
        parquet.check_columns(entry, {"image_field": image_field, "caption_field": captions}, storage_options)
        options = {"storage_options": storage_options, "max_row_group_bytes": max_row_group_bytes}
        for row, where, record in parquet.iter_rows([entry], [image_field, captions], [size], **options):
            try:
                name, data = parse_image(record[image_field], where, image_field)
                texts = parse_captions(record[captions], where, captions)
            except DataError as error:
                skip_or_raise(error, on_error)
                continue
            yield CaptionRow(number, row, where, name, data, texts)


def parse_image(value: Any, where: str, column: str = "image") -> tuple[str, bytes | None]:
    """``(path, None)`` or ``('', bytes)`` from one image cell (path, bytes or ``{"bytes", "path"}``)."""
    if isinstance(value, dict):  # Hugging Face's Image feature
        if value.get("bytes"):
            return "", value["bytes"]
        value = value.get("path")
    if isinstance(value, (bytes, bytearray)) and value:
        return "", bytes(value)
    if value is None or isinstance(value, (bytes, bytearray)):
        raise DataError(f"{where}: column {column!r} holds no image (null or empty)")
    return check_image_name(value, where), None


def parse_captions(value: Any, where: str, column: str = "caption") -> list[str]:
    """The captions of one cell: a string, or a non-empty list of strings."""
    if value is None:
        raise DataError(f"{where}: column {column!r} is null")
    captions = value if isinstance(value, list) else [value]
    if not captions:
        raise DataError(f"{where}: column {column!r} holds an empty list of captions")
    for caption in captions:
        check_caption(caption, where)
    return captions


def index_caption_parquet(
    source: Any,
    tokenizer: Tokenizer | tokenizing.TruncatingEncoder,
    *,
    image_field: str = "image",
    caption_field: str = "caption",
    max_length: int | None = None,
    on_error: str = "raise",
    storage_options: dict[str, Any] | None = None,
    cache_dir: str | os.PathLike | None = None,
    max_row_group_bytes: int = parquet.MAX_ROW_GROUP_BYTES,
) -> CaptionIndex:
    """Read a Parquet source into a :class:`CaptionIndex`, tokenising captions a chunk of rows at a time.

    With ``cache_dir``, the embedded bytes are kept there under a digest of the source's content
    and the options, and found again by the next construction with the same (another run, every
    rank of a job) instead of being copied anew: the rows are still read, their bytes not written.
    ``tokenizer`` may be a :class:`recipes.core.tokenizing.TruncatingEncoder` (then ``max_length`` is its own).
    """
    entries = parquet.parquet_entries(source, storage_options)  # globs expanded once: a listing call for a URL
    if not isinstance(tokenizer, tokenizing.TruncatingEncoder):  # once, not a copy per chunk
        tokenizer = tokenizing.TruncatingEncoder(tokenizer, max_length)
    fields = {"image_field": image_field, "caption_field": caption_field, "max_row_group_bytes": max_row_group_bytes}
    rows = caption_rows(entries, on_error=on_error, storage_options=storage_options, **fields)
    cached = key = None
    if cache_dir is not None:
        digest = hashlib.sha256(parquet.fingerprint(entries, storage_options))
        digest.update(repr((image_field, caption_field, on_error)).encode())
        key = f"captions-{digest.hexdigest()[:24]}"
        cached = caches.cached_blobs(cache_dir, key)
    writer = None if cached is not None else caches.BlobWriter(cache_dir, key)
    embedded, count = False, 0
    names, tokens, counts, sources, keys, chunk = [], [], [], [], [], []

    def flush() -> None:
        names.append(arrays.StringArray(row.name for row in chunk))
        flat = [caption for row in chunk for caption in row.captions]
        tokens.append(tokenizing.encode_texts(tokenizer, flat, max_length=max_length, progress=False))
        counts.append(np.array([len(row.captions) for row in chunk], dtype=np.int64))
        sources.append(np.array([row.source for row in chunk], dtype=np.int32))
        keys.append(np.array([row.row for row in chunk], dtype=np.int64))
        chunk.clear()

    try:
        for row in rows:
            if writer is not None:
                writer.add(row.data)
            embedded, count = embedded or row.data is not None, count + 1
            chunk.append(row)
            if len(chunk) == CHUNK_ROWS:
                flush()
        if chunk:
            flush()
    except BaseException:
        if writer is not None:
            writer.abort()
        raise
    if cached is not None and len(cached) != count:  # the same content and options: a damaged entry
        raise DataError(f"{cached.path}: {len(cached)} entries for {count} rows; delete it to rebuild it")
    blobs = cached if writer is None else writer.finish() if embedded else writer.abort()
    return CaptionIndex(
        entries=entries,
        images=arrays.concat_strings(names),
        blobs=blobs,
        tokens=arrays.concat_tokens(tokens, tokenizer.dtype),
        counts=_joined(counts, np.int64),
        sources=[parquet.entry_name(entry) for entry in entries],
        source_of=_joined(sources, np.int32),
        keys=_joined(keys, np.int64),
    )


def _joined(parts: list[np.ndarray], dtype: type) -> np.ndarray:
    return np.concatenate(parts) if parts else np.zeros(0, dtype=dtype)
