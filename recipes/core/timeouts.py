"""Default connect and read timeouts for remote storage, so that a silent server is an error.

    options = with_timeouts("https://host/shard-0.tar", storage_options)   # what fsspec is given
    read_timeout("https://host/shard-0.tar", options)                      # 20.0: for messages

Without them a server that accepts a connection and never answers holds a read for aiohttp's
300 s per request (fsspec's HTTP), or botocore's 60 s times its own retries (S3), at every
retry: half an hour for one object. With them, a request that gets no byte for ``READ_TIMEOUT_S``
(or cannot connect in ``CONNECT_TIMEOUT_S``) fails as a timeout, which :func:`recipes.core.retries.retried`
retries like any transient fault; after ``RETRIES + 1`` attempts the error names the URL, the
timeout and the attempts. A download that keeps sending bytes has no time limit. On S3, s3fs
and botocore retry a timed-out request themselves before this layer sees it, so the bound
there is a multiple of HTTP's: lower ``read_timeout`` for a tighter one.

Overridable through ``storage_options``, as each backend spells it:
``{"client_kwargs": {"timeout": aiohttp.ClientTimeout(sock_connect=10, sock_read=60)}}`` for
``http(s)://``; ``{"config_kwargs": {"connect_timeout": 10, "read_timeout": 60}}`` for ``s3://``.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

CONNECT_TIMEOUT_S = 5.0  # a TCP and TLS handshake to an object store takes well under a second
READ_TIMEOUT_S = 20.0  # no byte at all for this long: the server is stuck, not slow
# What a never-answering server costs with the defaults, at most: retries.RETRIES + 1 = 6 attempts
# of CONNECT_TIMEOUT_S + READ_TIMEOUT_S each, plus the backoffs (0.1 s doubling: 3.1 s), < 3 minutes
HTTP_SCHEMES = ("http", "https")
S3_SCHEMES = ("s3", "s3a")
# botocore's names for a request that timed out (ReadTimeoutError, ConnectTimeoutError)
TIMEOUT_NAMES = frozenset({"ReadTimeoutError", "ConnectTimeoutError", "ServerTimeoutError", "FSTimeoutError"})


def with_timeouts(url: str, storage_options: dict[str, Any] | None) -> dict[str, Any]:
    """``storage_options`` with the default timeouts for ``url``'s backend, where the caller set none."""
    options = dict(storage_options or {})
    scheme = urlsplit(url).scheme
    if scheme in HTTP_SCHEMES:
        client = dict(options.get("client_kwargs") or {})
        if "timeout" not in client:
            import aiohttp  # fsspec's HTTP backend: present wherever http:// URLs are read

            client["timeout"] = aiohttp.ClientTimeout(total=None, sock_connect=CONNECT_TIMEOUT_S,
                                                      sock_read=READ_TIMEOUT_S)
            options["client_kwargs"] = client
    elif scheme in S3_SCHEMES:
        config = dict(options.get("config_kwargs") or {})
        config.setdefault("connect_timeout", CONNECT_TIMEOUT_S)
        config.setdefault("read_timeout", READ_TIMEOUT_S)
        options["config_kwargs"] = config
    return options


def read_timeout(url: str, storage_options: dict[str, Any] | None) -> float | None:
    """The seconds without a byte after which a request to ``url`` fails, as ``storage_options``
    (with :func:`with_timeouts`'s defaults) set it; None where unknown (other backends)."""
    options = with_timeouts(url, storage_options)
    scheme = urlsplit(url).scheme
    if scheme in HTTP_SCHEMES:
        timeout = options["client_kwargs"]["timeout"]
        seconds = getattr(timeout, "sock_read", None) or getattr(timeout, "total", None)
        return None if seconds is None else float(seconds)
    if scheme in S3_SCHEMES:
        return float(options["config_kwargs"]["read_timeout"])
    return None


def is_timeout(error: BaseException) -> bool:
    """Did ``error`` (or an error it was raised from) come from a request that timed out?"""
    seen = 0
    while error is not None and seen < 8:
        if isinstance(error, TimeoutError) or any(kind.__name__ in TIMEOUT_NAMES for kind in type(error).__mro__):
            return True
        error, seen = error.__cause__ or error.__context__, seen + 1
    return False
