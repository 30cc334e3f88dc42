"""Read image-caption manifests: JSONL, CSV/TSV rows, or a COCO captions json.

    manifest = read_caption_manifest("data/train.jsonl")
    manifest.images[0], manifest.captions[0]     # 'images/0001.jpg', ['a cat on a mat', ...]
    manifest.where(0)                            # 'data/train.jsonl line 1' (for error messages)

Formats, chosen by the file suffix:
- ``.jsonl`` / ``.ndjson``: one object a line, ``{"image": ..., "caption": ...}`` or
  ``{"image": ..., "captions": [...]}``.
- ``.csv`` / ``.tsv``: a header with ``image`` and ``caption`` columns.
- ``.json``: COCO captions (``images`` with ``id`` + ``file_name``, ``annotations`` with
  ``image_id`` + ``caption``); captions keep the file's annotation order.

Every image name is checked lexically (no absolute paths, no ``..``) here; the dataset resolves
it under its root at open time. A bad row (malformed JSON, no image, an empty or missing
caption, an unsafe path) is a :class:`DataError` naming the file and line (COCO: the image or
annotation id) under ``on_error="raise"``; under ``"skip"`` it is dropped with a warning.
"""

from __future__ import annotations

import csv
import io
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from recipes.core import DataError, arrays, caches, check_on_error, skip_or_raise, storage, tokenizing
from recipes.text.corpus_files import is_unicode

FORMATS = {".jsonl": "jsonl", ".ndjson": "jsonl", ".csv": "csv", ".tsv": "tsv", ".json": "coco"}


@dataclass
class CaptionManifest:
    """Rows of a manifest: image names, their captions, and where each row came from.

    ``keys[i]`` is the manifest line of row i (``key_name`` "line"), or for COCO its image id
    (``key_name`` "image id"); :meth:`where` turns it into text for error messages.
    """

    path: Path | str  # a local path, or the URL it was read from
    key_name: str
    images: list[str] = field(default_factory=list)
    captions: list[list[str]] = field(default_factory=list)
    keys: list[int] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.images)

    def where(self, row: int) -> str:
        return f"{storage.shown(self.path)} {self.key_name} {self.keys[row]}"


@dataclass
class CaptionIndex:
    """What :class:`recipes.multimodal.ImageTextDataset` keeps of its source, a manifest or Parquet:
    numpy arrays, which forked workers share, and a blob file of embedded images."""

    images: arrays.StringArray  # image paths, '' for rows whose bytes are in ``blobs``
    blobs: caches.BlobFile | None  # embedded bytes (an empty entry for a path row); None if there are none
    tokens: arrays.TokenArray  # every caption, row after row
    counts: np.ndarray  # int64: captions per row
    entries: list[Any]  # the files read, in order (a datasets.Dataset stands for itself)
    sources: list[str]  # entry names, for messages
    source_of: np.ndarray  # int32: the entry of each row
    keys: np.ndarray  # int64: each row's line (or COCO image id, or row) within its entry
    key_name: str = "row"  # what keys count: "line", "image id" or "row"

    def where(self, row: int) -> str:
        """Where image row ``row`` comes from, e.g. ``'train.jsonl line 12'``."""
        return f"{self.sources[self.source_of[row]]} {self.key_name} {self.keys[row]}"


def index_caption_manifest(
    manifest: str | os.PathLike, encoder: tokenizing.TruncatingEncoder, *, on_error: str = "raise",
    storage_options: dict[str, Any] | None = None,
) -> CaptionIndex:
    """:func:`read_caption_manifest`'s rows as a :class:`CaptionIndex`, every caption tokenised."""
    rows = read_caption_manifest(manifest, on_error=on_error, storage_options=storage_options)
    flat = [caption for row in rows.captions for caption in row]
    return CaptionIndex(
        images=arrays.StringArray(rows.images), blobs=None, entries=[rows.path], sources=[storage.shown(rows.path)],
        tokens=tokenizing.encode_texts(encoder, flat, description="tokenizing captions"),
        counts=np.array([len(captions) for captions in rows.captions], dtype=np.int64),
        source_of=np.zeros(len(rows), dtype=np.int32), keys=np.asarray(rows.keys, dtype=np.int64),
        key_name=rows.key_name,
    )


