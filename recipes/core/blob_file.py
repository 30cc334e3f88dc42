"""Many byte strings (encoded images) in one memory-mapped file plus int64 offsets.

    writer = BlobWriter()                  # a private temporary folder, removed with the BlobFile
    writer.add(jpeg_bytes); writer.add(None)
    blobs = writer.finish()
    blobs[0], len(blobs[1])                # bytearray(b'\\xff\\xd8...'), 0 (nothing stored)

Images embedded in Parquet are compressed inside row groups: reading one means decoding its
whole row group. So the bytes are copied once, at construction, into a flat file that every
DataLoader worker memory-maps: the index is one numpy array of offsets (pages shared after a
fork, pytorch issue 13246), and a spawned worker receives the file's path, not the images.
The folder lives as long as the BlobFile that owns it, in the process that made it.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import weakref
from pathlib import Path
from typing import Any

import numpy as np


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


class BlobWriter:
    """Write side: :meth:`add` each entry in order, then :meth:`finish` for the :class:`BlobFile`."""

    def __init__(self) -> None:
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
        self._file.close()
        offsets = np.zeros(len(self._sizes) + 1, dtype=np.int64)
        np.cumsum(self._sizes, out=offsets[1:])
        blobs = BlobFile(self.path, offsets)
        weakref.finalize(blobs, _remove, self.folder, os.getpid())
        return blobs

    def abort(self) -> None:
        """Close and remove everything written (construction failed)."""
        self._file.close()
        shutil.rmtree(self.folder, ignore_errors=True)


def _remove(folder: Path, owner: int) -> None:
    # a forked worker holds a copy of the BlobFile too: only the process that made it removes it
    if os.getpid() == owner:
        shutil.rmtree(folder, ignore_errors=True)
