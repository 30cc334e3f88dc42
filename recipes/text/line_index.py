"""Where the k-th line of a list of text files starts, from one pass over them: equal shares by count.

    paths, sizes, index = LineIndex.of_files([Path("corpus-*.jsonl")])  # once per job (the stream: rank 0)
    low, high = index.share(slot, slots, paths)    # byte range of lines [slot*N//slots, (slot+1)*N//slots)
    for offset, where, json_row, raw in index.share_lines(slot, slots, paths): ...   # the lines in that range
    turn = index.turn(slot, slots, epoch, paths)   # where the share is read from in an epoch (then low .. turn)

A stream cut into equal *byte* ranges gives its readers unequal numbers of lines (long lines in one
part, short in another), and a training loader on several ranks stops every rank when the first
runs out (``recipes.core.sampling.distributed.EqualSteps``): the lines the others still held are never seen.
Cut by line count instead, every reader holds the same number of lines, give or take one. The
index keeps each file's line count and the byte offset of every ``STRIDE``-th line (8 bytes per
``STRIDE`` lines); a share's first line is found from the nearest kept one, reading fewer than
``STRIDE`` lines. Blank lines count as lines (the stream passes over them). The build reads every
file once, on rank 0: for a remote corpus, a download before the first step. :meth:`LineIndex.cached`
keeps the index in a folder (``ReadOptions(index_dir=...)``; :mod:`recipes.core.sources.index_cache`): a
second build reads no file.
"""

from __future__ import annotations

import bisect
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from recipes.core import caches, storage, streams

STRIDE = 1024  # lines between kept offsets: 1/128 of a byte per line; a share's start reads < 1024 lines
CHUNK = 1 << 20


