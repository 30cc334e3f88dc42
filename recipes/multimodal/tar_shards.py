"""The WebDataset layout of an image-caption sample in a tar shard: member names and caption files.

    key, extension = split_key("part1/000042.jpg")          # ('part1/000042', 'jpg')
    extension, data = caption_member(["a cat", "a cat on a mat"])  # ('json', b'{"captions": ...}')
    captions = read_captions({"jpg": ..., "txt": b"a cat"}, where="shard-000000.tar:000042")
    for position, (shard, key, files) in read_samples(["shard-000000.tar", "shard-000001.tar"]): ...

A shard is a plain tar in which the files of one sample sit next to each other and share a key,
``000042.jpg`` + ``000042.txt`` (one caption) or ``000042.json`` (``{"caption": ...}`` or
``{"captions": [...]}``; a ``.txt`` wins when both are there). This is the format open_clip and
LAION use; the reader (:mod:`recipes.multimodal.shards`) and the writer
(:mod:`recipes.multimodal.shard_writer`) both follow the rules here, so they cannot drift apart.
"""

from __future__ import annotations

import contextlib
import json
import lzma
import zlib
from collections.abc import Iterator
from typing import Any, BinaryIO

from recipes.core.disk_cache import DiskCache
from recipes.core.errors import DataError, skip_or_raise
from recipes.core.paths import check_relative
from recipes.core.storage import cleaned, is_url, open_stream, shown
from recipes.core.tar_stream import tar_members
from recipes.text.corpus_files import is_unicode

# The member extensions read as the sample's image, in order of preference.
IMAGE_EXTENSIONS = ("jpg", "jpeg", "png", "webp", "bmp", "gif", "tif", "tiff")
# PIL's format name -> the extension a shard member gets, whatever the source file was called.
EXTENSION_OF_FORMAT = {"JPEG": "jpg", "PNG": "png", "WEBP": "webp", "BMP": "bmp", "GIF": "gif", "TIFF": "tif"}
# A member is read whole into memory, and a tar header (or a sparse or gzipped member) can claim
# any size: refuse more than any image under the pixel limit needs, before reading a byte of it.
MAX_MEMBER_BYTES = 512 * 2**20
COMPRESSED = (".gz", ".tgz", ".bz2", ".xz")  # shards that cannot be entered midway, only read from the start


def split_key(name: str) -> tuple[str, str]:
    """``(key, extension)`` of a member name by WebDataset's rule: the key ends at the first dot
    of the file name (``a/000.tar.gz.jpg`` -> ``('a/000', 'tar.gz.jpg')``); folders stay in the key."""
    folder, _, base = name.rpartition("/")
    stem, _, extension = base.partition(".")
    return (f"{folder}/{stem}" if folder else stem), extension


def caption_member(captions: list[str]) -> tuple[str, bytes]:
    """The caption file of a sample: ``("txt", caption)`` for one, ``("json", {"captions": [...]})`` for more."""
    if len(captions) == 1:
        return "txt", captions[0].encode("utf-8")
    return "json", json.dumps({"captions": captions}, ensure_ascii=False).encode("utf-8")


def read_captions(files: dict[str, bytes], where: str) -> list[str]:
    """A sample's captions from its ``.txt`` or ``.json`` member (``files``: extension -> bytes).

    Raises:
        DataError: naming ``where``, when there is no caption file, it is not UTF-8 or JSON, or a
            caption is empty, not a string, or holds a lone surrogate (from a JSON escape).
    """
    try:
        if "txt" in files:
            captions = [files["txt"].decode("utf-8").strip()]
        elif "json" in files:
            meta = json.loads(files["json"])
            meta = meta if isinstance(meta, dict) else {}
            captions = meta["captions"] if "captions" in meta else [meta.get("caption")]
        else:
            raise DataError(f"{where}: no caption (.txt, or .json with 'caption') among {sorted(files)}")
    # ValueError: bad UTF-8 or JSON, a 4300-digit integer; RecursionError: absurdly deep nesting
    except (ValueError, RecursionError) as error:
        raise DataError(f"{where}: unreadable caption ({type(error).__name__}: {str(error)[:100]})") from None
    if not isinstance(captions, list) or not captions or not all(isinstance(c, str) and c.strip() for c in captions):
        raise DataError(f"{where}: empty or missing caption ({str(captions)[:100]!r})")
    for caption in captions:
        if not is_unicode(caption):  # a lone surrogate would stop the tokenizer
            raise DataError(f"{where}: caption {caption[:60]!r} is not valid UTF-8 text")
    return captions


