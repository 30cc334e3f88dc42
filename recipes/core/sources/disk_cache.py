"""Remote objects (tar shards) kept whole on local disk, so that later epochs read them from there.

    cache = DiskCache("~/.cache/recipes/shards", limit_bytes=200 * 2**30)
    with cache.open("s3://bucket/shard-000042.tar", storage_options=options) as file:
        ...                          # first time: streamed from S3 and written alongside; then local

An object is cached while it is read from its start: the bytes the caller reads are written to a
temporary file beside the cache, and renamed into place with a record of their size and CRC-32
once the last byte has arrived. A cached copy is used, without a request to the remote, if its
size is the recorded one and it is untouched since (its modification time as recorded) or its
CRC-32 matches the record; a partial, truncated or damaged file is fetched again. Shards are
written once and never changed in place (the convention of webdataset, litdata and Mosaic
alike), so the remote is not asked whether its object changed unless ``revalidate=True``. The
size and modification time cannot see bytes changed in place with the time kept (a failing
disk, a careless copy): ``verify=True`` checks the CRC-32 of the whole copy at every open, and
:meth:`DiskCache.scrub` (``recipes check cache FOLDER``) checks every entry once and removes the
damaged ones, to be fetched again on their next use.

Once the entries and the copies being written hold more than ``limit_bytes``, the least recently
used entries go. A writer holds an exclusive ``flock`` on its temporary file, which the kernel
drops however the process dies: a temporary file nobody holds was left by a killed run, and the
next download or eviction deletes it, so a job preempted again and again does not grow the folder.
Entries are named by a hash of the URL (plus its file name, for people): one cache folder may serve
several sources. Nothing in it is executed or unpickled.
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import io
import json
import os
import re
import secrets
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

try:
    import fcntl
except ImportError:  # Windows: an open file cannot be deleted there, which protects a live writer instead
    fcntl = None  # type: ignore[assignment]

from recipes.core.sources.paths import cache_folder
from recipes.core.sources.storage import basename, is_url, open_stream, shown, stream_size

DRAIN_BYTES = 2**20  # on close, read at most this much more to complete an entry (a tar's padding)
CHUNK = 2**20
ENTRY_NAME = re.compile(r"[0-9a-f]{24}-")  # what entry() names: other files in a shared folder are not scrubbed
UNLOCKED_GRACE_S = 60  # an empty unlocked temporary file is left alone this long: its writer may not hold it yet
NO_RECORD = "no record (never completed, or its record was deleted)"
# This process's temporary files, never judged abandoned by it (on NFS a flock is a POSIX lock, held per process).
WRITING: set[Path] = set()


class DiskCache:
    """A size-bounded folder of whole remote objects; see the module docstring.

    Args:
        folder: where entries live (created if missing).
        limit_bytes: the most the entries may hold together; the least recently used (by access
            time, which each use sets) go first.
        revalidate: ask the remote for each object's size at every open (one HEAD request, ~1 ms
            a shard on a local network) and fetch it again when that differs, for sources whose
            objects are rewritten in place (off: shards are immutable).
        verify: check the CRC-32 of the whole copy at every open instead of trusting an
            unchanged size and modification time (one more read of each shard an epoch); a
            copy that differs is fetched again.
    """

    def __init__(
        self,
        folder: str | os.PathLike,
        limit_bytes: int = 64 * 2**30,
        *,
        revalidate: bool = False,
        verify: bool = False,
    ) -> None:
        if limit_bytes <= 0:
            raise ValueError(f"limit_bytes must be positive, got {limit_bytes}")
        self.folder, self.limit_bytes = cache_folder(folder), int(limit_bytes)
        self.revalidate, self.verify = revalidate, verify

    def entry(self, url: str) -> Path:
        """Where ``url``'s copy lives (it may not exist yet)."""
        digest = hashlib.sha256(url.encode("utf-8")).hexdigest()[:24]
        return self.folder / f"{digest}-{basename(url)}"

    def open(
        self, path: str | os.PathLike, *, start: int = 0, storage_options: dict[str, Any] | None = None
    ) -> BinaryIO:
        """A reader of ``path`` from byte ``start``: the local copy if it is whole (unbuffered: one
        system call a read), else the remote object (cached on the way when read from its start).
        Local paths are opened as they are."""
        if not is_url(path):
            return open_stream(path, start=start)
        entry = self.entry(path)
        if self._whole(entry, stream_size(path, storage_options) if self.revalidate else None):
            modified = entry.stat().st_mtime_ns
            os.utime(entry, ns=(time.time_ns(), modified))  # recently used (the access time): evicted last
            file = open(entry, "rb", buffering=0)  # noqa: SIM115 - the caller closes it; unbuffered as a tar walk wants
            file.seek(start)
            return file
        remote = open_stream(path, start=start, storage_options=storage_options)
        if start:
            return remote  # a copy is made only from the first byte
        self.folder.mkdir(parents=True, exist_ok=True)
        size = remote.raw.size  # the remote reader asked for it already
        self.evict(reserve=size)  # room for the copy, and a killed writer's leftovers gone
        return io.BufferedReader(_Copying(remote, entry, size, self), buffer_size=CHUNK)

    def _whole(self, entry: Path, size: int | None) -> bool:
        """Is ``entry`` a complete, intact copy (of an object of ``size`` bytes, if given)? A file
        untouched since it was published (its size and modification time as recorded) is; any
        other is read through and checked against the recorded CRC-32."""
        try:
            stat = entry.stat()
            record = json.loads(_record(entry).read_text(encoding="utf-8"))
            if stat.st_size != record["size"] or (size is not None and size != record["size"]):
                return False
            if record.get("mtime_ns") == stat.st_mtime_ns and not self.verify:
                return True
            return file_crc32(entry) == record["crc32"]
        except (OSError, ValueError, KeyError, TypeError, RecursionError):  # any damage to the record: not whole
            return False

    def evict(self, keep: Path | None = None, *, reserve: int = 0) -> None:
        """Delete abandoned temporary files (their writer died), then the least recently used
        entries until the entries, the copies being written and ``reserve`` more bytes fit
        ``limit_bytes``. ``keep`` is never deleted."""
        entries, total = [], reserve
        for path in _listing(self.folder):
            try:
                if path.suffix == ".tmp":
                    if not remove_if_abandoned(path):
                        total += path.stat().st_size  # a live writer's copy: it will be an entry
                elif not path.name.endswith(".record.json") and path.is_file():
                    stat = path.stat()
                    entries.append((stat.st_atime, stat.st_size, path))
                    total += stat.st_size
            except FileNotFoundError:
                continue  # published, evicted or removed by another process meanwhile
        for _, size, path in sorted(entries):
            if total <= self.limit_bytes:
                break
            if path != keep:
                _record(path).unlink(missing_ok=True)  # the record first: a lone file is never trusted
                path.unlink(missing_ok=True)
                total -= size

    def scrub(self) -> list[tuple[str, str]]:
        """Check every entry's size and CRC-32 against its record, whatever its modification
        time; delete the entries that differ (the next open fetches them again) and the
        temporary files of dead writers. Files not named as entries are left alone. Returns
        ``(file name, what was wrong)`` for each file deleted."""
        removed, records = [], []
        for path in _listing(self.folder):
            if path.suffix == ".tmp":
                if remove_if_abandoned(path):
                    removed.append((path.name, "temporary file of a writer that died (a killed download)"))
            elif path.name.endswith(".record.json"):
                records.append(path)
            elif ENTRY_NAME.match(path.name) and path.is_file() and (problem := _damage(path)) is not None:
                if problem == NO_RECORD and _publishing(path):
                    continue  # its record is on the way
                _record(path).unlink(missing_ok=True)
                path.unlink(missing_ok=True)
                removed.append((path.name, problem))
        for path in records:
            entry = path.with_name(path.name.removesuffix(".record.json"))
            if ENTRY_NAME.match(path.name) and path.exists() and not entry.exists():
                path.unlink(missing_ok=True)
                removed.append((path.name, "record without its entry"))
        return removed


