"""Per-sample tables as flat numpy arrays plus offsets: strings and token ids.

    paths = StringArray(["a/1.jpg", "b/22.jpg"])
    paths[1]                                   # 'b/22.jpg'
    tokens = TokenArray(np.array([5, 6, 7], np.uint16), np.array([0, 2, 3]))
    tokens[0], tokens.lengths                  # array([5, 6]), array([2, 1])

A Python list of a million strings (or of token lists) is a million objects with reference
counts. Every ``dataset[i]`` in a forked worker touches some of them, the kernel copies the page
on that write, and after an epoch each worker holds its own copy of the whole list: the "memory
leak" of pytorch issue 13246 (detectron2 links it from ``data/common.py``). A numpy array of plain
numbers is one object, so its pages stay shared; it also pickles in one piece for ``spawn`` and
saves to ``.npy`` to be memory-mapped back (a token cache; nanoGPT keeps its tokens the same way).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

import numpy as np
import torch

from recipes.core.contracts.errors import DataError

ID_BLOCK = 1 << 16  # ids checked together against a vocabulary bound (TokenArray.bounded)
# Up to this many blocks (16 M ids, milliseconds of maxima) are all checked at the first item: after it
# items are served as if unbounded. Larger arrays are checked a block at a time, as they are read.
WHOLE_CHECK_BLOCKS = 256


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


class TokenArray:
    """Variable-length token sequences stored as one flat array plus offsets.

    Args:
        ids: flat token ids, ``uint16`` or ``uint32``.
        offsets: int64 [N+1]; sequence ``i`` is ``ids[offsets[i]:offsets[i+1]]``.
    """

    def __init__(self, ids: np.ndarray, offsets: np.ndarray) -> None:
        if offsets.ndim != 1 or len(offsets) == 0 or offsets[0] != 0 or offsets[-1] != len(ids):
            raise ValueError("offsets must start at 0 and end at len(ids)")
        self.ids, self.offsets = ids, offsets
        self._below, self._source, self._unchecked, self._pending = 0, "", None, 0

    def bounded(self, below: int, source: str) -> TokenArray:
        """Check ids against ``below`` as they are served: a block of :data:`ID_BLOCK` ids the first
        time any of it is (its maximum, once per process; all of them at the first item up to
        :data:`WHOLE_CHECK_BLOCKS`), and once all are checked items are served as before. An id
        written over in place on disk is then a DataError naming ``source`` and the sample, never an
        item. Returns self. Cost: benchmarks/README.md (text, figure 5)."""
        self._below, self._source = int(below), source
        self._pending = -(-len(self.ids) // ID_BLOCK)
        self._unchecked = bytearray(b"\x01") * self._pending if self._pending else None
        return self

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, index: int) -> np.ndarray:
        start, end = self.offsets[index], self.offsets[index + 1]
        if self._unchecked is not None and end > start:
            first, last = int(start) // ID_BLOCK, (int(end) - 1) // ID_BLOCK
            if self._unchecked[first] or self._unchecked[last] or last - first > 1:
                self._check(first, last, index)
        return self.ids[start:end]

    def _check(self, first: int, last: int, index: int) -> None:
        if len(self._unchecked) <= WHOLE_CHECK_BLOCKS:
            first, last = 0, len(self._unchecked) - 1
        for block in range(first, last + 1):
            if not self._unchecked[block]:
                continue
            ids = self.ids[block * ID_BLOCK : (block + 1) * ID_BLOCK]
            if len(ids) and int(ids.max()) >= self._below:
                position = block * ID_BLOCK + int(np.argmax(ids >= self._below))
                sample = int(np.searchsorted(self.offsets, position, side="right")) - 1
                raise DataError(f"{self._source}: sample {sample} holds token id {int(self.ids[position])}, outside the "
                                f"vocabulary of {self._below} ids: the file was changed after it was written; delete it "
                                f"to rebuild it (asked for sample {index})")
            self._unchecked[block] = 0
            self._pending -= 1
        if self._pending == 0:  # every block checked: items are served as if unbounded
            self._unchecked = None

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)

    def tensor(self, index: int) -> torch.Tensor:
        """Sequence ``index`` as a fresh int64 tensor."""
        return torch.from_numpy(self[index].astype(np.int64))


def concat_tokens(parts: Sequence[TokenArray], dtype: np.dtype) -> TokenArray:
    """One TokenArray of ``parts`` in order (tokenised a chunk at a time); ids of ``dtype``."""
    ids = np.concatenate([part.ids for part in parts]) if parts else np.zeros(0, dtype=dtype)
    lengths = np.concatenate([part.lengths for part in parts]) if parts else np.zeros(0, dtype=np.int64)
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return TokenArray(ids.astype(dtype, copy=False), offsets)


def concat_strings(parts: Sequence[StringArray]) -> StringArray:
    """One StringArray of ``parts`` in order, without turning them back into Python strings."""
    out = StringArray([])
    sizes = np.concatenate([np.diff(part.offsets) for part in parts]) if parts else np.zeros(0, dtype=np.int64)
    out.offsets = np.zeros(len(sizes) + 1, dtype=np.int64)
    np.cumsum(sizes, out=out.offsets[1:])
    out.data = np.concatenate([part.data for part in parts]) if parts else np.zeros(0, dtype=np.uint8)
    return out
