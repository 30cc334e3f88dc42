"""A tokenised corpus on disk: ids, offsets and per-sample columns as plain ``.npy`` files.

    prefix = cache_prefix("~/.cache/recipes", "train.jsonl", data, tokenizer, ["label", 512])
    if is_cached(prefix):
        tokens, columns, meta = load_cache(prefix)           # memory-mapped, nothing tokenised
    else:
        save_cache(prefix, tokens, {"lines": lines, "labels": labels}, label_names=names)

The key hashes the file's bytes, the tokenizer's JSON and the reading options, so any change to
one of them is a new entry, never a stale hit. Nothing is pickled (``.npy`` without objects and a
``.json``), so a cache directory cannot run code. Each file is written under a temporary name and
renamed into place, the ``.json`` last: concurrent ranks and killed runs never read half a cache.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path, PurePosixPath
from typing import Any

import numpy as np
from tokenizers import Tokenizer

from recipes.core.arrays import TokenArray
from recipes.core.storage import basename

CACHE_VERSION = 2  # part of the key: bump when the stored layout or the reading rules change


def cache_prefix(
    cache_dir: str | os.PathLike, path: str | os.PathLike, data: bytes, tokenizer: Tokenizer, options: list
) -> Path:
    """``<cache_dir>/<file stem>-<hash>``, hashing ``data``, the tokenizer and ``options`` (JSON values)."""
    digest = hashlib.sha256(data)
    digest.update(tokenizer.to_str().encode("utf-8"))
    digest.update(json.dumps([CACHE_VERSION, *options]).encode("utf-8"))
    stem = PurePosixPath(basename(path)).stem  # a URL's file name, without its query string
    return Path(cache_dir).expanduser() / f"{stem}-{digest.hexdigest()[:32]}"


def is_cached(prefix: Path) -> bool:
    """True once :func:`save_cache` has finished writing ``prefix``."""
    return _meta(prefix).is_file()


def save_cache(prefix: Path, tokens: TokenArray, columns: dict[str, np.ndarray | None], **meta: Any) -> None:
    """Store ``tokens``, each column that is not None (numbers only) and ``meta`` (JSON values)."""
    prefix.parent.mkdir(parents=True, exist_ok=True)
    kept = {name: array for name, array in columns.items() if array is not None}
    kept.update(ids=tokens.ids, offsets=tokens.offsets)
    for name, array in kept.items():
        _publish(_column(prefix, name), array)
    record = {"version": CACHE_VERSION, "samples": len(tokens), "columns": sorted(kept.keys() - {"ids", "offsets"}), **meta}
    _publish(_meta(prefix), json.dumps(record).encode("utf-8"))  # last: its presence means complete


def load_cache(prefix: Path) -> tuple[TokenArray, dict[str, np.ndarray], dict[str, Any]]:
    """``(tokens, columns, meta)`` as :func:`save_cache` stored them, arrays memory-mapped."""
    meta = json.loads(_meta(prefix).read_text(encoding="utf-8"))
    columns = {name: np.load(_column(prefix, name), mmap_mode="r", allow_pickle=False) for name in meta["columns"]}
    ids, offsets = (np.load(_column(prefix, name), mmap_mode="r", allow_pickle=False) for name in ("ids", "offsets"))
    return TokenArray(ids, np.asarray(offsets, dtype=np.int64)), columns, meta


def _meta(prefix: Path) -> Path:
    return prefix.with_name(f"{prefix.name}.json")


def _column(prefix: Path, name: str) -> Path:
    return prefix.with_name(f"{prefix.name}.{name}.npy")


def _publish(target: Path, content: np.ndarray | bytes) -> None:
    partial_file = target.with_name(f"{target.name}.{os.getpid()}.tmp")
    with open(partial_file, "wb") as file:
        if isinstance(content, np.ndarray):
            np.save(file, content, allow_pickle=False)
        else:
            file.write(content)
    os.replace(partial_file, target)  # atomic: a reader sees the old file or the whole new one
