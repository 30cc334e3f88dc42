"""Local paths and fsspec URLs (``s3://``, ``gs://``, ``http(s)://``, ``file://``) read as byte streams.

    size = stream_size("s3://bucket/train-0003.jsonl", storage_options={"anon": True})
    with open_stream("https://host/shards/shard-000042.tar", start=0) as file:
        for member in tarfile.open(fileobj=file, mode="r|*"): ...

A read from object storage fails now and then: a 5xx answer, a reset connection, a body cut
short. :func:`open_stream` hides those: on such a fault it opens the object again at the byte
offset already read (an HTTP Range request underneath) and carries on, after a backoff that
doubles, at most ``retries`` times in a row. A server that sends no byte for a while is such a
fault too: default connect and read timeouts (:mod:`recipes.core.timeouts`, overridable through
``storage_options``) bound each request. Each retry is logged on the ``recipes`` logger (the
URL without credentials, the byte offset, the reason, the attempt) and counted
(:func:`retries_made`). A refusal (404, 403, S3's ``NoSuchBucket``) is final and fails at once. A stream therefore yields every byte exactly once or raises a
:class:`DataError` naming the URL; credentials (``storage_options``, a URL's user:password or
query string) never appear in a message.

fsspec is the one dependency; its backends are extras of the distribution ``dataloader-recipes``:
``pip install ".[s3]"`` from a clone (s3fs), ``".[gcs]"`` (gcsfs) or ``".[http]"`` (aiohttp).
"""

from __future__ import annotations

import glob
import io
import logging
import os
import re
import threading
import time
from collections import Counter
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from recipes.core.errors import DataError
from recipes.core.timeouts import is_timeout, read_timeout, with_timeouts

RETRIES = 5  # faults in a row before giving up; each success resets the count
BACKOFF_S = 0.1  # the first wait; it doubles with each fault in a row
BLOCK_BYTES = 16 * 2**20  # bytes fetched per request: 4 MiB read a local HTTP server at ~0.4x the speed
SIZE_THREADS = 64  # sizes asked at once (stream_sizes): each waits a round trip, tens of ms to an object store
BACKENDS = {"s3": "s3fs", "s3a": "s3fs", "gs": "gcsfs", "gcs": "gcsfs", "http": "aiohttp", "https": "aiohttp"}
# Answers worth asking again: timeouts, throttling, server errors.
TRANSIENT_STATUS = frozenset({408, 425, 429, 500, 502, 503, 504})
# S3's codes for the same, for an answer that carries no HTTP status
TRANSIENT_CODES = frozenset({"RequestTimeout", "SlowDown", "Throttling", "ThrottlingException", "InternalError",
                             "ServiceUnavailable"})
# botocore's classes for a connection that failed or broke: every other botocore error is final
BOTOCORE_TRANSIENT = frozenset({"HTTPClientError", "ConnectionError", "IncompleteReadError"})
_URLS = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]+")
LOGGER = logging.getLogger(__name__)  # under "recipes": one retry a line
_RETRIES: Counter[str] = Counter()  # retries made in this process, by URL as shown (retries_made)
_RETRIES_LOCK = threading.Lock()


def retries_made(paths: Iterable[str | os.PathLike] | None = None) -> int:
    """How many reads this process retried after a transient fault: in all, or of ``paths``
    (local paths count none). A DataLoader worker counts its own, and logs each one."""
    with _RETRIES_LOCK:
        if paths is None:
            return sum(_RETRIES.values())
        return sum(_RETRIES.get(name, 0) for name in {shown(path) for path in paths if is_url(path)})


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


def filesystem(url: str, storage_options: dict[str, Any] | None = None) -> tuple[Any, str]:
    """``(fsspec filesystem, path within it)`` for ``url``. fsspec keeps one instance per process,
    thread and options, so a forked worker makes its own and later calls reuse it.

    Raises:
        ImportError: the backend for the URL's scheme is missing; the message names the pip command.
    """
    import fsspec

    try:
        return fsspec.core.url_to_fs(url, **with_timeouts(url, storage_options))
    except ImportError as error:
        scheme = urlsplit(url).scheme
        backend = BACKENDS.get(scheme)
        fix = f"pip install {backend}" if backend else f"install the fsspec backend for {scheme}://"
        raise ImportError(f"reading {scheme}:// URLs needs a package that is missing ({error}): {fix}") from None


