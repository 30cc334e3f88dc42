"""The rarely changed knobs of how a dataset reads its files, in one frozen object.

    from recipes.core.contracts.read_options import ReadOptions
    dataset = CocoDataset(root, ann_file, read_options=ReadOptions(strict_decode=True))
    dataset = TokenizedTextDataset(path, tokenizer, max_length=512, read_options=ReadOptions(truncation="slice"))

A constructor keeps the keywords most calls pass (the file, the tokenizer, ``max_length``,
``on_error``, ``storage_options``, ``cache_dir``); the extra checks, size bounds and the cut of a
long text travel together here, as ``tfds.ReadConfig`` and pyarrow's ``ReadOptions`` group theirs.
A dataset reads only the fields that apply to it and refuses a changed field it would ignore
(:meth:`ReadOptions.check_used`), so a setting never goes silently unused.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields

# Longest text tokenised whole (without max_length): about 100 MB of tokenizer memory per line.
MAX_LINE_CHARS = 1_000_000
# A row group is read whole, then held as Python objects (several times its size): the limit on
# what its footer declares, uncompressed, in the columns read. Hub files keep row groups far smaller.
MAX_ROW_GROUP_BYTES = 256 * 2**20
SHARD_CACHE_BYTES = 64 * 2**30  # a local copy of remote shards: room for a few epochs' worth
TRUNCATIONS = ("tokenizer", "slice")  # as recipes.core.tokens.truncation cuts; checked where the option is written
DURATIONS = ("headers", "manifest")  # where a manifest's per-sample lengths come from


@dataclass(frozen=True)
class ReadOptions:
    """How strictly a dataset reads its input, how large a piece it accepts, and how it cuts a long text.

    Args:
        strict_decode: also raise or skip (per ``on_error``) an image that libjpeg reports as
            corrupt (``Corrupt JPEG data: ...``; it would decode with grey or smeared blocks).
            Off by default: about 1% of a decode, but a second, full decode for a JPEG that PIL
            decodes (rare EXIF metadata); benchmarks/README.md.
        strict_annotations: raise on an annotation that is otherwise dropped with one warning
            (COCO: a box with a non-positive or non-finite width or height).
        verify_cache: check every cached file's CRC-32 when it is opened (reads it whole), which
            alone catches a file replaced by another of the same size; a copy that differs is rebuilt.
        verify_shards: a stream of the shards ``recipes prepare`` wrote (their folder) reads each
            shard whole against the sha256 its ``manifest.json`` lists, when it is built, and
            refuses one that disagrees, named; without such a manifest it is a ValueError.
        cache_limit_bytes: the most a shard cache (``cache_dir`` of a stream of shards) holds,
            least recently used out (:class:`recipes.core.sources.disk_cache.DiskCache`).
        max_row_group_bytes: Parquet: refuse a row group whose footer declares more than this
            uncompressed (256 MiB); raise it for a trusted file written with larger row groups.
        max_line_chars: without ``max_length``, a text longer than this is a DataError naming its
            line (each is tokenised whole: about 100 bytes of memory a character).
        index_dir: a stream of text files keeps its line index here (keyed by each file's path,
            size and modification time), so the next build of the same files reads none of them:
            without it, rank 0 reads every file once when the stream is built. A manifest of media
            files keeps each file's header here, read again only for a file whose size or
            modification time changed.
        durations: where a manifest's per-sample lengths come from: ``"headers"``, each file's
            header (read once, at build); ``"manifest"``, the manifest's own durations, no file
            opened until it is decoded, and each decode checked against its row.
        num_channels: the channels a decoded sample keeps: 1 mixes them down to one (their
            mean), None keeps each file's.
        truncation: ``"tokenizer"``: a text over ``max_length`` is cut as the tokenizer's
            ``enable_truncation`` cuts, its special tokens kept; ``"slice"``:
            ``tokenizer.encode(text).ids[:max_length]``, which drops the closing special token (to
            match data cut that way).
        vocab_size: ids read as stored (``from_ids``) must be below it; None: the tokenizer's
            vocabulary, without one only uint32's range.
    """

    strict_decode: bool = False
    strict_annotations: bool = False
    verify_cache: bool = False
    verify_shards: bool = False
    cache_limit_bytes: int = SHARD_CACHE_BYTES
    max_row_group_bytes: int = MAX_ROW_GROUP_BYTES
    max_line_chars: int = MAX_LINE_CHARS
    truncation: str = "tokenizer"
    index_dir: str | os.PathLike | None = None
    vocab_size: int | None = None
    durations: str = "headers"
    num_channels: int | None = 1

    def __post_init__(self) -> None:
        if self.truncation not in TRUNCATIONS:
            raise ValueError(f"ReadOptions.truncation must be one of {TRUNCATIONS}, got {self.truncation!r}")
        if self.durations not in DURATIONS:
            raise ValueError(f"ReadOptions.durations must be one of {DURATIONS}, got {self.durations!r}")
        for name in ("cache_limit_bytes", "max_row_group_bytes", "max_line_chars"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"ReadOptions.{name} must be a positive int, got {value!r}")
        vocab = self.vocab_size
        if vocab is not None and (isinstance(vocab, bool) or not isinstance(vocab, int) or vocab <= 0):
            raise ValueError(f"ReadOptions.vocab_size must be a positive int or None, got {vocab!r}")

    def check_used(self, owner: str, used: tuple[str, ...]) -> ReadOptions:
        """``self``, after refusing a field set away from its default that ``owner`` does not read.

        Raises:
            ValueError: naming the field and the fields ``owner`` reads.
        """
        default = ReadOptions()
        for field in fields(self):
            if field.name not in used and getattr(self, field.name) != getattr(default, field.name):
                raise ValueError(
                    f"{owner} does not read read_options.{field.name}; it reads only {', '.join(used)}: "
                    f"leave {field.name} at its default"
                )
        return self


def read_options_or_default(options: ReadOptions | None, owner: str, used: tuple[str, ...]) -> ReadOptions:
    """``options`` checked for ``owner`` (:meth:`ReadOptions.check_used`), or the defaults for None."""
    if options is None:
        return ReadOptions()
    if not isinstance(options, ReadOptions):
        raise TypeError(f"{owner}: read_options must be a recipes.core.ReadOptions, got {type(options).__name__}")
    return options.check_used(owner, used)
