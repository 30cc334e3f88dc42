"""WebDataset-style tar shards: the shard list, and the samples (consecutive members that share a key).

    shards = expand_shards("s3://bucket/train/shard-{000000..000511}.tar")
    for position, (shard, key, files) in read_samples(shards, max_member_bytes=2**28):
        files                             # {"flac": b"...", "txt": b"..."}: extension -> bytes

A shard is a plain (or gzip, bzip2, xz compressed) tar in which the files of one sample sit next
to each other and share a key: ``000042.flac`` + ``000042.txt``, ``000042.jpg`` + ``000042.json``.
This is the format WebDataset, open_clip and LAION use. What a sample's files mean (which member
is the data, which the label) is the reading dataset's business; here they are grouped, checked
and handed over as bytes, with the byte offset a resumed read starts from.
"""

from __future__ import annotations

import contextlib
import glob
import lzma
import os
import re
import zlib
from collections.abc import Iterator, Sequence
from typing import Any, BinaryIO

import numpy as np

from recipes.core.sources.disk_cache import DiskCache
from recipes.core.contracts.errors import DataError, skip_or_raise
from recipes.core.sources.paths import check_relative
from recipes.core.sources.storage import cleaned, glob_paths, has_glob, is_url, open_stream, shown
from recipes.core.sources.tar_stream import tar_members

COMPRESSED = (".gz", ".tgz", ".bz2", ".xz")  # shards that cannot be entered midway, only read from the start
SHARD_SUFFIXES = (".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tar.xz")  # a file that is a shard
_BRACES = re.compile(r"\{(\d+)\.\.(\d+)\}")


def expand_shards(
    paths: str | os.PathLike | Sequence[str | os.PathLike], storage_options: dict[str, Any] | None = None
) -> list[str]:
    """A list of shard paths or URLs from a list, a folder (its ``*.tar``), a glob or a
    ``{000..099}`` range; a glob in a URL is listed through fsspec."""
    if not isinstance(paths, (str, os.PathLike)):
        shards = [os.fspath(path) for path in paths]
    else:
        pattern = os.fspath(paths)
        match = _BRACES.search(pattern)
        if os.path.isdir(pattern):
            shards = sorted(glob.glob(os.path.join(glob.escape(pattern), "*.tar")))
        elif match:
            lo, hi, width = int(match[1]), int(match[2]), len(match[1])
            shards = [pattern[: match.start()] + f"{n:0{width}d}" + pattern[match.end() :] for n in range(lo, hi + 1)]
        elif has_glob(pattern):
            shards = glob_paths(pattern, storage_options)
        else:
            shards = [pattern]
    if not shards:
        where = shown(paths) if isinstance(paths, (str, os.PathLike)) else "an empty list"
        raise ValueError(f"no tar shards found for {where}")
    return shards


def is_shards(path: str | os.PathLike) -> bool:
    """Whether the local ``path`` is what :func:`expand_shards` reads as tar shards: a shard
    (``.tar``, ``.tar.gz``, ``.tgz``, ...), or a folder holding ``.tar`` files and no sub-folder but
    hidden ones (a folder of class folders is an image folder; ``recipes prepare`` keeps its records
    in ``.prepare/``)."""
    path = os.fspath(path)
    if not os.path.isdir(path):
        return path.lower().endswith(SHARD_SUFFIXES)
    entries = list(os.scandir(path))
    folders = any(entry.is_dir() and not entry.name.startswith(".") for entry in entries)
    return not folders and any(entry.name.endswith(".tar") for entry in entries)


def split_key(name: str) -> tuple[str, str]:
    """``(key, extension)`` of a member name by WebDataset's rule: the key ends at the first dot
    of the file name (``a/000.tar.gz.jpg`` -> ``('a/000', 'tar.gz.jpg')``); folders stay in the key."""
    folder, _, base = name.rpartition("/")
    stem, _, extension = base.partition(".")
    return (f"{folder}/{stem}" if folder else stem), extension