def _record(entry: Path) -> Path:
    return entry.with_name(entry.name + ".record.json")


def _listing(folder: Path) -> list[Path]:
    try:
        return list(folder.iterdir())
    except FileNotFoundError:
        return []


def file_crc32(path: str | os.PathLike) -> int:
    """The CRC-32 of a whole local file, read a chunk at a time; an OSError names the file as
    :func:`recipes.core.sources.urls.shown` shows it (a URL's credentials left out)."""
    crc = 0
    try:
        file = open(path, "rb")  # noqa: SIM115 - closed below; only opening names the file
    except OSError as error:
        raise type(error)(error.errno, error.strerror, shown(path)) from None
    with file:
        while chunk := file.read(CHUNK):
            crc = zlib.crc32(chunk, crc)
    return crc


def _damage(entry: Path) -> str | None:
    """What is wrong with ``entry`` against its record, read whole; None if nothing."""
    try:
        record = json.loads(_record(entry).read_text(encoding="utf-8"))
        size, crc = int(record["size"]), int(record["crc32"])
    except FileNotFoundError:
        return NO_RECORD
    except (OSError, ValueError, KeyError, TypeError, RecursionError) as error:
        return f"unreadable record ({type(error).__name__})"
    try:
        actual = entry.stat().st_size
        if actual != size:
            return f"{actual:,} bytes, recorded {size:,}"
        if file_crc32(entry) != crc:
            return "content differs from its record (CRC-32)"
    except OSError as error:
        return f"cannot read ({error.strerror or error})"
    return None