class LineIndex:
    """Line counts and sparse line offsets of files read in order (see the module doc)."""

    def __init__(self, counts: list[int], offsets: list[np.ndarray], sizes: list[int]) -> None:
        self.counts, self.offsets, self.sizes = counts, offsets, sizes
        self.first_line = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)  # global number of each file's first line
        self.base = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)  # global byte of each file's start

    @property
    def total(self) -> int:
        return int(self.first_line[-1])

    @classmethod
    def build(cls, paths: list[Any], sizes: list[int], storage_options: dict[str, Any] | None = None) -> LineIndex:
        """Read every file once, counting lines (a last line without a newline counts)."""
        counts, offsets = [], []
        for path, size in zip(paths, sizes):
            kept, count, position = [], 0, 0
            with storage.open_stream(path, storage_options=storage_options, size=size) as file:
                while chunk := file.read(CHUNK):
                    # a line starts at the file's start and after each newline that is not the last byte
                    starts = np.flatnonzero(np.frombuffer(chunk, dtype=np.uint8) == 10) + position + 1
                    if position == 0:
                        starts = np.concatenate([[0], starts])
                    starts = starts[starts < size]
                    wanted = (np.arange(count, count + len(starts)) % STRIDE) == 0
                    kept.append(starts[wanted])
                    count += len(starts)
                    position += len(chunk)
            counts.append(count)
            offsets.append(np.concatenate(kept).astype(np.int64) if kept else np.zeros(0, dtype=np.int64))
        return cls(counts, offsets, list(sizes))

    @classmethod
    def cached(cls, paths: list[Any], sizes: list[int], storage_options: dict[str, Any] | None = None,
               cache_dir: str | os.PathLike | None = None) -> LineIndex:
        """:meth:`build`, or with a ``cache_dir`` the index an earlier build of these files left
        there (:mod:`recipes.core.sources.index_cache`: the files are not read again)."""

        def build() -> dict[str, np.ndarray]:
            index = cls.build(paths, sizes, storage_options)
            return {"counts": np.asarray(index.counts, dtype=np.int64), "sizes": np.asarray(sizes, dtype=np.int64),
                    "offsets": np.concatenate([np.zeros(0, dtype=np.int64), *index.offsets])}

        arrays = caches.cached_index(cache_dir, "lines", [STRIDE, caches.file_identities(paths, sizes)], build)
        counts = arrays["counts"].tolist()
        kept = np.cumsum([-(-count // STRIDE) for count in counts])[:-1]  # each file's kept offsets
        return cls(counts, np.split(arrays["offsets"], kept), arrays["sizes"].tolist())

    @classmethod
    def of_files(cls, paths: list[Any], storage_options: dict[str, Any] | None = None,
                 cache_dir: str | os.PathLike | None = None) -> tuple[list[Any], list[int], LineIndex]:
        """``(files, sizes, index)``: :func:`sized_files` of ``paths`` (globs listed) and their :meth:`cached`
        index; a stream's one look at its text files, on rank 0."""
        files, sizes = sized_files(paths, storage_options)
        return files, sizes, cls.cached(files, sizes, storage_options, cache_dir)

    def line_start(self, line: int, paths: list[Any], storage_options: dict[str, Any] | None = None) -> int:
        """The global byte offset where global line ``line`` starts (the end of the files for the total)."""
        if line >= self.total:
            return int(self.base[-1])
        file = bisect.bisect_right(self.first_line, line) - 1  # the last file starting at or before it: one with lines
        local = line - int(self.first_line[file])
        kept = local // STRIDE
        offset, skip = int(self.offsets[file][kept]), local - kept * STRIDE
        if skip:
            with storage.open_stream(paths[file], start=offset, storage_options=storage_options,
                                     size=self.sizes[file]) as f:
                for _ in range(skip):
                    offset += len(f.readline())
        return int(self.base[file]) + offset

    def share(self, slot: int, slots: int, paths: list[Any], storage_options: dict[str, Any] | None = None) -> tuple[int, int]:
        """``(low, high)``: the global byte range of reader ``slot``'s lines, an equal share by count."""
        total = self.total
        low = self.line_start(slot * total // slots, paths, storage_options)
        high = self.line_start((slot + 1) * total // slots, paths, storage_options)
        return low, high

    def turn(self, slot: int, slots: int, epoch: int, paths: list[Any],
             storage_options: dict[str, Any] | None = None) -> int:
        """The global byte offset where reader ``slot`` starts reading its share in ``epoch``: the line
        :func:`recipes.core.streams.turning_point` names (its first line in even epochs, its middle one in odd)."""
        total = self.total
        line = streams.turning_point(slot * total // slots, (slot + 1) * total // slots, epoch)
        return self.line_start(line, paths, storage_options)

    def share_lines(
        self,
        slot: int,
        slots: int,
        paths: list[Any],
        storage_options: dict[str, Any] | None = None,
        *,
        begin: int | None = None,
        owner: str = "LineIndex",
    ) -> Iterator[tuple[int, str, bool, bytes]]:
        """``(global offset, "path byte N", is JSON, raw line)`` for each line starting in reader ``slot``'s
        share, or from ``begin`` on, a global offset where one of its lines starts (``owner`` names the
        state in the ValueError when none does)."""
        low, high = self.share(slot, slots, paths, storage_options)
        return self.lines_in(low if begin is None else begin, high, paths, storage_options, resumed=begin is not None,
                             owner=owner)

    def lines_in(
        self,
        low: int,
        high: int,
        paths: list[Any],
        storage_options: dict[str, Any] | None = None,
        *,
        resumed: bool = False,
        owner: str = "LineIndex",
    ) -> Iterator[tuple[int, str, bool, bytes]]:
        """:meth:`share_lines` of the lines starting in the global byte range ``[low, high)``; ``low`` is a
        share's boundary (a line that starts before it is left to that share), or ``resumed``, a state's
        offset where a line must start (the ValueError names ``owner``'s state otherwise)."""
        begin = low if resumed else None
        base = 0
        for path, size in zip(paths, self.sizes):
            start, stop = max(low, base) - base, min(high, base + size) - base
            if start < stop:
                json_rows, name = storage.suffix(path) == ".jsonl", storage.shown(path)
                line_start = begin is not None and begin >= base  # start is where a line begins
                position = max(start - 1, 0)
                with storage.open_stream(path, start=position, storage_options=storage_options, size=size) as file:
                    if start > 0 and not line_start:
                        # finish the line that holds byte start-1: it belongs to the slot where
                        # it starts (if that byte is a newline, this reads just that byte)
                        position += len(file.readline())
                    elif start > 0:  # a resumed offset: a line must start there, after a newline
                        if file.read(1) != b"\n":
                            raise ValueError(
                                f"{owner} state: position[1] (offset) = {begin} is not where a line of "
                                f"{name} starts (byte {start}): a state of other files, or the file has changed"
                            )
                        position += 1
                    while position < stop:
                        raw = file.readline()
                        if not raw:
                            break
                        yield base + position, f"{name} byte {position}", json_rows, raw
                        position += len(raw)
            base += size


def sized_files(paths: list[Any], storage_options: dict[str, Any] | None = None) -> tuple[list[Any], list[int]]:
    """``(files, sizes)``: ``paths`` with each glob replaced by its files, sorted, and each file's
    size in bytes: from the glob's listing where it gives one (an object store's: 1,000 a request),
    else asked (:func:`recipes.core.storage.stream_sizes`, a HEAD a URL).

    Raises:
        FileNotFoundError: a glob matches nothing, or a file is missing.
    """
    files: list[Any] = []
    known: list[int | None] = []
    for path in paths:
        if not storage.has_glob(path) or (not storage.is_url(path) and path.is_file()):  # a local file may hold "[" in its name
            files.append(path)
            known.append(None)
            continue
        names, sizes = storage.glob_sizes(os.fspath(path), storage_options)
        if not names:
            raise FileNotFoundError(f"no text file matches {storage.shown(path)}")
        files.extend(name if storage.is_url(name) else Path(name) for name in names)
        known.extend(sizes)
    return files, storage.stream_sizes(files, storage_options, known=known)