def read_samples(
    shards: list[str],
    begin: Any = (0, 0),
    *,
    max_member_bytes: int,
    storage_options: dict[str, Any] | None = None,
    on_error: str = "raise",
    cache: DiskCache | None = None,
) -> Iterator[tuple[list[int], tuple[str, str, dict[str, bytes]]]]:
    """``([shard position, byte offset], (shard, key, {extension: bytes}))`` for each sample (the
    consecutive members that share a key) of ``shards``, from shard ``begin[0]`` and the member
    header at byte ``begin[1]`` on; the position is where the sample's first member starts.

    Each shard is one sequential stream (:func:`recipes.core.sources.storage.open_stream`), never
    extracted to disk: a member name that is absolute or climbs out with ``..`` is refused, links
    and other non-file members are passed over (never followed), and a member over
    ``max_member_bytes`` is refused before it is read (the reading dataset's limit: a member is
    held in memory whole, whatever its header claims). A sample with two members of one extension,
    or a key that comes back after other samples, is refused too (``webdataset`` refuses the
    first): neither overwrites nor doubles a sample. A bad member, sample or shard is a
    :class:`DataError` naming it, or under ``on_error="skip"`` a warning (a bad shard: the rest of
    it; a bad sample: all its members). A ``begin`` offset where no member starts is a ValueError.
    With a ``cache``, remote shards are read through it (:class:`recipes.core.sources.disk_cache.DiskCache`).
    """
    for position in range(begin[0], len(shards)):
        shard, offset = shards[position], begin[1] if position == begin[0] else 0
        key, files, first, name = None, {}, None, shown(shard)
        seen: set[str | None] = set()  # the keys of this shard's samples so far: one that comes back is refused
        dropped = False  # the current sample was refused under on_error="skip": its members are passed over
        reached = not offset  # a member at or after the resume offset was read
        walking = False  # the walk from the offset has begun (a plain shard's keys before it are known)
        try:
            if offset and not _is_compressed(shard):
                seen = _keys_before(shard, offset, max_member_bytes, storage_options, cache)
            walking = True
            with _stream_from(shard, offset, storage_options, cache) as (stream, base):
                for member in tar_members(stream, source=name):
                    if base + member.offset < offset:  # a compressed shard is read from its start
                        seen.add(_known_key(member, name, max_member_bytes))
                        continue
                    if not reached and base + member.offset != offset:
                        raise _not_a_member(name, offset)
                    reached = True
                    if not member.is_file:
                        continue
                    try:
                        stem, extension = _member_key(member, name, max_member_bytes)
                    except DataError as error:
                        skip_or_raise(error, on_error)
                        continue
                    if stem != key:
                        if files and not dropped:
                            yield [position, first], (shard, key, files)
                        seen.add(key)
                        key, files, first, dropped = stem, {}, base + member.offset, False
                        if stem in seen:
                            dropped = _refuse(f"{name}: key {stem!r} comes back at byte {first:,}, after other "
                                              "samples: its members must sit next to each other", on_error)
                    elif extension.lower() in files and not dropped:
                        dropped = _refuse(f"{name}: key {stem!r} has two {extension.lower()!r} members (the second "
                                          f"at byte {base + member.offset:,})", on_error)
                    if not dropped:
                        files[extension.lower()] = member.read()
            if not reached:
                raise _not_a_member(name, offset)
            if files and not dropped:
                yield [position, first], (shard, key, files)
        except DataError as error:  # a damaged shard, or the storage gave up on a fault: both name it
            if walking and not reached and not _is_compressed(shard):  # the walk began at the offset
                raise _not_a_member(name, offset, f" ({error})") from None
            skip_or_raise(error, on_error)
        except (OSError, EOFError, zlib.error, lzma.LZMAError) as error:
            skip_or_raise(DataError(f"{name}: cannot read tar shard ({cleaned(str(error))})"), on_error)


