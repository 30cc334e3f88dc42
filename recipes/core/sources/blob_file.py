"""Many byte strings (encoded images) in one memory-mapped file plus int64 offsets.

    writer = BlobWriter()                  # a private temporary folder, removed with the BlobFile
    writer.add(jpeg_bytes); writer.add(None)
    blobs = writer.finish()
    blobs[0], len(blobs[1])                # bytearray(b'\\xff\\xd8...'), 0 (nothing stored)
    BlobWriter(folder, key)                # or kept in a cache folder, found again by cached_blobs(folder, key)

Images embedded in Parquet are compressed inside row groups: reading one means decoding its
whole row group. So the bytes are copied once, at construction, into a flat file that every
DataLoader worker memory-maps: the index is one numpy array of offsets (pages shared after a
fork, pytorch issue 13246), and a spawned worker receives the file's path, not the images.
The folder lives as long as the BlobFile that owns it, in the process that made it; a file
written into a cache folder under a key instead stays, so that the next run (and every rank of
a job, which would each make a private copy) finds it: it is published atomically, its offsets
last, and a file whose size disagrees with its offsets is not used. Its writer holds a ``flock``
on it meanwhile: a partial file nobody holds was left by a killed run, and the next writer of
the same key deletes it.
"""

from __future__ import annotations

import glob
import os
import secrets
import shutil
import tempfile
import weakref
from pathlib import Path
from typing import Any

import numpy as np

from recipes.core.sources.disk_cache import WRITING, create_locked, remove_if_abandoned, rename_locked
from recipes.core.sources.paths import cache_folder


class BlobFile:
    """Read side: ``blobs[i]`` is entry ``i`` as a fresh ``bytearray`` (empty where none was stored)."""

    def __init__(self, path: str | os.PathLike, offsets: np.ndarray) -> None:
        self.path, self.offsets = Path(path), offsets
        self._data: np.ndarray | None = None  # mapped on first use, in each process

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, index: int) -> bytearray:
        start, stop = int(self.offsets[index]), int(self.offsets[index + 1])
        if start == stop:
            return bytearray()
        if self._data is None:
            self._data = np.memmap(self.path, dtype=np.uint8, mode="r")
        return bytearray(self._data[start:stop])  # writable: torch.frombuffer needs no second copy

    def __getstate__(self) -> dict[str, Any]:
        # a spawned worker maps the file again instead of receiving its content
        return {"path": self.path, "offsets": self.offsets, "_data": None}


def cached_blobs(folder: str | os.PathLike, key: str) -> BlobFile | None:
    """The :class:`BlobFile` a ``BlobWriter(folder, key)`` published, or None if there is none whole."""
    path, offsets_path = _cached_paths(Path(folder), key)
    try:
        offsets = np.load(offsets_path)
        if path.stat().st_size != int(offsets[-1]):
            return None
    except (OSError, ValueError, IndexError):
        return None
    return BlobFile(path, offsets)


def _cached_paths(folder: Path, key: str) -> tuple[Path, Path]:
    return folder / f"{key}.blobs", folder / f"{key}.offsets.npy"


class BlobWriter:
    """Write side: :meth:`add` each entry in order, then :meth:`finish` for the :class:`BlobFile`.

    Without a ``folder`` the file lives in a private temporary folder, removed with the
    BlobFile; with a ``folder`` and a ``key`` it is published there for :func:`cached_blobs`.
    """

    def __init__(self, folder: str | os.PathLike | None = None, key: str | None = None) -> None:
        self.cached = folder is not None
        if self.cached:
            self.folder = cache_folder(folder, option="folder")  # a URL or "" is a ValueError
            self.folder.mkdir(parents=True, exist_ok=True)
            self.final, self.final_offsets = _cached_paths(self.folder, str(key))
            for partial in self.folder.glob(f"{glob.escape(str(key))}.*.tmp"):
                remove_if_abandoned(partial)  # a run killed while it wrote this key's file
            self.path = self.folder / f"{key}.{os.getpid()}.{secrets.token_hex(6)}.tmp"  # ranks may write at once
            self._file = create_locked(self.path)  # the lock tells a live writer from a killed one
        else:
            self.folder = Path(tempfile.mkdtemp(prefix="recipes-blobs-"))
            self.path = self.folder / "blobs.bin"
            self._file = open(self.path, "wb")  # noqa: SIM115 - closed by finish()
        self._sizes: list[int] = []

    def add(self, data: bytes | None) -> None:
        """Append one entry; None or empty stores nothing (the entry reads back empty)."""
        if data:
            self._file.write(data)
        self._sizes.append(len(data) if data else 0)

    def finish(self) -> BlobFile:
        """Close the file and return its reader, which removes the folder when it is collected."""
        offsets = np.zeros(len(self._sizes) + 1, dtype=np.int64)
        np.cumsum(self._sizes, out=offsets[1:])
        if self.cached:  # the file first, then its offsets: their presence says it is whole
            rename_locked(self._file, self.path, self.final)
            partial = self.path.with_suffix(".npy")
            np.save(partial, offsets)
            os.replace(partial, self.final_offsets)
            return BlobFile(self.final, offsets)
        self._file.close()
        blobs = BlobFile(self.path, offsets)
        weakref.finalize(blobs, _remove, self.folder, os.getpid())
        return blobs

    def abort(self) -> None:
        """Close and remove everything written (construction failed, or nothing was embedded)."""
        self._file.close()
        if self.cached:
            self.path.unlink(missing_ok=True)
            WRITING.discard(self.path)
        else:
            shutil.rmtree(self.folder, ignore_errors=True)


def _remove(folder: Path, owner: int) -> None:
    # a forked worker holds a copy of the BlobFile too: only the process that made it removes it
    if os.getpid() == owner:
        shutil.rmtree(folder, ignore_errors=True)
