"""Default connect and read timeouts for remote storage, and a deadline across retries, so that a
silent server is an error within minutes.

    options = with_timeouts("https://host/shard-0.tar", storage_options)   # what fsspec is given
    read_timeout("https://host/shard-0.tar", options)                      # 20.0: for messages
    retry_deadline(storage_options)                                        # 120.0: for retried()

Without them a server that accepts a connection and never answers holds a read for aiohttp's
300 s per request (fsspec's HTTP), or botocore's 60 s times its own retries (S3), at every
retry: half an hour for one object. With them, a request that gets no byte for ``READ_TIMEOUT_S``
(or cannot connect in ``CONNECT_TIMEOUT_S``) fails as a timeout, which :func:`recipes.core.sources.retries.retried`
retries like any transient fault. An attempt may make two requests (fsspec's HTTP asks for a size
with a HEAD, then a GET), so six attempts could take four minutes: the attempts that time out
share one deadline, ``RETRY_DEADLINE_S``, and the read gives up once another attempt would pass
it. The error names the URL, the timeout, the attempts and the seconds spent. A download that
keeps sending bytes has no time limit. On S3, s3fs and botocore retry a timed-out request
themselves before this layer sees it: lower ``read_timeout`` for a tighter bound.

Overridable through ``storage_options``: the timeouts as each backend spells them,
``{"client_kwargs": {"timeout": aiohttp.ClientTimeout(sock_connect=10, sock_read=60)}}`` for
``http(s)://``, ``{"config_kwargs": {"connect_timeout": 10, "read_timeout": 60}}`` for ``s3://``;
the deadline as ``{"retry_deadline": 300}`` (seconds, any backend; this layer's own option, never
handed to fsspec).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

CONNECT_TIMEOUT_S = 5.0  # a TCP and TLS handshake to an object store takes well under a second
READ_TIMEOUT_S = 20.0  # no byte at all for this long: the server is stuck, not slow
# The most a read spends in attempts that get no answer: a silent server is an error after it
# (and within one more attempt: two requests of CONNECT_TIMEOUT_S + READ_TIMEOUT_S), < 3 minutes
RETRY_DEADLINE_S = 120.0
DEADLINE_OPTION = "retry_deadline"  # its name in storage_options
HTTP_SCHEMES = ("http", "https")
S3_SCHEMES = ("s3", "s3a")
# botocore's names for a request that timed out (ReadTimeoutError, ConnectTimeoutError)
TIMEOUT_NAMES = frozenset({"ReadTimeoutError", "ConnectTimeoutError", "ServerTimeoutError", "FSTimeoutError"})


def with_timeouts(url: str, storage_options: dict[str, Any] | None) -> dict[str, Any]:
    """``storage_options`` with the default timeouts for ``url``'s backend, where the caller set none,
    and without ``retry_deadline`` (this layer's, not fsspec's)."""
    options = dict(storage_options or {})
    options.pop(DEADLINE_OPTION, None)
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


def retry_deadline(storage_options: dict[str, Any] | None) -> float:
    """The seconds a read may spend in attempts that time out, all retries together: ``retry_deadline``
    in ``storage_options``, else ``RETRY_DEADLINE_S``; a ValueError for one that is not above 0."""
    seconds = (storage_options or {}).get(DEADLINE_OPTION, RETRY_DEADLINE_S)
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not seconds > 0:
        raise ValueError(f"storage_options[{DEADLINE_OPTION!r}] must be a number of seconds above 0, got {seconds!r}")
    return float(seconds)


def is_timeout(error: BaseException) -> bool:
    """Did ``error`` (or an error it was raised from) come from a request that timed out?"""
    seen = 0
    while error is not None and seen < 8:
        if isinstance(error, TimeoutError) or any(kind.__name__ in TIMEOUT_NAMES for kind in type(error).__mro__):
            return True
        error, seen = error.__cause__ or error.__context__, seen + 1
    return False