def stream_size(
    path: str | os.PathLike,
    storage_options: dict[str, Any] | None = None,
    *,
    retries: int = RETRIES,
    backoff: float = BACKOFF_S,
) -> int:
    """Size in bytes of a local file or a remote object (asked again after a transient fault).

    Raises:
        FileNotFoundError: it does not exist (the message names it, without credentials).
    """
    if not is_url(path):
        return os.stat(path).st_size
    fs, inner = filesystem(path, storage_options)
    timeout = read_timeout(path, storage_options)
    return retried(lambda: int(fs.size(inner)), shown(path), retries=retries, backoff=backoff, timeout=timeout)


def open_stream(
    path: str | os.PathLike,
    *,
    start: int = 0,
    storage_options: dict[str, Any] | None = None,
    retries: int = RETRIES,
    backoff: float = BACKOFF_S,
    size: int | None = None,
) -> io.BufferedReader:
    """A buffered binary reader of ``path`` from byte ``start`` (see the module docstring); it
    can seek, and a read after a seek survives faults as a sequential one does.

    ``size``: the object's size, if the caller knows it (from a listing, or asked once for a
    whole job). Unknown, no request asks for it up front: the reader learns where the object
    ends from its ranged GETs, and a missing object raises FileNotFoundError here, from the first.
    """
    if not is_url(path):
        file = open(path, "rb")  # noqa: SIM115 - handed to the caller, who closes it
        file.seek(start)
        return file
    fs, inner = filesystem(path, storage_options)
    reader = _ResumingReader(fs, inner, shown(path), start, size, (retries, backoff))
    reader.timeout = read_timeout(path, storage_options)
    if size is None:
        reader.fetch_first()  # or FileNotFoundError
    return io.BufferedReader(reader, buffer_size=2**20)


def read_bytes(path: str | os.PathLike, storage_options: dict[str, Any] | None = None) -> bytes:
    """The whole content of a local file or a remote object, read as :func:`open_stream` reads.

    Raises:
        FileNotFoundError: it does not exist (the message names it, without credentials).
    """
    if not is_url(path):
        with open(path, "rb") as file:  # plain open: pathlib's parsing costs ~10 us per call
            return file.read()
    with open_stream(path, storage_options=storage_options) as file:
        return file.read()


def glob_paths(pattern: str, storage_options: dict[str, Any] | None = None) -> list[str]:
    """The paths or URLs that ``pattern`` (``*``, ``?``, ``[...]``) matches, sorted (:func:`glob_sizes`)."""
    return glob_sizes(pattern, storage_options)[0]


def glob_sizes(pattern: str, storage_options: dict[str, Any] | None = None) -> tuple[list[str], list[int | None]]:
    """``(paths, sizes)``: the paths or URLs that ``pattern`` (``*``, ``?``, ``[...]``) matches,
    sorted, and each one's size in bytes as the same listing gives it (an object store lists
    1,000 sizes a request), None where it gives none (an HTTP folder's links, a local glob).
    A URL's are listed through fsspec and keep its scheme. A pattern whose folder holds no
    wildcard is one listing of that folder (fsspec's glob lists an HTTP folder twice and asks
    for its size)."""
    if not is_url(pattern):
        paths = sorted(glob.glob(os.path.expanduser(pattern)))
        return paths, [None] * len(paths)
    fs, inner = filesystem(pattern, storage_options)
    scheme, timeout = pattern.split("://", 1)[0], read_timeout(pattern, storage_options)
    folder, _, name = inner.rpartition("/")
    if not folder or has_glob(folder) or "**" in name:
        # a refused listing is a DataError naming the pattern
        listed = list(retried(lambda: fs.glob(inner, detail=True), shown(pattern), timeout=timeout).items())
    else:
        from fsspec.utils import glob_translate

        matches = re.compile(glob_translate(inner)).match
        try:
            found = retried(lambda: fs.ls(folder, detail=True), shown(pattern), timeout=timeout)
            listed = [(info["name"], info) for info in found if matches(info["name"])]
        except FileNotFoundError:  # no such folder: nothing matches, as for a glob
            listed = []
    listed.sort(key=lambda item: item[0])
    paths = [name if "://" in name else f"{scheme}://{name}" for name, _ in listed]
    # a folder's size (0 on S3) is no file's: it is asked for, as any unknown size
    sized = [info.get("type") == "file" and info.get("size") is not None for _, info in listed]
    return paths, [int(info["size"]) if known else None for (_, info), known in zip(listed, sized)]


