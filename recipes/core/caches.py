"""Caches on disk: a dataset's index built once and reused while its files are unchanged, a
size-bounded cache of remote files, and blob files of many small records.

``from recipes.core import caches``, then ``caches.cached_index(...)``: one name of the facade for these, each
documented on the reference page and loaded on first use.
"""

# ruff: noqa: F401  (the TYPE_CHECKING block below imports each name for static readers)
from __future__ import annotations

from typing import TYPE_CHECKING

from recipes.core.contracts.lazy import lazy_names

# public name -> the module of recipes.core that defines it
HOMES = {
    "BlobFile": "sources.blob_file",
    "BlobWriter": "sources.blob_file",
    "cached_blobs": "sources.blob_file",
    "DiskCache": "sources.disk_cache",
    "file_crc32": "sources.disk_cache",
    "locked_file": "sources.disk_cache",
    "remove_if_abandoned": "sources.disk_cache",
    "rename_locked": "sources.disk_cache",
    "cached_index": "sources.index_cache",
    "file_identities": "sources.index_cache",
    "load_index": "sources.index_cache",
    "save_index": "sources.index_cache",
}
__all__ = sorted(HOMES)
__getattr__, __dir__ = lazy_names(__name__, HOMES)

if TYPE_CHECKING:  # where each name lives, for static readers
    from recipes.core.sources.blob_file import BlobFile, BlobWriter, cached_blobs
    from recipes.core.sources.disk_cache import DiskCache, file_crc32, locked_file, remove_if_abandoned, rename_locked
    from recipes.core.sources.index_cache import cached_index, file_identities, load_index, save_index
