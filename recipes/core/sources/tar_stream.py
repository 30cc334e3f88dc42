"""The members of a tar archive read from a sequential stream, fast and strictly.

    with open("shard-000000.tar", "rb") as file:
        for member in tar_members(file, source="shard-000000.tar"):
            if member.is_file and member.size < 2**20:
                data = member.read()          # else the walk skips the data itself

The standard library's ``tarfile`` in stream mode reads 10 KiB at a time and joins the pieces,
and parses every header field: ~55 us a sample of a WebDataset shard, five times what walking the
headers costs (benchmarks/README.md). This walk reads each header (512 bytes) and each member's
data in one call each (on an unbuffered local file, one system call each: a buffered reader
copies most of a member twice), and knows the formats that tar writers produce: ustar (with its name
prefix), GNU long names, pax extended headers (``path``, ``size``), base-256 sizes, and gzip,
bzip2 or xz compression of the whole archive. Every header's checksum is verified; a header
that fails it, a number that does not parse, or data cut short is a :class:`DataError` naming
``source`` and the byte offset. Links, directories and devices are reported with
``is_file=False`` and never followed.
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import zlib
from collections.abc import Iterator
from typing import BinaryIO

from recipes.core.contracts.errors import DataError

BLOCK = 512
FILE_TYPES = (b"0", b"\0", b"7")  # regular file (old and new spelling), contiguous file
MAX_HEADER_DATA = 2**20  # a pax header or GNU long name larger than this is not a real one
_ZEROS = bytes(BLOCK)


class Member:
    """One archive member: ``offset`` of its first header (pax and GNU headers included),
    ``name``, ``is_file``, ``size``; :meth:`read` returns its data (files only, once)."""

    __slots__ = ("offset", "name", "is_file", "size", "_stream", "_source", "data")

    def __init__(self, offset: int, name: str, is_file: bool, size: int, stream: BinaryIO, source: str) -> None:
        self.offset, self.name, self.is_file, self.size = offset, name, is_file, size
        self._stream, self._source, self.data = stream, source, None

    def read(self) -> bytes:
        if self.data is None:
            self.data = _read_exactly(self._stream, self.size, f"{self._source}: member {self.name!r}")
        return self.data


def tar_members(stream: BinaryIO, *, source: str = "<tar>", seek: bool = False) -> Iterator[Member]:
    """Each member of the tar archive in ``stream`` (see the module docstring).

    ``seek=True`` seeks over the data of members not read, on a plain seekable stream: a walk of the
    headers alone (an index) reads 512 bytes a member; data cut short at the end goes unnoticed.
    """
    plain = _decompressed(stream)
    seeking = seek and plain is stream and stream.seekable()
    stream = plain
    position = pending = 0  # pending: bytes to pass over before the next header (a member's padding)
    first, long_name, pax = None, None, {}
    while True:
        if seeking and pending:
            stream.seek(pending, io.SEEK_CUR)
            pending = 0
        elif pending > 64 * BLOCK:
            _skip(stream, pending, f"{source}: the member before byte {position}")
            pending = 0
        chunk = _read_fully(stream, pending + BLOCK)  # the last member's padding and the next header in one call
        if len(chunk) < pending:
            raise DataError(f"{source}: the member before byte {position} is cut short")
        header, pending = chunk[pending:], 0
        if not header or header == _ZEROS:
            return  # the end-of-archive block (or a stream that ends between members)
        if len(header) < BLOCK:
            raise DataError(f"{source}: the tar stream ends inside the header at byte {position}")
        _check_sum(header, source, position)
        first = position if first is None else first
        kind, size = header[156:157], _number(header[124:136], source, position)
        padded = -(-size // BLOCK) * BLOCK
        position += BLOCK
        if kind in (b"x", b"g", b"L", b"K"):  # an extended header: it describes the next member
            if size > MAX_HEADER_DATA:
                raise DataError(f"{source}: an extended tar header at byte {first} claims {size:,} bytes")
            data = _read_exactly(stream, padded, f"{source}: the extended header at byte {first}")[:size]
            position += padded
            if kind == b"x":
                pax.update(_pax_records(data, source, first))
            elif kind == b"L":
                long_name = data.split(b"\0", 1)[0].decode("utf-8", "surrogateescape")
            if kind == b"g":
                first = None  # global settings, not part of a member
            continue
        name = _text(header[0:100])
        if header[257:262] == b"ustar" and header[345] != 0:
            name = _text(header[345:500]) + "/" + name
        name = pax.get("path", long_name or name)
        if "size" in pax:  # a size too large for the header's octal field
            size = _pax_size(pax["size"], source, first)
            padded = -(-size // BLOCK) * BLOCK
        if kind == b"5" or (kind == b"\0" and name.endswith("/")):  # a directory (old tars: a "file" ending in /)
            kind, name = b"5", name.rstrip("/")
        member = Member(first, name, kind in FILE_TYPES, size, stream, source)
        yield member
        pending = padded if member.data is None else padded - size
        position += padded
        first, long_name, pax = None, None, {}


def _decompressed(stream: BinaryIO) -> BinaryIO:
    """``stream``, or a decompressing reader over it for a gzip, bzip2 or xz archive."""
    head = stream.peek(6)[:6] if hasattr(stream, "peek") else b""
    if not head and stream.seekable():  # an unbuffered file: look, then step back
        head = _read_fully(stream, 6)
        stream.seek(-len(head), io.SEEK_CUR)
    elif not head:
        head = stream.read(6)
        stream = io.BufferedReader(_Prefixed(head, stream))
    if head.startswith(b"\x1f\x8b"):
        return gzip.GzipFile(fileobj=stream, mode="rb")
    if head.startswith(b"BZh"):
        return bz2.BZ2File(stream)
    if head.startswith(b"\xfd7zXZ\x00"):
        return lzma.LZMAFile(stream)
    return stream


class _Prefixed(io.RawIOBase):
    """``head`` then the rest of ``stream``: what was read to sniff the format, given back."""

    def __init__(self, head: bytes, stream: BinaryIO) -> None:
        self.head, self.stream = head, stream

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:
        if self.head:
            count = min(len(buffer), len(self.head))
            buffer[:count], self.head = self.head[:count], self.head[count:]
            return count
        data = self.stream.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


def _check_sum(header: bytes, source: str, position: int) -> None:
    stored = _number(header[148:156], source, position)
    unsigned = _byte_sum(header[:148]) + _byte_sum(header[156:412]) + _byte_sum(header[412:]) + 8 * 32
    if stored == unsigned:  # the checksum field itself counts as eight spaces
        return
    counted = header[:148] + header[156:]
    signed = unsigned - 256 * sum(1 for byte in counted if byte > 127)  # what some old writers summed
    if stored != signed:
        raise DataError(f"{source}: bad tar header checksum at byte {position} (not a tar file, or damaged)")


def _byte_sum(data: bytes) -> int:
    """The sum of at most 256 bytes, from the low half of their Adler-32 (1 + the sum, modulo
    65521, which 256 bytes of 255 cannot reach): five times faster than ``sum(data)``."""
    return (zlib.adler32(data) & 0xFFFF) - 1


def _number(field: bytes, source: str, position: int) -> int:
    """A header number: octal text, or base-256 for values too large for it."""
    if field[0] == 0x80:
        return int.from_bytes(field[1:], "big")
    if field[0] == 0xFF:
        raise DataError(f"{source}: a negative number in the tar header at byte {position}")
    text = field.split(b"\0", 1)[0].strip()
    try:
        return int(text, 8) if text else 0
    except ValueError:
        raise DataError(f"{source}: an unreadable number {field!r} in the tar header at byte {position}") from None


def _pax_records(data: bytes, source: str, position: int) -> dict[str, str]:
    """``length key=value\\n`` records of a pax extended header."""
    records, at = {}, 0
    while at < len(data):
        space = data.find(b" ", at)
        try:
            length = int(data[at:space])
            key, _, value = data[space + 1 : at + length - 1].partition(b"=")
        except ValueError:
            raise DataError(f"{source}: an unreadable pax header at byte {position}") from None
        if length <= 0 or space < 0:
            raise DataError(f"{source}: an unreadable pax header at byte {position}")
        records[key.decode("utf-8", "surrogateescape")] = value.decode("utf-8", "surrogateescape")
        at += length
    return records


def _pax_size(text: str, source: str, position: int) -> int:
    if not text.isdigit():
        raise DataError(f"{source}: an unreadable pax size {text[:20]!r} at byte {position}")
    return int(text)


def _text(field: bytes) -> str:
    return field.split(b"\0", 1)[0].decode("utf-8", "surrogateescape")


def _read_fully(stream: BinaryIO, count: int) -> bytes:
    """``count`` bytes, or fewer at the end of the stream: an unbuffered file may return less
    than asked before its end (a signal, a pipe), and is asked again."""
    data = stream.read(count)
    while len(data) < count:
        more = stream.read(count - len(data))
        if not more:
            break
        data += more
    return data


def _read_exactly(stream: BinaryIO, count: int, what: str) -> bytes:
    data = _read_fully(stream, count)
    if len(data) != count:
        raise DataError(f"{what} is cut short: {len(data):,} of {count:,} bytes")
    return data


def _skip(stream: BinaryIO, count: int, what: str) -> None:
    while count > 0:
        data = stream.read(min(count, 2**20))
        if not data:
            raise DataError(f"{what} is cut short")
        count -= len(data)
