"""Helpers the hostile-input tests of every domain share (module level: workers can import it).

- :data:`BAD_IMAGES`: the hostile image fixtures and the reason each error must give.
- :func:`write_png16`: a 16-bit PNG written byte by byte (zlib + struct), an oracle
  independent of PIL and libpng, whose faithful 8-bit rendering is ``array >> 8``;
  :func:`write_tall_png16` one of any height that holds a single row repeated.
- :func:`worker_error`: iterate a loader with workers until its DataError, check the message,
  and let the workers stop at once (tests/loader_errors.py says why that needs care).
- :func:`peak_rss_growth_mb`: run code in a fresh interpreter and measure its peak memory.
- :func:`recording` / :func:`assert_one_warning_each`: every skip warning, one per bad sample.
"""

from __future__ import annotations

import os
import struct
import subprocess
import sys
import warnings
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from recipes.core.contracts.errors import DataError, SkippedSampleWarning
from tests.loader_errors import loader_error

REPO = Path(__file__).resolve().parents[2]

#: fixtures/hostile/images file -> what the DataError (or skip warning) must say about it
BAD_IMAGES = {
    "bomb.png": "decompression bomb",
    "empty.jpg": "empty file",
    "not_an_image.jpg": "not an image",
    "truncated.jpg": "cannot decode",
}


# PNG colour type by samples per pixel: gray, gray + alpha, RGB, RGBA
_PNG_COLOUR_TYPES = {1: 0, 2: 4, 3: 2, 4: 6}


def _png_chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def _png16(width: int, height: int, channels: int, idat: bytes, extra: bytes = b"") -> bytes:
    header = struct.pack(">IIBBBBB", width, height, 16, _PNG_COLOUR_TYPES[channels], 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + _png_chunk(b"IHDR", header) + extra + _png_chunk(b"IDAT", idat)
            + _png_chunk(b"IEND", b""))


def write_png16(path: Path, array: np.ndarray, *, exif: bytes = b"") -> Path:
    """Write ``array`` (uint16, [H,W] gray or [H,W,C] with C = 2 gray + alpha, 3 RGB, 4 RGBA) as a
    16-bit PNG, filter 0 on every row; ``exif`` (a bare TIFF block) goes in an eXIf chunk first."""
    array = np.asarray(array, dtype=">u2")  # PNG stores samples big-endian
    height, width = array.shape[:2]
    rows = array.reshape(height, -1).view(np.uint8).reshape(height, -1)
    raw = b"".join(b"\x00" + row.tobytes() for row in rows)
    extra = _png_chunk(b"eXIf", exif) if exif else b""
    path.write_bytes(_png16(width, height, 1 if array.ndim == 2 else array.shape[2], zlib.compress(raw), extra))
    return path


def write_tall_png16(path: Path, row: np.ndarray, height: int) -> Path:
    """A 16-bit PNG of ``height`` copies of ``row`` (uint16 [W,C]), streamed: filter Up makes every
    later row zeros, so a 9400x9400 RGBA file is under a megabyte and never held in memory raw."""
    row = np.asarray(row, dtype=">u2")
    compressor = zlib.compressobj(9)
    parts = [compressor.compress(b"\x00" + row.tobytes())]
    repeat = b"\x02" + bytes(row.nbytes)
    parts += [compressor.compress(repeat) for _ in range(height - 1)]
    parts.append(compressor.flush())
    path.write_bytes(_png16(row.shape[0], height, row.shape[1], b"".join(parts)))
    return path


def sixteen_bit_rgb(height: int = 12, width: int = 10) -> np.ndarray:
    """A uint16 [H,W,3] picture using the whole 16-bit range, with different high and low bytes."""
    y, x = np.mgrid[0:height, 0:width]
    return np.stack([x * 6553 + y * 7, y * 5461 + 255, (x * y * 911) % 65536], axis=-1).astype(np.uint16)


def top_byte_chw(array: np.ndarray) -> np.ndarray:
    """The expected decode of a 16-bit image: its top byte, alpha dropped, gray repeated to RGB, CHW."""
    eight = (np.asarray(array) >> 8).astype(np.uint8)
    if eight.ndim == 3 and eight.shape[2] in (2, 4):
        eight = eight[:, :, :-1]  # as PIL's convert("RGB"): alpha dropped, not composited
    if eight.ndim == 3 and eight.shape[2] == 1:
        eight = eight[:, :, 0]
    if eight.ndim == 2:
        eight = np.repeat(eight[:, :, None], 3, axis=2)
    return eight.transpose(2, 0, 1)


def worker_error(loader: Any, pattern: str) -> str:
    """Iterate ``loader`` until it raises a DataError matching ``pattern``; return its message.

    Through :func:`tests.loader_errors.loader_error`: a test that kept the error as caught would keep
    the loader's iterator, whose workers then stop only after 5 s each (that module says why).
    """
    return str(loader_error(loader, DataError, match=pattern))


def peak_rss_growth_mb(setup: str, action: str, timeout: float = 300) -> tuple[float, str]:
    """Run ``setup`` then ``action`` in a fresh interpreter; return (peak RSS growth in MB
    during ``action``, its stdout). ``action`` may print; an exception in it fails the call."""
    code = (
        "import resource\n"
        f"{setup}\n"
        "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        f"{action}\n"
        "after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "print('peak growth MB:', (after - before) / 1024)\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout, env=env, check=False
    )
    assert result.returncode == 0 and "peak growth MB:" in result.stdout, result.stdout + result.stderr
    return float(result.stdout.split("peak growth MB:")[1]), result.stdout


@contextmanager
def recording() -> Iterator[list[warnings.WarningMessage]]:
    """Record every warning, repeats included (the default filter would show a message once)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield caught


def assert_one_warning_each(caught: list[warnings.WarningMessage], expected: dict[str, str]) -> None:
    """One SkippedSampleWarning per ``expected`` place (e.g. ``"m.jsonl line 4: "``), naming its reason."""
    messages = [str(w.message) for w in caught if issubclass(w.category, SkippedSampleWarning)]
    assert len(messages) == len(expected), messages
    for place, reason in expected.items():
        assert any(place in message and reason in message for message in messages), (place, reason, messages)