def stream_sizes(
    paths: list[str | os.PathLike],
    storage_options: dict[str, Any] | None = None,
    *,
    threads: int = SIZE_THREADS,
    known: list[int | None] | None = None,
) -> list[int]:
    """:func:`stream_size` of each path, asked ``threads`` at a time: 10,000 objects' sizes take
    one request's wait per ``threads`` objects, not one each. ``known``: sizes already had (from
    :func:`glob_sizes`), None where not; only the others are asked."""
    known = [None] * len(paths) if known is None else known
    asked = [path for path, size in zip(paths, known) if size is None]
    remote = sum(map(is_url, asked))
    if remote < 2:
        found = iter([stream_size(path, storage_options) for path in asked])
    else:
        with ThreadPoolExecutor(min(threads, remote)) as pool:
            found = iter(list(pool.map(lambda path: stream_size(path, storage_options), asked)))
    return [next(found) if size is None else size for size in known]


def join(root: str | os.PathLike, name: str) -> str | os.PathLike:
    """``name`` under ``root``: a URL gains ``/name``, a local folder a path component."""
    return f"{root.rstrip('/')}/{name}" if is_url(root) else Path(root) / name


def parent(path: str | os.PathLike) -> str | os.PathLike:
    """The folder of a local path, or of a URL (its last ``/``-component dropped)."""
    if not is_url(path):
        return Path(path).parent
    scheme, rest = path.split("://", 1)
    return f"{scheme}://{rest.split('?')[0].rsplit('/', 1)[0]}"


