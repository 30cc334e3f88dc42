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
alike), so the remote is not asked whether its object changed: with ``revalidate=True`` each
open first asks for the object's size (one HEAD request, ~1 ms a shard on a local network) and
fetches it again when that differs. The least recently used entries (by
access time, which each use sets) go once the cache holds more than ``limit_bytes``. Entries
are named by a hash of the URL (plus its file name, for people), so one cache folder may serve
several sources; nothing in it is executed or unpickled.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import time
import zlib
from pathlib import Path
from typing import Any, BinaryIO

from recipes.core.storage import basename, is_url, open_stream, stream_size

DRAIN_BYTES = 2**20  # on close, read at most this much more to complete an entry (a tar's padding)
CHUNK = 2**20


class DiskCache:
    """A size-bounded folder of whole remote objects; see the module docstring.

    Args:
        folder: where entries live (created if missing).
        limit_bytes: the most the entries may hold together; the least recently used go first.
        revalidate: ask the remote for each object's size at every open, for sources whose
            objects are rewritten in place (off: shards are immutable).
    """

    def __init__(self, folder: str | os.PathLike, limit_bytes: int = 64 * 2**30, *, revalidate: bool = False) -> None:
        if limit_bytes <= 0:
            raise ValueError(f"limit_bytes must be positive, got {limit_bytes}")
        self.folder, self.limit_bytes = Path(folder).expanduser(), int(limit_bytes)
        self.revalidate = revalidate

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
            if record.get("mtime_ns") == stat.st_mtime_ns:
                return True
            crc = 0
            with open(entry, "rb") as file:
                while chunk := file.read(CHUNK):
                    crc = zlib.crc32(chunk, crc)
            return crc == record["crc32"]
        except (OSError, ValueError, KeyError, TypeError):
            return False

    def evict(self, keep: Path | None = None) -> None:
        """Delete the least recently used entries until the cache fits ``limit_bytes``."""
        entries = []
        for path in self.folder.iterdir():
            if path.suffix != ".tmp" and not path.name.endswith(".record.json") and path.is_file():
                stat = path.stat()
                entries.append((stat.st_atime, stat.st_size, path))
        total = sum(size for _, size, _ in entries)
        for _, size, path in sorted(entries):
            if total <= self.limit_bytes:
                break
            if path != keep:
                _record(path).unlink(missing_ok=True)  # the record first: a lone file is never trusted
                path.unlink(missing_ok=True)
                total -= size


def _record(entry: Path) -> Path:
    return entry.with_name(entry.name + ".record.json")


class _Copying(io.RawIOBase):
    """Reads from ``remote`` and writes the same bytes to a temporary file, published as ``entry``
    with its record once all ``size`` bytes have passed; dropped if the reading stops short."""

    def __init__(self, remote: io.BufferedReader, entry: Path, size: int, cache: DiskCache) -> None:
        self.remote, self.entry, self.size, self.cache = remote, entry, size, cache
        self.partial = entry.with_name(f"{entry.name}.{os.getpid()}.{id(self)}.tmp")
        self.copy: Any = open(self.partial, "wb")  # noqa: SIM115 - closed in close()
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
        self.copy.close()
        self.copy = None
        if self.count != self.size:
            self.partial.unlink(missing_ok=True)
            return
        record = self.partial.with_name(self.partial.name.removesuffix(".tmp") + ".record.tmp")
        modified = self.partial.stat().st_mtime_ns  # kept by the rename: the file's version
        described = {"size": self.size, "crc32": self.crc, "mtime_ns": modified, "source": shown_name(self.entry)}
        record.write_text(json.dumps(described))
        os.replace(self.partial, self.entry)  # atomic: readers see no file or the whole one
        os.replace(record, _record(self.entry))  # last: its presence says the entry is complete
        self.cache.evict(keep=self.entry)


def shown_name(entry: Path) -> str:
    """The file name part of an entry, for its record (never the URL: it may carry credentials)."""
    return entry.name.split("-", 1)[1]

