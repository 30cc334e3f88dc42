"""Indexes that cost a read of the data (line offsets, tar sample offsets), kept in a ``cache_dir``.

    arrays = cached_index(cache_dir, "lines", file_identities(paths, sizes), build)  # build() -> arrays
    arrays = load_index(cache_dir, "headers", identity)   # or None; save_index(...) keeps new ones

A stream that cuts its readers' shares by count reads every file once when it is built (on rank 0);
for a large remote corpus that is a download before the first step. With a ``cache_dir`` the index
is kept there as one ``.npz`` of integer arrays (loaded with ``allow_pickle=False``: nothing in it
runs), named by a digest of what it indexes, so the next build of the same files reads none of them.
Files are known by path, size and (local files) modification time, never by their bytes: remote
objects are taken as written once, never changed in place, as :mod:`recipes.core.sources.disk_cache` takes them.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from recipes.core.sources.paths import cache_folder
from recipes.core.sources.storage import is_url

INDEX_VERSION = 1  # part of the key: bump when an index's arrays or the rules that make them change


def file_identities(paths: Sequence[Any], sizes: Sequence[int | None] | None = None) -> list[list[Any]]:
    """``[path, size, modification time]`` of each file (a URL's time None: objects are not rewritten)."""
    sizes = [None] * len(paths) if sizes is None else sizes
    identities = []
    for path, size in zip(paths, sizes):
        if is_url(path):
            identities.append([str(path), size, None])
        else:
            stat = os.stat(path)
            identities.append([os.path.abspath(path), stat.st_size, stat.st_mtime_ns])
    return identities


def cached_index(
    cache_dir: str | os.PathLike | None, kind: str, identity: list[Any], build: Callable[[], dict[str, np.ndarray]]
) -> dict[str, np.ndarray]:
    """``build()``'s integer arrays, from ``<cache_dir>/<kind>-index-<digest>.npz`` when an earlier
    build of the same ``identity`` left them there (any unreadable file is built again and replaced)."""
    if cache_dir is None:
        return build()
    arrays = load_index(cache_dir, kind, identity)
    if arrays is None:
        arrays = build()
        save_index(cache_dir, kind, identity, arrays)
    return arrays


def load_index(cache_dir: str | os.PathLike, kind: str, identity: list[Any]) -> dict[str, np.ndarray] | None:
    """The arrays :func:`save_index` kept for ``identity``, or None (none yet, or a damaged file)."""
    try:
        with np.load(_index_path(cache_dir, kind, identity), allow_pickle=False) as stored:
            return {name: stored[name] for name in stored.files}
    except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile):
        return None


def save_index(cache_dir: str | os.PathLike, kind: str, identity: list[Any], arrays: dict[str, np.ndarray]) -> None:
    """Keep ``arrays`` (numbers only: they load without pickle) for ``identity``, replacing any earlier."""
    path = _index_path(cache_dir, kind, identity)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f"{path.name}.{secrets.token_hex(4)}.tmp")
    with open(partial, "wb") as file:  # a file object: savez would add ".npz" to a name
        np.savez(file, **arrays)
    os.replace(partial, path)  # readers see the whole index or none


def _index_path(cache_dir: str | os.PathLike, kind: str, identity: list[Any]) -> Path:
    digest = hashlib.sha256(json.dumps([INDEX_VERSION, kind, identity]).encode("utf-8")).hexdigest()[:32]
    return cache_folder(cache_dir, option="index_dir") / f"{kind}-index-{digest}.npz"