def read_caption_manifest(
    manifest: str | os.PathLike, *, on_error: str = "raise", storage_options: dict[str, Any] | None = None
) -> CaptionManifest:
    """Read a JSONL, CSV, TSV or COCO captions manifest, a local path or an fsspec URL; see the
    module docstring. ``storage_options`` go to fsspec for a URL."""
    check_on_error(on_error)
    path, name = (manifest if storage.is_url(manifest) else Path(manifest)), storage.shown(manifest)
    kind = FORMATS.get(storage.suffix(manifest))
    if kind is None:
        raise ValueError(f"{name}: unknown manifest format {storage.suffix(manifest)!r}; expected one of {sorted(FORMATS)}")
    try:
        data = storage.read_bytes(path, storage_options)
    except FileNotFoundError:
        raise FileNotFoundError(f"manifest {name} does not exist") from None
    if kind == "coco":
        return _read_coco(path, name, data, on_error)
    out = CaptionManifest(path, "line")
    rows = _jsonl_rows(name, data) if kind == "jsonl" else _csv_rows(name, data, "\t" if kind == "tsv" else ",")
    for line, row in rows:
        try:
            image, captions = _parse_row(row, f"{name} line {line}")
        except DataError as error:
            skip_or_raise(error, on_error)
            continue
        out.images.append(image)
        out.captions.append(captions)
        out.keys.append(line)
    return out


def _jsonl_rows(name: str, data: bytes) -> Iterator[tuple[int, Any]]:
    for line, raw in enumerate(io.BytesIO(data), start=1):
        if not raw.strip():
            continue  # a trailing blank line is not a sample
        yield line, _json_row(raw, f"{name} line {line}")


def _json_row(raw: bytes, where: str) -> Any:
    """The parsed line, or the DataError that says what is wrong with it (raised by the caller)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        bad = raw[error.start : error.start + 4]
        return DataError(f"{where}: not valid UTF-8 (bytes {bad!r} at column {error.start}); re-encode the file as UTF-8")
    try:
        return json.loads(text)
    # ValueError: bad JSON, or an integer of more than 4300 digits; RecursionError: absurd nesting
    except (ValueError, RecursionError) as error:
        return DataError(f"{where}: not a JSON object ({type(error).__name__}: {str(error)[:100]})")


def _csv_rows(name: str, data: bytes, delimiter: str) -> Iterator[tuple[int, Any]]:
    # utf-8-sig: spreadsheets write a byte-order mark that would otherwise rename the first column.
    # surrogateescape keeps undecodable bytes as lone surrogates, so that _parse_row names the
    # line that holds them instead of the whole file failing with a UnicodeDecodeError.
    text = io.TextIOWrapper(io.BytesIO(data), newline="", encoding="utf-8-sig", errors="surrogateescape")
    with text as file:
        reader = csv.DictReader(file, delimiter=delimiter)
        missing = {"image", "caption"} - set(reader.fieldnames or ())
        if missing:
            raise DataError(
                f"{name}: header {reader.fieldnames} lacks the column(s) {sorted(missing)}; "
                "a CSV/TSV manifest needs 'image' and 'caption' columns"
            )
        line = reader.line_num + 1
        for row in reader:
            yield line, {"image": row["image"], "caption": row["caption"]}
            line = reader.line_num + 1  # a quoted caption may span several physical lines


def _parse_row(row: Any, where: str) -> tuple[str, list[str]]:
    if isinstance(row, DataError):
        raise row
    if not isinstance(row, dict):
        raise DataError(f"{where}: expected an object with 'image' and 'caption', got {type(row).__name__}")
    if "image" not in row:
        raise DataError(f"{where}: no 'image' key (keys: {sorted(row)})")
    image = check_image_name(row["image"], where)
    if "captions" in row:
        captions = row["captions"]
        if not isinstance(captions, list) or not captions:
            raise DataError(f"{where}: 'captions' must be a non-empty list of strings, got {captions!r}")
    elif "caption" in row:
        captions = [row["caption"]]
    else:
        raise DataError(f"{where}: no 'caption' or 'captions' key (keys: {sorted(row)})")
    for caption in captions:
        check_caption(caption, where)
    return image, list(captions)


def check_image_name(name: Any, where: str) -> str:
    """A manifest's image name, checked lexically (:func:`recipes.core.storage.check_relative`) and as UTF-8."""
    name = storage.check_relative(name, source=where)
    if not is_unicode(name):
        raise DataError(f"{where}: image name {name!r} is not valid UTF-8 text")
    return name


