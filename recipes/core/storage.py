"""Local paths and fsspec URLs alike: reading bytes and streams (retries and a deadline), sizes and
globs, names and parents, paths kept under a root, class folders, and a URL shown without
its secrets.

``from recipes.core import storage``, then ``storage.read_bytes(...)``: one name of the facade for these, each
documented on the reference page and loaded on first use.
"""

# ruff: noqa: F401  (the TYPE_CHECKING block below imports each name for static readers)
from __future__ import annotations

from typing import TYPE_CHECKING

from recipes.core.contracts.lazy import lazy_names

# public name -> the module of recipes.core that defines it
HOMES = {
    "basename": "sources.urls",
    "has_glob": "sources.urls",
    "is_url": "sources.urls",
    "join": "sources.urls",
    "parent": "sources.urls",
    "shown": "sources.urls",
    "suffix": "sources.urls",
    "filesystem": "sources.storage",
    "glob_sizes": "sources.storage",
    "open_stream": "sources.storage",
    "read_bytes": "sources.storage",
    "stream_sizes": "sources.storage",
    "UnderRoot": "sources.paths",
    "cache_folder": "sources.paths",
    "check_relative": "sources.paths",
    "resolve_under": "sources.paths",
    "class_folder_files": "sources.class_folders",
}
__all__ = sorted(HOMES)
__getattr__, __dir__ = lazy_names(__name__, HOMES)

if TYPE_CHECKING:  # where each name lives, for static readers
    from recipes.core.sources.class_folders import class_folder_files
    from recipes.core.sources.paths import UnderRoot, cache_folder, check_relative, resolve_under
    from recipes.core.sources.storage import filesystem, glob_sizes, open_stream, read_bytes, stream_sizes
    from recipes.core.sources.urls import basename, has_glob, is_url, join, parent, shown, suffix
