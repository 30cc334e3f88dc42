"""Local paths and fsspec URLs (``s3://``, ``gs://``, ``http(s)://``, ``file://``) read as byte streams.

    size = stream_size("s3://bucket/train-0003.jsonl", storage_options={"anon": True})
    with open_stream("https://host/shards/shard-000042.tar", start=0) as file:
        for member in tarfile.open(fileobj=file, mode="r|*"): ...

A read from object storage fails now and then: a 5xx answer, a reset connection, a body cut
short. :func:`open_stream` hides those: on such a fault it opens the object again at the byte
offset already read (an HTTP Range request underneath) and carries on, after a backoff that
doubles, at most ``retries`` times in a row; each retry is logged and counted (which faults,
the log line, :func:`retries_made`: :mod:`recipes.core.sources.retries`). A server that sends no byte
for a while is such a fault too: default connect and read timeouts bound each request, and a
deadline all the attempts that time out (:mod:`recipes.core.sources.timeouts`, each overridable through
``storage_options``). A refusal (404, 403, S3's
``NoSuchBucket``) is final and fails at once. A stream therefore yields every byte exactly once
or raises a :class:`DataError` naming the URL; credentials (``storage_options``, a URL's
user:password or query string) never appear in a message (:func:`shown`). The names of paths
and URLs (:mod:`recipes.core.sources.urls`) and of the retry loop import from here as well.

fsspec is the one dependency; its backends are extras of the distribution ``dataloader-recipes``:
``pip install ".[s3]"`` from a clone (s3fs), ``".[gcs]"`` (gcsfs) or ``".[http]"`` (aiohttp).
"""

from __future__ import annotations

import asyncio
import glob
import io
import os
import re
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import urlsplit

from recipes.core.contracts.errors import DataError
from recipes.core.sources.retries import BACKOFF_S, RETRIES, is_transient, retried, retries_made  # noqa: F401 (importable here)
from recipes.core.sources.timeouts import read_timeout, retry_deadline, with_timeouts
from recipes.core.sources.urls import basename, cleaned, has_glob, is_url, join, parent, shown, suffix  # noqa: F401 (as above)

BLOCK_BYTES = 16 * 2**20  # bytes fetched per request: 4 MiB read a local HTTP server at ~0.4x the speed
SIZE_THREADS = 64  # sizes asked at once (stream_sizes): each waits a round trip, tens of ms to an object store
BACKENDS = {"s3": "s3fs", "s3a": "s3fs", "gs": "gcsfs", "gcs": "gcsfs", "http": "aiohttp", "https": "aiohttp"}


def filesystem(url: str, storage_options: dict[str, Any] | None = None) -> tuple[Any, str]:
    """``(fsspec filesystem, path within it)`` for ``url``. fsspec keeps one instance per process,
    thread and options, so a forked worker makes its own and later calls reuse it.

    Raises:
        ImportError: the backend for the URL's scheme is missing; the message names the pip command.
    """
    import fsspec

    options = with_timeouts(url, storage_options)
    if urlsplit(url).scheme in BACKENDS and _fsspec_keeps_the_parents_loop(fsspec.__version__):
        options = {"loop": _own_loop(), **options}
    try:
        return fsspec.core.url_to_fs(url, **options)
    except ImportError as error:
        scheme = urlsplit(url).scheme
        backend = BACKENDS.get(scheme)
        fix = f"pip install {backend}" if backend else f"install the fsspec backend for {scheme}://"
        raise ImportError(f"reading {scheme}:// URLs needs a package that is missing ({error}): {fix}") from None


def _fsspec_keeps_the_parents_loop(version: str) -> bool:
    """Whether this fsspec predates 2025.3.1, which resets its event loop in a forked child. An older
    one hands a forked DataLoader worker the parent's loop, whose thread the fork left behind: the
    worker's first URL read waits forever. Its async backends then run on :func:`_own_loop`."""
    numbers = re.findall(r"\d+", version)[:3]
    return tuple(int(number) for number in numbers) < (2025, 3, 1)


_loop: list[asyncio.AbstractEventLoop | None] = [None]  # this process's, made on first use
_loop_lock = threading.Lock()


def _own_loop() -> asyncio.AbstractEventLoop:
    """An event loop of this process, running in a daemon thread, for fsspec's ``loop=`` argument."""
    with _loop_lock:
        if _loop[0] is None:
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="recipes-fsspec-loop", daemon=True).start()
            _loop[0] = loop
        return _loop[0]


def _forget_the_loop_in_a_child() -> None:
    global _loop_lock
    _loop[0], _loop_lock = None, threading.Lock()  # the parent's thread and a lock it may have held stay behind


os.register_at_fork(after_in_child=_forget_the_loop_in_a_child)


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
    timeout, deadline = read_timeout(path, storage_options), retry_deadline(storage_options)
    return retried(lambda: int(fs.size(inner)), shown(path), retries=retries, backoff=backoff, timeout=timeout,
                   deadline=deadline)


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
    reader.timeout, reader.deadline = read_timeout(path, storage_options), retry_deadline(storage_options)
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
    scheme, timing = pattern.split("://", 1)[0], {"timeout": read_timeout(pattern, storage_options),
                                                    "deadline": retry_deadline(storage_options)}
    folder, _, name = inner.rpartition("/")
    if not folder or has_glob(folder) or "**" in name:
        # a refused listing is a DataError naming the pattern
        listed = list(retried(lambda: fs.glob(inner, detail=True), shown(pattern), **timing).items())
    else:
        from fsspec.utils import glob_translate

        matches = re.compile(glob_translate(inner)).match
        try:
            found = retried(lambda: fs.ls(folder, detail=True), shown(pattern), **timing)
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


class _ResumingReader(io.RawIOBase):
    """Reads of one remote object, each block of ``BLOCK_BYTES`` one ranged GET (``cat_file``),
    asked again from the same byte after a fault: in sequence, or after a seek (pyarrow reads a
    Parquet file's footer, then its row groups). Without a known size it asks one byte beyond
    each block, so that it learns where the object ends without a HEAD."""

    def __init__(self, fs: Any, path: str, name: str, start: int, size: int | None, policy: tuple[int, float]) -> None:
        self.fs, self.path, self.name = fs, path, name
        self.position, self.known_size, (self.retries, self.backoff) = start, size, policy
        self.timeout: float | None = None  # the read timeout, for messages
        self.deadline: float | None = None  # for the attempts that time out, together (recipes.core.sources.timeouts)
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
                           at=self._at, timeout=self.timeout, deadline=self.deadline)
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
                           timeout=self.timeout, deadline=self.deadline)
        except FileNotFoundError as error:
            raise DataError(str(error)) from None

    def _at(self) -> str:
        return f" at byte {self.position}"

    def close(self) -> None:
        self.block = memoryview(b"")
        super().close()
