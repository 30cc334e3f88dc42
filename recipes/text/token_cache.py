"""A tokenised corpus on disk: ids, offsets and per-sample columns as plain ``.npy`` files.

    prefix = cache_prefix("~/.cache/recipes", "train.jsonl", data, tokenizer, ["label", 512])
    cached = reuse_cache(prefix)                    # None if absent, or damaged (warned by name)
    if cached is not None:
        tokens, columns, meta = cached              # memory-mapped, nothing tokenised
    else:
        save_cache(prefix, tokens, {"lines": lines, "labels": labels}, label_names=names)

The key hashes the file's bytes, the tokenizer's JSON and the reading options, so any change to
one of them is a new entry, never a stale hit. Nothing is pickled (``.npy`` without objects and a
``.json``), so a cache directory cannot run code. Each file is written under a temporary name and
renamed into place, the ``.json`` last: concurrent ranks and killed runs never read half a cache.

The ``.json`` records each file's size, dtype, shape and CRC-32, and its own CRC-32. Every open
checks the record and compares the sizes, dtypes, shapes and offsets (no ids read), and the ids are
served checked against the vocabulary, a block's maximum the first time it is read, so no id outside
it reaches a batch; ``verify=True`` also re-reads each file against its CRC-32, which alone catches a
file replaced by another valid array of the same size. A damaged entry is reported once, by file,
and rebuilt from the source.
A temporary file is ``flock``-ed by its writer, so one left by a killed run goes at the next save.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import re
import warnings
import zlib
from collections.abc import Sequence
from pathlib import Path, PurePosixPath
from typing import Any

import numpy as np
from tokenizers import Tokenizer

from recipes.core import DataError, arrays, caches, storage

CACHE_VERSION = 3  # part of the key: bump when the stored layout or the reading rules change
NUMBER_KINDS = "biuf"  # numpy dtype kinds a cached column may have: bool, ints, floats (never objects)

COLUMN_NAME = re.compile(r"\w+")  # a column's part of its file name: never a path
ENTRY_RECORD = re.compile(r".*-[0-9a-f]{32}\.json")  # what cache_prefix names, with _meta's suffix
TEMPORARY = re.compile(r".*-[0-9a-f]{32}\.(json|\w+\.npy)\.\d+\.[0-9a-f]+\.tmp")  # what _publish writes first
Cached = tuple[arrays.TokenArray, dict[str, np.ndarray], dict[str, Any]]  # (tokens, columns, meta)


class DamagedCacheWarning(UserWarning):
    """A cache entry differs from its record and is rebuilt; the message names the file."""


def cache_prefix(
    cache_dir: str | os.PathLike, path: str | os.PathLike, data: bytes, tokenizer: Tokenizer, options: list
) -> Path:
    """``<cache_dir>/<file stem>-<hash>``, hashing ``data``, the tokenizer and ``options`` (JSON values)."""
    digest = hashlib.sha256(data)
    digest.update(tokenizer.to_str().encode("utf-8"))
    digest.update(json.dumps([CACHE_VERSION, *options]).encode("utf-8"))
    stem = PurePosixPath(storage.basename(path)).stem  # a URL's file name, without its query string
    return storage.cache_folder(cache_dir) / f"{stem}-{digest.hexdigest()[:32]}"


def is_cached(prefix: Path) -> bool:
    """True once :func:`save_cache` has finished writing ``prefix`` (whole or not: see :func:`reuse_cache`)."""
    return _meta(prefix).is_file()


def save_cache(prefix: Path, tokens: arrays.TokenArray, columns: dict[str, np.ndarray | None], **meta: Any) -> None:
    """Store ``tokens``, each column that is not None (numbers only) and ``meta`` (JSON values)."""
    prefix.parent.mkdir(parents=True, exist_ok=True)
    for partial in prefix.parent.glob(f"{glob.escape(prefix.name)}.*.tmp"):
        caches.remove_if_abandoned(partial)  # left by a run killed while it wrote this entry
    kept = {name: array for name, array in columns.items() if array is not None}
    kept.update(ids=tokens.ids, offsets=tokens.offsets)
    files = {name: _publish(_column(prefix, name), array) for name, array in kept.items()}
    record = {
        "version": CACHE_VERSION,
        "samples": len(tokens),
        "columns": sorted(kept.keys() - {"ids", "offsets"}),
        "files": files,
        **meta,
    }
    record["record_crc32"] = _record_crc32(record)
    _publish(_meta(prefix), json.dumps(record).encode("utf-8"))  # last: its presence means complete


def load_cache(
    prefix: Path, *, verify: bool = False, require_columns: Sequence[str] = (), require_meta: Sequence[str] = (),
    vocab_size: int | None = None,
) -> Cached:
    """``(tokens, columns, meta)`` as :func:`save_cache` stored them, arrays memory-mapped.

    Args:
        prefix: the entry, from :func:`cache_prefix`.
        verify: also check each file's CRC-32 against the record (reads every byte).
        require_columns, require_meta: names the caller needs; a record without one is damaged.
        vocab_size: the tokens are served checked against it, each block of ids the first time
            (:meth:`recipes.core.arrays.TokenArray.bounded`): an id written over in place, which
            keeps the file's size, dtype and shape, is a DataError naming the file, never an item.

    Raises:
        DataError: naming the damaged file and what differs from the record.
    """
    meta_file = _meta(prefix)
    try:
        meta = json.loads(meta_file.read_text(encoding="utf-8"))
        if meta["version"] != CACHE_VERSION:
            raise DataError(f"{meta_file}: written in layout {meta['version']!r}, not {CACHE_VERSION}")
        if meta["record_crc32"] != _record_crc32(meta):
            raise DataError(f"{meta_file}: record differs from its own CRC-32")
        samples, names, files = meta["samples"], meta["columns"], meta["files"]
        if not isinstance(files, dict) or not isinstance(samples, int) or samples < 0:
            raise TypeError("'files' is not an object or 'samples' not a count")
        if not all(isinstance(name, str) and COLUMN_NAME.fullmatch(name) for name in names):
            raise TypeError(f"column names {names!r} are not plain words")
        missing = {*require_columns} - {*names} or {*require_meta} - meta.keys()
        if missing or len(set(names)) != len(names):
            raise KeyError(f"{sorted(missing)} missing or a column repeated in {names!r}")
        loaded = {name: _load(_column(prefix, name), files[name], verify) for name in ("ids", "offsets", *names)}
    except DataError:
        raise
    except (ValueError, RecursionError, KeyError, TypeError) as error:  # bad JSON, huge or deep values, fields
        raise DataError(f"{meta_file}: unreadable token cache record ({type(error).__name__}: {error})") from None
    ids, offsets = loaded.pop("ids"), loaded.pop("offsets")
    if ids.ndim != 1 or offsets.ndim != 1 or len(offsets) != samples + 1 or offsets[0] != 0 or offsets[-1] != len(ids):
        raise DataError(f"{_column(prefix, 'offsets')}: offsets do not span {samples} samples of {len(ids)} ids")
    if np.any(np.diff(offsets) < 0):
        raise DataError(f"{_column(prefix, 'offsets')}: offsets decrease")
    for name, column in loaded.items():
        if column.shape != (samples,):
            raise DataError(f"{_column(prefix, name)}: shape {list(column.shape)}, not the {samples} samples recorded")
    tokens = arrays.TokenArray(ids, np.asarray(offsets, dtype=np.int64))
    if vocab_size is not None:
        tokens.bounded(vocab_size, str(_column(prefix, "ids")))
    return tokens, loaded, meta


def reuse_cache(prefix: Path, **checks: Any) -> Cached | None:
    """:func:`load_cache` (``checks`` are its keyword arguments) if ``prefix`` is stored and whole;
    None if it is not stored, or damaged: then one :class:`DamagedCacheWarning` names the file,
    for the caller to rebuild the entry."""
    if not is_cached(prefix):
        return None
    try:
        return load_cache(prefix, **checks)
    except DataError as damage:
        warnings.warn(f"damaged token cache, rebuilt from its source: {damage}", DamagedCacheWarning, stacklevel=3)
        return None


def scrub_caches(folder: str | os.PathLike) -> list[tuple[str, str]]:
    """Check every token cache entry in ``folder`` whole (``verify=True``); delete the damaged
    ones, to be rebuilt from their source on next use, and the temporary files of dead writers.
    Returns ``(file name, what was wrong)`` for each entry or file deleted."""
    removed = []
    for meta_file in sorted(Path(folder).expanduser().glob("*.json")):
        if not ENTRY_RECORD.fullmatch(meta_file.name):
            continue
        prefix = meta_file.with_name(meta_file.name.removesuffix(".json"))
        try:
            load_cache(prefix, verify=True)
        except DataError as damage:
            meta_file.unlink(missing_ok=True)  # first: without it the entry is absent, never half there
            for column in prefix.parent.glob(f"{glob.escape(prefix.name)}.*.npy"):
                column.unlink(missing_ok=True)
            removed.append((meta_file.name, str(damage).removeprefix(f"{prefix.parent}{os.sep}")))
    for partial in sorted(Path(folder).expanduser().glob("*.tmp")):
        if TEMPORARY.fullmatch(partial.name) and caches.remove_if_abandoned(partial):
            removed.append((partial.name, "temporary file of a writer that died"))
    return removed


def _load(path: Path, record: dict[str, Any], verify: bool) -> np.ndarray:
    """``path`` memory-mapped, once its size, dtype and shape (and with ``verify`` its CRC-32)
    are those of ``record``; a DataError naming it otherwise."""
    try:
        size = path.stat().st_size
        if size != record["bytes"]:
            raise DataError(f"{path}: {size:,} bytes, recorded {record['bytes']:,}")
        if verify and caches.file_crc32(path) != record["crc32"]:
            raise DataError(f"{path}: content differs from its record (CRC-32)")
        array = np.load(path, mmap_mode="r", allow_pickle=False)
    except DataError:
        raise
    except OSError as error:
        raise DataError(f"{path}: cannot read token cache file ({error.strerror or error})") from None
    except Exception as error:  # noqa: BLE001 - numpy's header parser fails with several types on damaged bytes
        raise DataError(f"{path}: not a plain .npy array ({type(error).__name__}: {error})") from None
    kind, dtype, shape = array.dtype.kind, array.dtype.str, list(array.shape)
    if kind not in NUMBER_KINDS or dtype != record["dtype"] or shape != record["shape"]:
        raise DataError(f"{path}: {dtype} {shape}, recorded {record['dtype']} {record['shape']}")
    return array


def _record_crc32(record: dict[str, Any]) -> int:
    """The CRC-32 of ``record`` without its own, in a canonical JSON form."""
    rest = {key: value for key, value in record.items() if key != "record_crc32"}
    return zlib.crc32(json.dumps(rest, sort_keys=True).encode("utf-8"))


def _meta(prefix: Path) -> Path:
    return prefix.with_name(f"{prefix.name}.json")


def _column(prefix: Path, name: str) -> Path:
    return prefix.with_name(f"{prefix.name}.{name}.npy")


def _publish(target: Path, content: np.ndarray | bytes) -> dict[str, Any]:
    """Write ``content`` to ``target`` atomically; an array's record (bytes, CRC-32, dtype, shape)."""
    partial_file = target.with_name(f"{target.name}.{os.getpid()}.{os.urandom(6).hex()}.tmp")
    with caches.locked_file(partial_file) as file:
        if isinstance(content, np.ndarray):
            np.save(file, content, allow_pickle=False)
        else:
            file.write(content)
        file.flush()
        described = {"bytes": os.fstat(file.fileno()).st_size, "crc32": caches.file_crc32(partial_file)}
        caches.rename_locked(file, partial_file, target)  # atomic: a reader sees the old file or the whole new one
    if isinstance(content, np.ndarray):
        described.update(dtype=content.dtype.str, shape=list(content.shape))
    return described
