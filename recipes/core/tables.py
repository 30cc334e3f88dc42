"""Per-sample tables that do not grow in worker processes.

A Python list of a million path strings is a million objects with reference counts. Every
``dataset[i]`` in a forked worker touches some of them, the kernel copies the page on that
write, and after an epoch each worker holds its own copy of the whole list: the "memory leak"
of pytorch issue 13246 (detectron2 links it from ``data/common.py``). numpy arrays of plain
numbers are single objects, so their pages stay shared.

    paths = StringArray(["a/1.jpg", "b/22.jpg"])
    paths[1]          # 'b/22.jpg'
    len(paths)        # 2
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np


class StringArray:
    """An immutable sequence of strings stored as UTF-8 bytes in one numpy buffer plus offsets."""

    def __init__(self, strings: Iterable[str]) -> None:
        encoded = [s.encode("utf-8", "surrogateescape") for s in strings]
        self.offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
        np.cumsum([len(b) for b in encoded], out=self.offsets[1:])
        self.data = np.frombuffer(b"".join(encoded), dtype=np.uint8).copy()

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, index: int) -> str:
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(f"index {index} out of range for {len(self)} strings")
        return self.data[self.offsets[index] : self.offsets[index + 1]].tobytes().decode("utf-8", "surrogateescape")

    def __iter__(self) -> Iterator[str]:
        return (self[i] for i in range(len(self)))

    def tolist(self) -> list[str]:
        return list(self)