class _ResumingReader(io.RawIOBase):
    """Reads of one remote object, each block of ``BLOCK_BYTES`` one ranged GET (``cat_file``),
    asked again from the same byte after a fault: in sequence, or after a seek (pyarrow reads a
    Parquet file's footer, then its row groups). Without a known size it asks one byte beyond
    each block, so that it learns where the object ends without a HEAD."""

    def __init__(self, fs: Any, path: str, name: str, start: int, size: int | None, policy: tuple[int, float]) -> None:
        self.fs, self.path, self.name = fs, path, name
        self.position, self.known_size, (self.retries, self.backoff) = start, size, policy
        self.timeout: float | None = None  # the read timeout, for messages
        self.block, self.block_start = memoryview(b""), start

    @property
    def size(self) -> int:
        """The object's size: known, learnt from a short block, or else asked for (one HEAD)."""
        if self.known_size is None:
            self.known_size = self._attempt(lambda: int(self.fs.size(self.path)))
        return self.known_size

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.position

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self.position}[whence] if whence != io.SEEK_END else self.size
        self.position = max(0, base + offset)
        return self.position

    def fetch_first(self) -> None:
        """Fetch the block at the start position now: a missing object raises FileNotFoundError."""
        self._fetch(missing_raises=True)

    def readinto(self, buffer: Any) -> int:
        if self.known_size is not None and self.position >= self.known_size:
            return 0
        offset = self.position - self.block_start
        if not 0 <= offset < len(self.block):
            if not self._fetch():
                return 0
            offset = 0
        count = min(len(buffer), len(self.block) - offset)
        buffer[:count] = self.block[offset : offset + count]
        self.position += count
        return count

    def _fetch(self, missing_raises: bool = False) -> bool:
        """Make the block start at the current position: False at the object's end."""
        start, size = self.position, self.known_size
        asked = BLOCK_BYTES + 1 if size is None else min(BLOCK_BYTES, size - start)
        if asked <= 0:
            return False
        try:
            data = retried(lambda: self._get(start, asked), self.name, retries=self.retries, backoff=self.backoff,
                           at=self._at, timeout=self.timeout)
        except FileNotFoundError as error:
            if missing_raises:
                raise
            raise DataError(str(error)) from None
        if len(data) > asked:  # the whole object: a server that ignores byte ranges
            if start:
                raise DataError(f"{self.name}: the server ignores byte ranges; cannot read from byte {start}")
            self.known_size = len(data)
        elif self.known_size is None and len(data) < asked:  # a short block ends the object (a cut body raised)
            self.known_size = start + len(data)
        keep = min(len(data), BLOCK_BYTES) if self.known_size is None else len(data)
        self.block, self.block_start = memoryview(data)[:keep], start
        return keep > 0

    def _get(self, start: int, count: int) -> bytes:
        """Bytes ``start:start + count`` of the object (fewer at its end), one ranged GET."""
        try:
            data = self.fs.cat_file(self.path, start=start, end=start + count)
        except Exception as error:
            if self.known_size is None and not isinstance(error, FileNotFoundError) and not is_transient(error):
                # a server refuses a range that starts at or past the end (416): is that where it starts?
                size = int(self.fs.size(self.path))
                if start >= size:
                    self.known_size = size
                    return b""
            raise
        if self.known_size is not None and len(data) < count:  # the object said it held more
            raise ConnectionError(f"the stream ended at byte {start + len(data)} of {self.known_size}")
        return data

    def _attempt(self, action: Any) -> Any:
        try:
            return retried(action, self.name, retries=self.retries, backoff=self.backoff, at=self._at,
                           timeout=self.timeout)
        except FileNotFoundError as error:
            raise DataError(str(error)) from None

    def _at(self) -> str:
        return f" at byte {self.position}"

    def close(self) -> None:
        self.block = memoryview(b"")
        super().close()


def retried(
    action: Any,
    name: str,
    *,
    retries: int = RETRIES,
    backoff: float = BACKOFF_S,
    at: Any = lambda: "",
    after: Any = lambda: None,
    timeout: float | None = None,
) -> Any:
    """``action()``, called again after each transient fault (``after()`` first), with a doubling
    backoff, at most ``retries`` times in a row. Each retry is logged (``name``, ``at()``: where,
    the reason, the attempt) and counted (:func:`retries_made`); ``timeout``: the read timeout
    the requests ran under, for the message of one that got no byte.

    Raises:
        FileNotFoundError: the object does not exist.
        DataError: a fault that is not transient, or one too many in a row; names ``name``.
    """
    faults = 0
    while True:
        try:
            return action()
        except Exception as error:  # noqa: BLE001 - sorted here: transient faults or not
            if not is_transient(error):
                if isinstance(error, FileNotFoundError):
                    raise FileNotFoundError(f"{name} does not exist") from None
                raise DataError(f"{name}: cannot read ({_reason(error)})") from None
            faults += 1
            if faults > retries:
                if is_timeout(error):
                    within = f"in {timeout:g} s" if timeout is not None else "before the request timed out"
                    raise DataError(
                        f"no byte from {name} {within}, {faults} attempts{at()} ({_reason(error)}): the server "
                        "accepts and does not answer; if it is only slow, raise the read timeout through "
                        "storage_options (recipes.core.timeouts)"
                    ) from None
                raise DataError(f"{name}: read failed {faults} times in a row{at()} ({_reason(error)})") from None
            with _RETRIES_LOCK:
                _RETRIES[name] += 1
            wait = backoff * 2 ** (faults - 1)
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
