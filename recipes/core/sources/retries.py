"""Which faults of a remote read are worth another try, and the loop that tries again.

    data = retried(lambda: fs.cat_file(path, start=0, end=2**20), shown(url))
    retries_made([url])   # how many times this process asked again, for messages and tests

A 5xx answer, throttling, a reset connection, a body cut short or a request that timed out
(:mod:`recipes.core.sources.timeouts`) is transient (:func:`is_transient`): :func:`retried` calls the
action again after a backoff that doubles, at most ``RETRIES`` times in a row, logs each retry
on the ``recipes`` logger (the URL without credentials, where, the reason, the attempt) and
counts it (:func:`retries_made`). A refusal (404, 403, S3's ``NoSuchBucket``) is final and fails
at once. Every message names the URL as :func:`recipes.core.sources.urls.shown` shows it.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import Counter
from collections.abc import Iterable
from typing import Any

from recipes.core.contracts.errors import DataError
from recipes.core.sources.timeouts import is_timeout
from recipes.core.sources.urls import cleaned, is_url, shown

RETRIES = 5  # faults in a row before giving up; each success resets the count
BACKOFF_S = 0.1  # the first wait; it doubles with each fault in a row
# Answers worth asking again: timeouts, throttling, server errors.
TRANSIENT_STATUS = frozenset({408, 425, 429, 500, 502, 503, 504})
# S3's codes for the same, for an answer that carries no HTTP status
TRANSIENT_CODES = frozenset({"RequestTimeout", "SlowDown", "Throttling", "ThrottlingException", "InternalError",
                             "ServiceUnavailable"})
# botocore's classes for a connection that failed or broke: every other botocore error is final
BOTOCORE_TRANSIENT = frozenset({"HTTPClientError", "ConnectionError", "IncompleteReadError"})
# storage's logger, under "recipes": one retry a line, named after the module users read from
LOGGER = logging.getLogger("recipes.core.sources.storage")
_RETRIES: Counter[str] = Counter()  # retries made in this process, by URL as shown (retries_made)
_RETRIES_LOCK = threading.Lock()


def retries_made(paths: Iterable[str | os.PathLike] | None = None) -> int:
    """How many reads this process retried after a transient fault: in all, or of ``paths``
    (local paths count none). A DataLoader worker counts its own, and logs each one."""
    with _RETRIES_LOCK:
        if paths is None:
            return sum(_RETRIES.values())
        return sum(_RETRIES.get(name, 0) for name in {shown(path) for path in paths if is_url(path)})


def retried(
    action: Any,
    name: str,
    *,
    retries: int = RETRIES,
    backoff: float = BACKOFF_S,
    at: Any = lambda: "",
    after: Any = lambda: None,
    timeout: float | None = None,
    deadline: float | None = None,
) -> Any:
    """``action()``, called again after each transient fault (``after()`` first), with a doubling
    backoff, at most ``retries`` times in a row. Each retry is logged (``name``, ``at()``: where,
    the reason, the attempt) and counted (:func:`retries_made`); ``timeout``: the read timeout
    the requests ran under, for the message of one that got no byte. ``deadline``: the seconds the
    attempts that time out may take together; no other is made once one more like the last would
    pass it (:mod:`recipes.core.sources.timeouts`).

    Raises:
        FileNotFoundError: the object does not exist.
        DataError: a fault that is not transient, or one too many in a row; names ``name``.
    """
    faults, silent = 0, 0.0  # faults in a row; seconds spent in attempts that timed out
    while True:
        started = time.monotonic()
        try:
            return action()
        except Exception as error:  # noqa: BLE001 - sorted here: transient faults or not
            if not is_transient(error):
                if isinstance(error, FileNotFoundError):
                    raise FileNotFoundError(f"{name} does not exist") from None
                raise DataError(f"{name}: cannot read ({_reason(error)})") from None
            faults += 1
            wait, timed_out = backoff * 2 ** (faults - 1), is_timeout(error)
            took = time.monotonic() - started
            silent += took if timed_out else 0.0
            past_deadline = timed_out and deadline is not None and silent + wait + took > deadline
            if faults > retries or past_deadline:
                if timed_out:
                    within = f"in {timeout:g} s" if timeout is not None else "before the request timed out"
                    raise DataError(
                        f"no byte from {name} {within}, {faults} attempts{at()}, {silent:.1f} s in all "
                        f"({_reason(error)}): the server accepts and does not answer; if it is only slow, raise the "
                        "read timeout or the retry_deadline through storage_options (recipes.core.sources.timeouts)"
                    ) from None
                raise DataError(f"{name}: read failed {faults} times in a row{at()} ({_reason(error)})") from None
            with _RETRIES_LOCK:
                _RETRIES[name] += 1
            LOGGER.warning("retrying %s%s after %.2g s (attempt %d of %d): %s", name, at(), wait, faults + 1, retries + 1,
                           _reason(error))
            after()
            time.sleep(wait)


def _reason(error: BaseException) -> str:
    """``Type: message`` with every URL in the message shown without its credentials; an error
    with no message (fsspec's ``FSTimeoutError``) is told by the one it was raised from."""
    if isinstance(error, FileNotFoundError) and error.__cause__ is not None:
        error = error.__cause__
    while not str(error) and error.__cause__ is not None:
        error = error.__cause__
    return f"{type(error).__name__}: " + (cleaned(str(error)) or "no message")


def is_transient(error: BaseException) -> bool:
    """Is ``error`` a fault that asking again may cure (a connection or server problem)?

    A refusal is final: a missing object or bucket (404, ``NoSuchBucket``), a denied one (403),
    a bad request; asking again gives the same answer, so it fails at once.
    """
    response = getattr(error, "response", None)  # botocore's ClientError: the answer S3 gave
    if isinstance(response, dict):
        status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        return status in TRANSIENT_STATUS or response.get("Error", {}).get("Code") in TRANSIENT_CODES
    if type(error) in (OSError, FileNotFoundError, PermissionError) and error.__cause__ is not None:
        # fsspec's http reports any failed lookup (a 503 too) as not found, and s3fs turns S3's
        # answers into OSErrors, each raised from the real error: judge that one
        return is_transient(error.__cause__)
    if isinstance(error, (FileNotFoundError, PermissionError, IsADirectoryError, NotADirectoryError, DataError)):
        return False
    status = getattr(error, "status", None)  # aiohttp's ClientResponseError
    if isinstance(status, int):
        return status in TRANSIENT_STATUS
    if isinstance(error, (ConnectionError, TimeoutError)):
        return True
    library = type(error).__module__.split(".")[0]
    if library in ("botocore", "aiobotocore"):  # a parameter, credential or signing error is final
        return any(kind.__name__ in BOTOCORE_TRANSIENT for kind in type(error).__mro__)
    # aiohttp's payload and disconnection errors, urllib3's, and other I/O errors
    return isinstance(error, OSError) or library in ("aiohttp", "urllib3")
