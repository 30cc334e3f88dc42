"""tar_members agrees with the standard library's tarfile on what tar writers produce, and names
damaged archives instead of guessing."""

import bz2
import gzip
import io
import lzma
import os
import random
import tarfile

import pytest

from recipes.core.contracts.errors import DataError
from recipes.core.sources.tar_stream import tar_members

FORMATS = {"ustar": tarfile.USTAR_FORMAT, "gnu": tarfile.GNU_FORMAT, "pax": tarfile.PAX_FORMAT}


def _archive(fmt, entries):
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=fmt) as tar:
        for name, kind, data in entries:
            info = tarfile.TarInfo(name)
            if kind == "file":
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
            else:
                info.type = tarfile.DIRTYPE if kind == "dir" else tarfile.SYMTYPE
                info.linkname = "target" if kind == "link" else ""
                tar.addfile(info)
    return buffer.getvalue()


def _entries(rng, long_names):
    entries = []
    for k in range(rng.randrange(0, 8)):
        folder = "/".join(f"folder{i}" for i in range(rng.choice([0, 1, 12] if long_names else [0, 1, 3])))
        name = f"{folder}/{k:03d}é.{rng.choice(['jpg', 'txt', 'json'])}".lstrip("/")
        kind, size = rng.choice(["file", "file", "file", "dir", "link"]), rng.choice([0, 1, 511, 512, 513, 5000])
        entries.append((name, kind, os.urandom(size)))
    return entries


def _by_tarfile(raw):
    with tarfile.open(fileobj=io.BytesIO(raw), mode="r|*") as tar:
        return [(m.offset, m.name, m.isfile(), tar.extractfile(m).read() if m.isfile() else None) for m in tar]


def _by_us(raw):
    members = tar_members(io.BufferedReader(io.BytesIO(raw)), source="t.tar")
    return [(m.offset, m.name, m.is_file, m.read() if m.is_file else None) for m in members]


@pytest.mark.parametrize("fmt", FORMATS)
def test_members_names_offsets_and_data_equal_tarfiles(fmt):
    rng = random.Random(fmt)
    for _ in range(40):
        raw = _archive(FORMATS[fmt], _entries(rng, long_names=fmt != "ustar"))
        assert _by_us(raw) == _by_tarfile(raw)


@pytest.mark.parametrize("compress", [gzip.compress, bz2.compress, lzma.compress], ids=["gzip", "bzip2", "xz"])
def test_compressed_archives_are_read_through(compress):
    raw = _archive(tarfile.PAX_FORMAT, _entries(random.Random(1), long_names=True) + [("a.jpg", "file", b"x" * 700)])
    assert _by_us(compress(raw)) == _by_tarfile(raw)


def test_unread_members_are_skipped_and_read_members_pad_correctly():
    files = [("a.jpg", "file", b"a" * 513), ("b.jpg", "file", b"b" * 3), ("c.txt", "file", b"c")]
    raw = _archive(tarfile.USTAR_FORMAT, files)
    members = tar_members(io.BufferedReader(io.BytesIO(raw)))
    assert next(members).name == "a.jpg"  # not read: the walk skips its data
    second = next(members)
    assert second.read() == b"bbb" and next(members).read() == b"c"


@pytest.mark.parametrize("damage", ["cut-data", "cut-header", "checksum", "number", "huge-pax"])
def test_a_damaged_archive_is_a_data_error_naming_the_source(damage):
    raw = bytearray(_archive(tarfile.PAX_FORMAT, [("a.jpg", "file", b"a" * 2000), ("b.jpg", "file", b"b" * 10)]))
    if damage == "cut-data":
        raw = raw[:1000]
    elif damage == "cut-header":
        raw = raw[:100]
    elif damage == "checksum":
        raw[10] ^= 0xFF
    elif damage == "number":
        raw[124:136] = b"zzzzzzzzzzz\0"
    else:
        pax = b"%d path=x\n" % 10
        header = tarfile.TarInfo("././@PaxHeader")
        header.type, header.size = tarfile.XHDTYPE, 5 * 2**20
        raw = bytearray(header.tobuf(tarfile.USTAR_FORMAT) + pax)
    with pytest.raises(DataError, match="t.tar: "):
        _by_us(bytes(raw))


def test_an_unread_member_cut_short_is_named_too():
    raw = _archive(tarfile.USTAR_FORMAT, [("a.jpg", "file", b"a" * 2000), ("b.jpg", "file", b"b")])
    members = tar_members(io.BufferedReader(io.BytesIO(raw[:1500])), source="t.tar")
    assert next(members).name == "a.jpg"  # passed over, not read
    with pytest.raises(DataError, match="t.tar: the member before byte 2560 is cut short"):
        next(members)


class _Trickle(io.RawIOBase):
    """An unbuffered stream that hands out at most 700 bytes a read, as a pipe or a signal may."""

    def __init__(self, data):
        self.data, self.at = data, 0

    def readable(self):
        return True

    def readinto(self, buffer):
        count = min(len(buffer), 700, len(self.data) - self.at)
        buffer[:count] = self.data[self.at : self.at + count]
        self.at += count
        return count


@pytest.mark.parametrize("kind", ["trickle", "unbuffered file"])
def test_short_reads_of_an_unbuffered_stream_are_read_on(kind, tmp_path):
    raw = _archive(tarfile.PAX_FORMAT, _entries(random.Random(5), long_names=True) + [("big.bin", "file", os.urandom(9000))])
    (tmp_path / "a.tar").write_bytes(raw)
    stream = _Trickle(raw) if kind == "trickle" else open(tmp_path / "a.tar", "rb", buffering=0)
    with stream:
        members = [(m.offset, m.name, m.is_file, m.read() if m.is_file else None) for m in tar_members(stream)]
    assert members == _by_tarfile(raw)
