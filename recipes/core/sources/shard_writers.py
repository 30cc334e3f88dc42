"""What a shard of a prepared dataset is: how :func:`recipes.core.streams.write_prepared` names one,
writes its samples and describes it in the manifest.

    run = PrepareRun(shards=ParquetShards(pyarrow.schema([("input_ids", pyarrow.list_(pyarrow.int32()))])))

:class:`TarShards` (the default) writes WebDataset tar shards, ``key.extension`` members with fixed
metadata, and lists where each sample starts; :class:`ParquetShards` writes a row a sample, one row
group a shard; :class:`FileShards` writes each sample as a file of its own, named by its key (a
video re-encoded).
"""

from __future__ import annotations

import io
import tarfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from recipes.core.sources.tar_samples import sample_starts


class TarShards:
    """Tar shards (the default): a sample's members are ``key.extension`` files, with fixed metadata,
    and the manifest lists where each sample starts, as a reader indexes it.

    What a shard is, for :func:`write_prepared` (:class:`ParquetShards` and :class:`FileShards` too):
    ``name(number, keys)`` its file under the destination, ``open(path)`` a writer whose ``add(key,
    members)`` takes a sample and ``close()`` ends the file, and ``entry(path)`` the fields its
    manifest entry holds besides its samples, bytes and sha256."""

    suffix = ".tar"

    def name(self, number: int, keys: list[str]) -> str:
        return f"shard-{number:06d}{self.suffix}"

    def open(self, path: Path) -> Any:
        return _TarShard(path)

    def entry(self, path: Path) -> dict[str, Any]:
        # where each sample starts, as a reader indexes it: readers of DEST list it from manifest.json, no shard opened
        return {"starts": sample_starts(str(path), max_member_bytes=max(path.stat().st_size, 1)).tolist()}


@dataclass(frozen=True)
class ParquetShards:
    """Parquet shards: a sample is a row, its members ``(column, value)`` in ``schema``'s columns (a
    ``pyarrow.Schema``), one row group a shard, ``compression`` as pyarrow names it."""

    schema: Any
    compression: str = "zstd"
    suffix = ".parquet"

    def name(self, number: int, keys: list[str]) -> str:
        return f"shard-{number:06d}{self.suffix}"

    def open(self, path: Path) -> Any:
        return _ParquetShard(path, self.schema, self.compression)

    def entry(self, path: Path) -> dict[str, Any]:
        return {}  # read by row group, not indexed by sample


@dataclass(frozen=True)
class FileShards:
    """A file a sample, ``<key><suffix>`` under the destination (``archery/v_001.mp4``: keys may hold
    folders), holding its one member's bytes; ``samples_per_shard`` must be 1. ``describe(path)``, a
    module's function, gives the fields the file's manifest entry holds (a video's frame count)."""

    suffix: str
    describe: Callable[[Path], dict[str, Any]] | None = None

    def name(self, number: int, keys: list[str]) -> str:
        return f"{keys[0]}{self.suffix}"

    def open(self, path: Path) -> Any:
        return _FileShard(path)

    def entry(self, path: Path) -> dict[str, Any]:
        return {} if self.describe is None else self.describe(path)


def add_member(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    """Add ``data`` to ``tar`` as ``name``, with fixed metadata: the same input gives the same bytes."""
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = len(data), 0o644, 0
    tar.addfile(info, io.BytesIO(data))


class _TarShard:
    def __init__(self, path: Path) -> None:
        self.tar = tarfile.open(path, "w", format=tarfile.PAX_FORMAT)

    def add(self, key: str, members: list[tuple[str, bytes]]) -> None:
        for extension, data in members:
            add_member(self.tar, f"{key}.{extension}", data)

    def close(self) -> None:
        self.tar.close()


class _FileShard:
    def __init__(self, path: Path) -> None:
        self.path = path  # written by add: a sample skipped leaves no file

    def add(self, key: str, members: list[tuple[str, bytes]]) -> None:
        self.path.write_bytes(members[0][1])

    def close(self) -> None:
        pass


class _ParquetShard:
    def __init__(self, path: Path, schema: Any, compression: str) -> None:
        self.path, self.schema, self.compression = path, schema, compression
        self.columns: dict[str, list[Any]] = {name: [] for name in schema.names}

    def add(self, key: str, members: list[tuple[str, Any]]) -> None:
        values = dict(members)
        for name, column in self.columns.items():
            column.append(values[name])

    def close(self) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        table = pa.table({name: pa.array(column, type=self.schema.field(name).type)
                          for name, column in self.columns.items()}, schema=self.schema)
        pq.write_table(table, self.path, compression=self.compression, row_group_size=max(len(table), 1))