def read_samples(
    shards: list[str],
    begin: Any = (0, 0),
    *,
    storage_options: dict[str, Any] | None = None,
    on_error: str = "raise",
    cache: DiskCache | None = None,
) -> Iterator[tuple[list[int], tuple[str, str, dict[str, bytes]]]]:
    """``([shard position, byte offset], (shard, key, {extension: bytes}))`` for each sample (the
    consecutive members that share a key) of ``shards``, from shard ``begin[0]`` and the member
    header at byte ``begin[1]`` on; the position is where the sample's first member starts.

    Each shard is one sequential stream (:func:`recipes.core.storage.open_stream`), never
    extracted to disk: a member name that is absolute or climbs out with ``..`` is refused, links
    and other non-file members are passed over (never followed), and a member over
    ``MAX_MEMBER_BYTES`` is refused before it is read. A sample with two members of one extension,
    or a key that comes back after other samples, is refused too (``webdataset`` refuses the
    first): neither overwrites nor doubles a sample. A bad member, sample or shard is a
    :class:`DataError` naming it, or under ``on_error="skip"`` a warning (a bad shard: the rest of
    it; a bad sample: all its members). A ``begin`` offset where no member starts is a ValueError.
    With a ``cache``, remote shards are read through it (:class:`recipes.core.disk_cache.DiskCache`).
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
                seen = _keys_before(shard, offset, storage_options, cache)
            walking = True
            with _stream_from(shard, offset, storage_options, cache) as (stream, base):
                for member in tar_members(stream, source=name):
                    if base + member.offset < offset:  # a compressed shard is read from its start
                        seen.add(_known_key(member, name))
                        continue
                    if not reached and base + member.offset != offset:
                        raise _not_a_member(name, offset)
                    reached = True
                    if not member.is_file:
                        continue
                    try:
                        stem, extension = _member_key(member, name)
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


def _member_key(member: Any, name: str) -> tuple[str, str]:
    """``(key, extension)`` of a file member, or a DataError for an unsafe name or an oversized member."""
    member_name = check_relative(member.name, source=f"{name}: member")
    if member.size > MAX_MEMBER_BYTES:
        raise DataError(
            f"{name}: member {member.name!r} holds {member.size:,} bytes, over the limit of "
            f"{MAX_MEMBER_BYTES:,} (tar_shards.MAX_MEMBER_BYTES)"
        )
    return split_key(member_name.removeprefix("./"))


def _known_key(member: Any, name: str) -> str | None:
    """The key of a file member that :func:`read_samples` groups (None for any other member)."""
    try:
        return _member_key(member, name)[0] if member.is_file else None
    except DataError:
        return None


def _refuse(message: str, on_error: str) -> bool:
    """Raise ``message`` as a DataError, or warn under ``on_error="skip"``: True, the sample is dropped."""
    skip_or_raise(DataError(message), on_error)
    return True


def _keys_before(
    shard: str, offset: int, storage_options: dict[str, Any] | None, cache: DiskCache | None
) -> set[str | None]:
    """The keys of a plain shard's members before ``offset`` (headers only): a resumed read refuses
    a key that comes back exactly as the read from the shard's start does."""
    keys, name = set(), shown(shard)
    with _stream_from(shard, 0, storage_options, cache) as (stream, _):
        for member in tar_members(stream, source=name):
            if member.offset >= offset:
                break
            keys.add(_known_key(member, name))
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
