"""Image-caption pairs streamed from WebDataset-format tar shards, split across ranks and workers.

    shards = ImageTextShards("s3://bucket/shards/shard-{000000..000127}.tar", tokenizer,
                             transform=v2.Compose([v2.Resize(224), v2.CenterCrop(224)]),
                             order=StreamOrder(shuffle_buffer=2000, seed=0))
    loader = multimodal_loader(shards, batch_size=256, device="cuda")
    for epoch in range(epochs):
        for batch in loader: ...                                       # the epoch advances by itself

The format open_clip and LAION use when a dataset outgrows one machine (:mod:`recipes.multimodal.tar_shards`;
:mod:`recipes.multimodal.shard_writer` writes it from a manifest). Shards are local paths or fsspec
URLs (``s3://``, ``gs://``, ``https://``), each read as one sequential stream that survives transient
faults (:mod:`recipes.core.sources.storage`), members in order, never extracted to disk (unsafe names
refused, links never followed, oversized members refused before they are read).

Splitting: each epoch the shards' samples (shards in an order shuffled by ``(seed, epoch)`` with a
``shuffle_buffer``) are cut into ``world_size x num_workers`` runs equal by count
(:mod:`recipes.core.sources.shard_index`), so every sample is read once per epoch, more readers than shards
work, and training ranks stopped at one step (:class:`recipes.core.sampling.distributed.EqualSteps`) leave
out fewer than ``world_size x num_workers x batch_size`` samples. Transforms and random captions
are seeded by ``(seed, epoch, key)``, not by the reader. Each pass advances the epoch of the copy
iterated; with non-persistent workers, call ``set_epoch(epoch)`` before each pass.

Why a tar walk of its own and not the webdataset package: benchmarks/README.md (streams).
"""

from __future__ import annotations

import functools
import os
import zlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch
from tokenizers import Tokenizer

from recipes.core import (
    DataError,
    ReadOptions,
    StreamOrder,
    UserCode,
    caches,
    check_on_error,
    checks,
    decode_image,
    ranks,
    sample_seed,
    seeded,
    skip_or_raise,
    storage,
    streams,
    tokenizing,
)
from recipes.multimodal.pairs import caption_pad_id
from recipes.multimodal.tar_shards import IMAGE_EXTENSIONS, MAX_MEMBER_BYTES, read_captions, read_samples

CAPTION_CHOICES = ("random", "first", "all")
SHARDS_READ_OPTIONS = ("strict_decode", "truncation", "cache_limit_bytes", "verify_cache", "verify_shards")


