"""Local paths and fsspec URLs as names: which is which, how a message shows one, its parts.

    shown("s3://key:secret@bucket/train.jsonl?sig=x")   # 's3://bucket/train.jsonl'
    suffix("https://host/data/train.JSONL?v=2")         # '.jsonl'
    join("gs://bucket/shards", "shard-0.tar")           # 'gs://bucket/shards/shard-0.tar'

No I/O here: reading is :mod:`recipes.core.sources.storage`. A URL is any ``scheme://...`` string; what
a message, warning or repr shows of it goes through :func:`shown` or :func:`cleaned`, which drop
its user:password and its query string, so credentials never reach a log.
"""

from __future__ import annotations

import os
import re
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import urlsplit, urlunsplit

_URLS = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]+")


def is_url(path: Any) -> bool:
    """True for ``scheme://...`` strings (fsspec URLs), False for local paths."""
    return isinstance(path, str) and "://" in path


def shown(path: str | os.PathLike) -> str:
    """``path`` as messages may show it: a URL loses its user:password and its query string."""
    if not is_url(path):
        return os.fspath(path)
    parts = urlsplit(path)
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def cleaned(text: str) -> str:
    """``text`` with every URL in it shown without its credentials (see :func:`shown`)."""
    return _URLS.sub(lambda match: shown(match[0]), text)


def has_glob(path: str | os.PathLike) -> bool:
    """Does ``path`` hold ``*``, ``?`` or ``[``? A URL's query string (``?sig=...``) does not count."""
    name = urlsplit(path).path if is_url(path) else os.fspath(path)
    return any(mark in name for mark in "*?[")


def suffix(path: str | os.PathLike) -> str:
    """The lower-case file suffix of a path or URL (``.jsonl``), its query string ignored."""
    name = urlsplit(path).path if is_url(path) else os.fspath(path)
    return PurePosixPath(name).suffix.lower() if is_url(path) else os.path.splitext(name)[1].lower()


def basename(path: str | os.PathLike) -> str:
    """The last component of a path or URL."""
    return PurePosixPath(urlsplit(path).path).name if is_url(path) else os.path.basename(os.fspath(path))


def join(root: str | os.PathLike, name: str) -> str | os.PathLike:
    """``name`` under ``root``: a URL gains ``/name``, a local folder a path component."""
    return f"{root.rstrip('/')}/{name}" if is_url(root) else Path(root) / name


def parent(path: str | os.PathLike) -> str | os.PathLike:
    """The folder of a local path, or of a URL (its last ``/``-component dropped)."""
    if not is_url(path):
        return Path(path).parent
    scheme, rest = path.split("://", 1)
    return f"{scheme}://{rest.split('?')[0].rsplit('/', 1)[0]}"
