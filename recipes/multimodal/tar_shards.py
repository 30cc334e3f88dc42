"""The WebDataset layout of an image-caption sample in a tar shard: member names and caption files.

    key, extension = split_key("part1/000042.jpg")          # ('part1/000042', 'jpg')
    extension, data = caption_member(["a cat", "a cat on a mat"])  # ('json', b'{"captions": ...}')
    captions = read_captions({"jpg": ..., "txt": b"a cat"}, where="shard-000000.tar:000042")
    for position, (shard, key, files) in read_samples(["shard-000000.tar", "shard-000001.tar"]): ...

A shard is a plain tar in which the files of one sample sit next to each other and share a key,
``000042.jpg`` + ``000042.txt`` (one caption) or ``000042.json`` (``{"caption": ...}`` or
``{"captions": [...]}``; a ``.txt`` wins when both are there). This is the format open_clip and
LAION use; the grouping of members into samples is the core's (:mod:`recipes.core.sources.tar_samples`),
the rules for captions are here; the reader (:mod:`recipes.multimodal.shards`) and the writer
(:mod:`recipes.multimodal.shard_writer`) both follow the rules here, so they cannot drift apart.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from recipes.core import DataError, caches, streams
from recipes.text.corpus_files import is_unicode

# The member extensions read as the sample's image, in order of preference.
IMAGE_EXTENSIONS = ("jpg", "jpeg", "png", "webp", "bmp", "gif", "tif", "tiff")
# A member is read whole into memory, and a tar header (or a sparse or gzipped member) can claim
# any size: refuse more than any image under the pixel limit needs, before reading a byte of it.
MAX_MEMBER_BYTES = 512 * 2**20


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
    cache: caches.DiskCache | None = None,
) -> Iterator[tuple[list[int], tuple[str, str, dict[str, bytes]]]]:
    """``([shard position, byte offset], (shard, key, {extension: bytes}))`` for each sample of
    ``shards`` (:func:`recipes.core.streams.read_samples`), members over ``MAX_MEMBER_BYTES`` refused."""
    return streams.read_samples(shards, begin, max_member_bytes=MAX_MEMBER_BYTES, storage_options=storage_options,
                                on_error=on_error, cache=cache)