class ImageTextShards(streams.ShardStream):
    """Iterate ``{"image": uint8 [3,H,W], "input_ids": int64 [L], "key": str}`` from tar shards.

    Args:
        paths: shard paths (see :func:`expand_shards`). A glob is listed once per job, by rank 0
            of an initialised process group, which sends the list to the other ranks; a shard is
            read with ranged GETs from its first byte, its size not asked for (a ``cache_dir``
            asks it of a shard over one 16 MiB request, to make room for the copy).
        tokenizer: a ``tokenizers.Tokenizer`` or a ``tokenizer.json`` path; ids equal
            ``tokenizer.encode(caption).ids`` with ``enable_truncation(max_length)``: a long
            caption is cut and keeps its special tokens (CLIP's EOT); the tokenizer you pass is
            not changed.
        transform: applied to the uint8 image; must bring images to one size to batch them. An
            exception it raises is a :class:`recipes.core.SampleError` naming the shard and
            member (a bug, not bad data: ``on_error="skip"`` does not drop it).
        max_length: truncate ids to this many tokens, special tokens included; None keeps all.
        captions: ``"random"``, ``"first"`` or ``"all"`` (one item per caption) for multi-caption samples.
        on_error: ``"raise"`` a :class:`DataError` naming the shard and member, or ``"skip"`` the
            sample (a bad shard: the rest of it) with a warning.
        storage_options: passed to fsspec for URL shards (endpoint, credentials); never shown.
        cache_dir: keep remote shards here once read whole, so later epochs read local disk, and
            the shards' sample index (:mod:`recipes.core.sources.shard_index`), so a second build reads none
            (:class:`recipes.core.caches.DiskCache`).
        order: a :class:`recipes.core.StreamOrder`: ``shuffle_buffer`` samples held
            for shuffling (0: shards and samples in order), the shuffling and augmentation
            ``seed`` shared by all ranks (None draws one), and a rank and world size to use
            instead of ``torch.distributed``'s.
        read_options: a :class:`recipes.core.ReadOptions`; this reads its
            ``strict_decode``, ``truncation``, ``cache_limit_bytes`` (the cache's bound), ``verify_cache``
            (each cached shard's CRC-32 at every open; a copy that differs is fetched again) and
            ``verify_shards`` (a prepared folder's shards against its manifest's sha256s).
    """

    def __init__(
        self,
        paths: str | os.PathLike | Sequence[str | os.PathLike],
        tokenizer: Tokenizer | str | os.PathLike,
        *,
        transform: Callable[[torch.Tensor], torch.Tensor] | None = None,
        max_length: int | None = 77,
        captions: str = "random",
        on_error: str = "raise",
        storage_options: dict[str, Any] | None = None,
        cache_dir: str | os.PathLike | None = None,
        order: StreamOrder | None = None,
        read_options: ReadOptions | None = None,
    ) -> None:
        order = streams.order_or_default(order, "ImageTextShards")
        options = checks.read_options_or_default(read_options, "ImageTextShards", SHARDS_READ_OPTIONS)
        shuffle_buffer, seed, rank, world_size = order.shuffle_buffer, order.seed, order.rank, order.world_size
        if captions not in CAPTION_CHOICES:
            raise ValueError(f"captions must be one of {CAPTION_CHOICES}, got {captions!r}")
        # listed and indexed once per job: on rank 0, sent to the others; workers get them with the dataset
        listed = functools.partial(listed_and_indexed, paths, storage_options, cache_dir, options.verify_shards)
        self.shards, self.index = ranks.shared_result(listed, rank, world_size)
        self.storage_options = storage_options
        self.cache = None if cache_dir is None else caches.DiskCache(cache_dir, options.cache_limit_bytes,
                                                                     verify=options.verify_cache)
        if storage.is_url(self.shards[0]):
            storage.filesystem(self.shards[0], storage_options)  # import the backend here, not in every forked worker
        self.tokenizer = tokenizing.load_tokenizer(tokenizer)
        # its copies are made once
        self.encoder = tokenizing.TruncatingEncoder(self.tokenizer, max_length, truncation=options.truncation)
        self.transform, self.shuffle_buffer, self.max_length = transform, shuffle_buffer, max_length
        self.captions, self.on_error = captions, check_on_error(on_error)
        self.strict_decode = options.strict_decode
        # what a state names as its data: the shards' count and names (not where they are kept)
        source = f"{len(self.shards)} shards {zlib.crc32(chr(10).join(map(storage.basename, self.shards)).encode()):08x}"
        super().__init__(seed, rank, world_size, source=source)
        self.pad_id = caption_pad_id(self.tokenizer)
        self.epochs = streams.ShardEpochs(self.index, shuffle_buffer, type(self).__name__)  # how a pass reads them

    def batch_contract(self) -> dict[str, Any]:
        """What a mixed stream must share with this one (recipes.core.loading.mixing)."""
        return {"collate": "multimodal_collate", "pad_id": self.pad_id}

    def _max_taken(self, slots: int) -> int | None:
        return max(self.shuffle_buffer, 1) if self.captions != "all" else None  # "all": items per sample vary

    def _read(self, numbers: list[int], start: Any) -> Iterator[tuple[list[int], Any]]:
        return read_samples([self.shards[number] for number in numbers], start, storage_options=self.storage_options,
                            on_error=self.on_error, cache=self.cache)

    def _items(self, shard: str, key: str, files: dict[str, bytes], epoch: int) -> Iterator[dict[str, Any]]:
        where = f"{storage.shown(shard)}:{key}"
        try:
            extension = next((e for e in IMAGE_EXTENSIONS if e in files), None)
            if extension is None:
                raise DataError(f"{where}: no image file ({'/'.join(IMAGE_EXTENSIONS)}) among {sorted(files)}")
            captions = read_captions(files, where)
            # channels-last view when transformed: see ImageTextDataset (no copy, faster resize)
            data, contiguous = files[extension], self.transform is None
            image = decode_image(data, source=f"{where}.{extension}", contiguous=contiguous, strict=self.strict_decode)
        except DataError as error:
            skip_or_raise(error, self.on_error)
            return
        name = f"{storage.basename(shard)}/{key}"
        choices = range(len(captions)) if self.captions == "all" else [None]
        for choice in choices:
            # A seed per sample (and caption): the augmentation does not depend on the worker.
            with seeded(sample_seed(self.cursor.seed, epoch, zlib.crc32(f"{name}/{choice}".encode()))):
                if choice is None:
                    random_pick = self.captions == "random" and len(captions) > 1
                    choice = int(torch.randint(len(captions), ())) if random_pick else 0
                with UserCode(f"shard {where}.{extension}"):  # a failing transform names the member
                    out = image if self.transform is None else self.transform(image)
            ids = self.encoder([captions[choice]])[0]
            yield {"image": out, "input_ids": torch.tensor(ids, dtype=torch.int64), "key": name}


def listed_and_indexed(
    paths: Any, storage_options: dict[str, Any] | None, cache_dir: str | os.PathLike | None = None, verify: bool = False
) -> tuple[list[str], streams.ShardIndex]:
    """The shard list and where each shard's samples start (:func:`recipes.core.streams.listed_shards`:
    a prepared folder's manifest, one walk of the headers, or the copy kept in ``cache_dir``)."""
    return streams.listed_shards(paths, storage_options, max_member_bytes=MAX_MEMBER_BYTES, cache_dir=cache_dir,
                                 verify=verify)


def expand_shards(
    paths: str | os.PathLike | Sequence[str | os.PathLike], storage_options: dict[str, Any] | None = None
) -> list[str]:
    """The shards ``paths`` names, as :class:`ImageTextShards` reads them: a list of paths or URLs, a
    folder (its ``*.tar``), a glob or a ``{000..099}`` range (a glob in a URL listed through fsspec)."""
    return streams.expand_shards(paths, storage_options)