def check_caption(caption: Any, where: str) -> None:
    """Raise a DataError naming ``where`` unless ``caption`` is a non-empty, encodable string."""
    if not isinstance(caption, str):
        raise DataError(f"{where}: caption must be a string, got {caption!r}")
    if not is_unicode(caption):
        raise DataError(f"{where}: caption {caption[:60]!r} is not valid UTF-8 text (bad bytes or a lone surrogate)")
    if not caption.strip():
        raise DataError(f"{where}: empty caption {caption!r}")


def _coco_id(value: Any) -> bool:
    """COCO ids are integers; the dataset keeps them in an int64 array."""
    return isinstance(value, int) and not isinstance(value, bool) and -(2**63) <= value < 2**63


def _read_coco(path: Path | str, source: str, data: bytes, on_error: str) -> CaptionManifest:
    try:
        data = json.loads(data)
        images, annotations = data["images"], data["annotations"]
    # ValueError: bad UTF-8 or JSON, or a 4300-digit integer; RecursionError: absurd nesting
    except (ValueError, RecursionError, KeyError, TypeError) as error:
        raise DataError(
            f"{source}: not a COCO captions file with 'images' and 'annotations' ({type(error).__name__}: "
            f"{str(error)[:100]})"
        ) from None
    if not isinstance(images, list) or not isinstance(annotations, list):
        raise DataError(f"{source}: 'images' and 'annotations' must be lists")
    out = CaptionManifest(path, "image id")
    row_of: dict[int, int] = {}
    skipped: set[Any] = set()  # images already reported; their annotations go quietly
    for position, image in enumerate(images):
        if not isinstance(image, dict):
            skip_or_raise(DataError(f"{source}: images[{position}] is not an object: {image!r}"), on_error)
            continue
        image_id = image.get("id")
        where = f"{source} image id {image_id!r}"
        try:
            if not _coco_id(image_id):
                raise DataError(f"{source}: images[{position}] has id {image_id!r}; ids must be integers")
            name = check_image_name(image.get("file_name"), where)
            if image_id in row_of:
                raise DataError(f"{where}: the id appears twice in 'images'")
        except DataError as error:
            skip_or_raise(error, on_error)
            if _coco_id(image_id):
                skipped.add(image_id)
            continue
        row_of[image_id] = len(out.images)
        out.images.append(name)
        out.captions.append([])
        out.keys.append(image_id)
    for position, annotation in enumerate(annotations):
        if not isinstance(annotation, dict):
            skip_or_raise(DataError(f"{source}: annotations[{position}] is not an object: {annotation!r}"), on_error)
            continue
        image_id = annotation.get("image_id")
        where = f"{source} annotation id {annotation.get('id')!r}"
        if not _coco_id(image_id):
            skip_or_raise(DataError(f"{where}: image_id {image_id!r} is not an integer"), on_error)
            continue
        if image_id in skipped and image_id not in row_of:
            continue
        try:
            if image_id not in row_of:
                raise DataError(f"{where}: image_id {image_id!r} is not in 'images'")
            check_caption(annotation.get("caption"), where)
        except DataError as error:
            skip_or_raise(error, on_error)
            continue
        out.captions[row_of[annotation["image_id"]]].append(annotation["caption"])
    keep = []
    for row, captions in enumerate(out.captions):
        if captions:
            keep.append(row)
        else:
            skip_or_raise(DataError(f"{out.where(row)}: image has no caption annotation"), on_error)
    out.images = [out.images[row] for row in keep]
    out.captions = [out.captions[row] for row in keep]
    out.keys = [out.keys[row] for row in keep]
    return out