def sample_starts(
    shard: str, *, max_member_bytes: int, storage_options: dict[str, Any] | None = None
) -> np.ndarray:
    """The byte offset where each sample of ``shard`` starts, grouped as :func:`read_samples` groups
    them, from a walk of the member headers that seeks over the data (a compressed shard is read
    whole). The first sample starts at byte 0, members it does not use included, and a shard
    with no sample or one that cannot be walked to its end is one sample at byte 0: its reader
    reads it whole and names what is wrong, as :func:`read_samples` does."""
    starts, key, name = [], None, shown(shard)
    try:
        with _stream_from(shard, 0, storage_options, None) as (stream, _):
            for member in tar_members(stream, source=name, seek=True):
                stem = _known_key(member, name, max_member_bytes)
                if stem is not None and stem != key:
                    starts.append(member.offset)
                    key = stem
    except (DataError, OSError, EOFError, zlib.error, lzma.LZMAError):
        starts = []
    return np.asarray([0, *starts[1:]], dtype=np.int64)


def _member_key(member: Any, name: str, max_member_bytes: int) -> tuple[str, str]:
    """``(key, extension)`` of a file member, or a DataError for an unsafe name or an oversized member."""
    member_name = check_relative(member.name, source=f"{name}: member")
    if member.size > max_member_bytes:
        raise DataError(
            f"{name}: member {member.name!r} holds {member.size:,} bytes, over the limit of "
            f"{max_member_bytes:,} (the reading dataset's MAX_MEMBER_BYTES)"
        )
    return split_key(member_name.removeprefix("./"))


def _known_key(member: Any, name: str, max_member_bytes: int) -> str | None:
    """The key of a file member that :func:`read_samples` groups (None for any other member)."""
    try:
        return _member_key(member, name, max_member_bytes)[0] if member.is_file else None
    except DataError:
        return None


def _refuse(message: str, on_error: str) -> bool:
    """Raise ``message`` as a DataError, or warn under ``on_error="skip"``: True, the sample is dropped."""
    skip_or_raise(DataError(message), on_error)
    return True


def _keys_before(
    shard: str, offset: int, max_member_bytes: int, storage_options: dict[str, Any] | None, cache: DiskCache | None
) -> set[str | None]:
    """The keys of a plain shard's members before ``offset`` (headers only): a resumed read refuses
    a key that comes back exactly as the read from the shard's start does."""
    keys, name = set(), shown(shard)
    with _stream_from(shard, 0, storage_options, cache) as (stream, _):
        for member in tar_members(stream, source=name):
            if member.offset >= offset:
                break
            keys.add(_known_key(member, name, max_member_bytes))
    return keys


def _not_a_member(name: str, offset: int, why: str = "") -> ValueError:
    return ValueError(
        f"{name}: no tar member starts at the resume offset {offset:,} of the loaded state{why}: a state of "
        "other shards, or the shard has changed since"
    )


def _is_compressed(shard: str) -> bool:
    return shard.lower().split("?")[0].endswith(COMPRESSED)


@contextlib.contextmanager
def _stream_from(
    shard: str, offset: int, storage_options: dict[str, Any] | None, cache: DiskCache | None
) -> Iterator[tuple[BinaryIO, int]]:
    """``(the shard's bytes, the offset they start at)``: from ``offset`` when the shard is a plain
    tar (a member header there starts a valid archive), else from its start."""
    compressed = _is_compressed(shard)
    base = 0 if compressed else offset
    if not is_url(shard) and not compressed:
        # Unbuffered: each member is one system call into its own bytes; a buffered reader
        # copies most of a member twice (raw reads ~20 against ~16 us a sample, benchmarks/README.md).
        with open(shard, "rb", buffering=0) as file:
            file.seek(base)
            yield file, base
        return
    opener = open_stream if cache is None else cache.open
    with opener(shard, start=base, storage_options=storage_options) as stream:
        yield stream, base
