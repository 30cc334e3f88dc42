"""Each clip's header for a speech manifest: read from a thread pool, kept in an index folder.

    found = read_headers(sources, names, identify=True)          # [(AudioInfo or DataError, (size, mtime))]
    kept = HeaderIndex.load(index_dir, key)                      # or None; HeaderIndex(...).save(index_dir, key)

A header read is a file open and a few reads: from the page cache tens of microseconds through
libsndfile, on network storage a round trip. A large manifest whose headers wait on storage reads
them from threads (libsndfile releases the GIL while it reads), with a progress bar once a build
takes more than a few seconds. With ``ReadOptions(index_dir=...)`` the rows, their clips' resolved
paths and headers are kept in one ``.npz`` (:mod:`recipes.core.sources.index_cache`, named by the
manifest's path, size and modification time and the fields read), and the next build of the same
manifest reads no header but those of clips whose size or modification time changed, or that could
not be read before.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Any

import numpy as np

from recipes.audio.decoding import AudioInfo, probe
from recipes.core import DataError, arrays, caches

THREADS_FROM = 256  # fewer headers than this are read in the calling thread: a pool costs more to start
CHUNK = 64  # headers a thread reads per task: a task per header would cost more than a WAV header read
MAX_THREADS = 32  # enough to keep network storage busy; local disks saturate far earlier
# A header read that takes longer waits on storage (a network file system, a cold disk), and threads
# overlap the waits; a quicker one is CPU and GIL (0.05-0.1 ms from the page cache), which threads
# only share: 10-64% slower than one thread on 2 cores (benchmarks/README.md, audio).
SLOW_HEADER_S = 0.3e-3
PROGRESS_AFTER_S = 3.0  # a bar for a build that takes longer than this, none for the usual short one
NO_FILE = (-1, -1)  # the size and modification time of a clip that is bytes, or that cannot be stat'ed
INDEX_KIND = "speech-headers"


def read_headers(sources: Sequence[Any], names: Sequence[str], *, identify: bool,
                 description: str = "reading clip headers") -> list[tuple[AudioInfo | DataError, tuple[int, int]]]:
    """``(header or DataError, (size, modification time in ns))`` of each source (a path or bytes),
    in order; the file is stat'ed before its header is read (only with ``identify``), so a change
    made in between is seen at the next build. A large manifest whose first headers take longer
    than :data:`SLOW_HEADER_S` each (storage, not the CPU, is what waits) reads the rest from threads."""
    jobs = list(zip(sources, names))
    if len(jobs) < THREADS_FROM:
        return _read_chunk(jobs, identify)
    from tqdm.auto import tqdm

    with tqdm(total=len(jobs), desc=description, unit="clip", delay=PROGRESS_AFTER_S) as bar:
        start = time.perf_counter()
        results = _read_chunk(jobs[:CHUNK], identify)
        bar.update(CHUNK)
        chunks = range(CHUNK, len(jobs), CHUNK)
        if (time.perf_counter() - start) / CHUNK < SLOW_HEADER_S:  # threads would only share the GIL
            for begin in chunks:
                results += _read_chunk(jobs[begin : begin + CHUNK], identify)
                bar.update(min(CHUNK, len(jobs) - begin))
            return results
        results += [None] * (len(jobs) - CHUNK)
        with ThreadPoolExecutor(min(MAX_THREADS, len(chunks)), thread_name_prefix="recipes-headers") as pool:
            pending = {pool.submit(_read_chunk, jobs[begin : begin + CHUNK], identify): begin for begin in chunks}
            for done in as_completed(pending):
                part, begin = done.result(), pending[done]
                results[begin : begin + len(part)] = part
                bar.update(len(part))
    return results


def _read_chunk(jobs: list[tuple[Any, str]], identify: bool) -> list[tuple[AudioInfo | DataError, tuple[int, int]]]:
    return [_read(source, name, identify) for source, name in jobs]


def _read(source: Any, name: str, identify: bool) -> tuple[AudioInfo | DataError, tuple[int, int]]:
    if isinstance(source, DataError):
        return source, NO_FILE
    identity = file_identity(source) if identify else NO_FILE
    try:
        return probe(source, name), identity
    except DataError as error:
        return error, identity


def file_identity(path: Any) -> tuple[int, int]:
    """``(size, modification time in ns)`` of a local file, :data:`NO_FILE` for anything else."""
    if not isinstance(path, str):
        return NO_FILE
    try:
        stat = os.stat(path)
    except OSError:
        return NO_FILE
    return stat.st_size, stat.st_mtime_ns


@dataclass
class HeaderIndex:
    """What a build of a manifest kept: its rows (``places``, ``refs``, ``texts``, ``stated``
    durations, NaN for none), each clip's resolved ``paths`` ('' where it did not resolve), its file's
    ``sizes`` and ``mtimes`` (-1: none) and header ``seconds`` (NaN: the header could not be read)."""

    places: np.ndarray
    refs: arrays.StringArray | list[Any]  # a list where some row's clip is not a path (a table's bytes)
    texts: arrays.StringArray
    stated: np.ndarray
    paths: list[str]
    sizes: np.ndarray
    mtimes: np.ndarray
    seconds: np.ndarray

    def save(self, index_dir: Any, key: list[Any]) -> None:
        """Keep it in ``index_dir`` under ``key`` (numbers only: it loads without pickle), in three
        arrays, as each costs a read of its own when loaded: the columns of numbers (the durations by
        their float64 bits), the strings' offsets, and the strings (the paths last, joined by NULs)."""
        paths = np.frombuffer("\0".join(self.paths).encode("utf-8", "surrogateescape"), dtype=np.uint8)
        columns = (self.places, self.sizes, self.mtimes, self.stated.view(np.int64), self.seconds.view(np.int64))
        offsets = np.concatenate([self.refs.offsets, self.texts.offsets])
        arrays = {"numbers": np.stack(columns, axis=1), "offsets": offsets,
                  "strings": np.concatenate([self.refs.data, self.texts.data, paths])}
        caches.save_index(index_dir, INDEX_KIND, key, arrays)

    @classmethod
    def load(cls, index_dir: Any, key: list[Any]) -> HeaderIndex | None:
        """The index an earlier build kept under ``key``, or None (none, or one that does not hold together)."""
        stored = caches.load_index(index_dir, INDEX_KIND, key)
        if stored is None:
            return None
        try:
            numbers, offsets, strings = stored["numbers"], stored["offsets"], stored["strings"]
            rows = len(numbers)
            refs = _strings(strings[: offsets[rows]], offsets[: rows + 1])
            texts = _strings(strings[offsets[rows] : offsets[rows] + offsets[-1]], offsets[rows + 1 :])
            joined = strings[offsets[rows] + offsets[-1] :].tobytes().decode("utf-8", "surrogateescape")
        except (KeyError, IndexError, ValueError):
            return None
        paths = joined.split("\0")
        if numbers.ndim != 2 or numbers.shape[1] != 5 or len(paths) != rows or len(texts) != rows:
            return None
        places, sizes, mtimes, stated, seconds = (numbers[:, k].copy() for k in range(5))
        return cls(places, refs, texts, stated.view(np.float64), paths, sizes, mtimes, seconds.view(np.float64))

    def stale(self) -> np.ndarray:
        """Rows to read again: a header that could not be read, or a file whose size or time changed."""
        found = np.array([file_identity(path) if path else NO_FILE for path in self.paths], dtype=np.int64)
        found = found.reshape(len(self.paths), 2)
        return np.isnan(self.seconds) | (found[:, 0] != self.sizes) | (found[:, 1] != self.mtimes) | (self.sizes < 0)


def _strings(data: np.ndarray, offsets: np.ndarray) -> arrays.StringArray:
    strings = arrays.StringArray([])
    if len(offsets) == 0 or offsets[0] != 0 or offsets[-1] != len(data) or np.any(np.diff(offsets) < 0):
        raise ValueError("the offsets do not cut the strings")
    strings.data, strings.offsets = data, offsets
    return strings