def _publishing(entry: Path) -> bool:
    """Is a writer between renaming ``entry`` into place and renaming its record after it?"""
    return any(entry.parent.glob(f"{glob.escape(entry.name)}.*.record.tmp")) or _record(entry).exists()


def create_locked(path: Path) -> Any:
    """A new temporary file at ``path`` (never an existing one), open for writing and exclusively
    ``flock``-ed while it is open, so that :func:`remove_if_abandoned` leaves it alone; the
    caller closes it and discards ``path`` from ``WRITING``."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    if fcntl is not None:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
    WRITING.add(path)
    return open(descriptor, "wb")  # noqa: SIM115 - the caller closes it


@contextlib.contextmanager
def locked_file(path: Path) -> Iterator[Any]:
    """:func:`create_locked` for a ``with`` block, which ends with :func:`rename_locked`; the file
    is closed at its end in any case, and deleted if the block raised."""
    file = create_locked(path)
    try:
        yield file
    except BaseException:
        file.close()
        path.unlink(missing_ok=True)
        raise
    finally:
        file.close()
        WRITING.discard(path)


def rename_locked(file: Any, partial: Path, target: Path) -> None:
    """Rename ``partial`` (open as ``file``, from :func:`create_locked`) to ``target`` and close
    it: after the rename where ``flock`` exists, so that it is never unlocked under its temporary
    name; before it elsewhere, where an open file cannot be renamed."""
    file.flush()
    if fcntl is None:
        file.close()
    try:
        os.replace(partial, target)  # atomic: readers see the old file or the whole new one
    finally:
        file.close()
        WRITING.discard(partial)


def remove_if_abandoned(path: Path) -> bool:
    """Delete the temporary file ``path`` if no live process writes it (nobody holds its lock);
    True if it was deleted."""
    if path in WRITING:
        return False
    if fcntl is None:
        try:
            path.unlink()
        except OSError:
            return False  # gone meanwhile, or still open in its writer
        return True
    try:
        descriptor = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False  # its writer is alive
        stat = os.fstat(descriptor)
        if stat.st_size == 0 and time.time() - stat.st_mtime < UNLOCKED_GRACE_S:
            return False  # maybe a writer between creating its file and locking it
        path.unlink(missing_ok=True)
        return True
    finally:
        os.close(descriptor)


class _Copying(io.RawIOBase):
    """Reads from ``remote`` and writes the same bytes to a temporary file, published as ``entry``
    with its record once all ``size`` bytes have passed; dropped if the reading stops short."""

    def __init__(self, remote: io.BufferedReader, entry: Path, size: int, cache: DiskCache) -> None:
        self.remote, self.entry, self.size, self.cache = remote, entry, size, cache
        self.partial = entry.with_name(f"{entry.name}.{os.getpid()}.{secrets.token_hex(6)}.tmp")
        self.copy: Any = create_locked(self.partial)  # closed in _publish
        self.count = self.crc = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        count = self.remote.readinto(buffer)
        self._keep(memoryview(buffer)[:count])
        return count

    def _keep(self, data: Any) -> None:
        if self.copy is not None and len(data):
            self.copy.write(data)
            self.crc = zlib.crc32(data, self.crc)
            self.count += len(data)

    def close(self) -> None:
        if self.closed:
            return
        try:
            if self.copy is not None and 0 < self.size - self.count <= DRAIN_BYTES:
                self._keep(self.remote.read())  # what the reader left unread: a tar's final padding
        except Exception:  # noqa: BLE001 - the copy is dropped below; the read itself went fine
            pass
        finally:
            self.remote.close()
            self._publish()
            super().close()

    def _publish(self) -> None:
        if self.copy is None:
            return
        copy, self.copy = self.copy, None
        record = self.partial.with_name(self.partial.name.removesuffix(".tmp") + ".record.tmp")
        written = None
        try:
            copy.flush()
            if self.count != self.size:
                copy.close()
                self.partial.unlink(missing_ok=True)
                return
            modified = os.fstat(copy.fileno()).st_mtime_ns  # kept by the rename: the file's version
            described = {"size": self.size, "crc32": self.crc, "mtime_ns": modified, "source": shown_name(self.entry)}
            written = create_locked(record)  # locked too: a record being published is no orphan
            written.write(json.dumps(described).encode("utf-8"))
            rename_locked(copy, self.partial, self.entry)  # readers see no file or the whole one
            rename_locked(written, record, _record(self.entry))  # last: its presence says the entry is complete
        except FileNotFoundError:  # deleted between its creation and its lock: this copy is not kept
            record.unlink(missing_ok=True)
            return
        finally:
            copy.close()
            if written is not None:
                written.close()
            WRITING.difference_update((self.partial, record))
        self.cache.evict(keep=self.entry)


def shown_name(entry: Path) -> str:
    """The file name part of an entry, for its record (never the URL: it may carry credentials)."""
    return entry.name.split("-", 1)[1]

