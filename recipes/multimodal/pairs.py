"""Image-caption pairs for CLIP-style training: a manifest in, dict batches of uint8 pixels and ids out.

    tokenizer = load_tokenizer("tokenizer.json")
    dataset = ImageTextDataset("train.jsonl", tokenizer, transform=v2.Compose([v2.Resize(224), v2.CenterCrop(224)]))
    loader = multimodal_loader(dataset, batch_size=256, device="cuda", seed=0, stateful=True)
    for batch in DevicePrefetcher(loader, "cuda", mean=CLIP_MEAN, std=CLIP_STD):
        loss = model(pixel_values=batch["pixel_values"], input_ids=batch["input_ids"],
                     attention_mask=batch["attention_mask"], return_loss=True).loss

Manifests (see :mod:`recipes.multimodal.caption_files`): JSONL or CSV rows with ``image`` plus ``caption``
or a ``captions`` list, or a COCO captions json. Image names resolve under ``image_root``, which
defaults to the manifest's folder, and may not escape it. Parquet (Hub datasets, LAION metadata;
:mod:`recipes.multimodal.parquet_captions`): the ``image_field`` column holds a path, the bytes or a
Hugging Face ``Image`` struct, the ``caption_field`` column a caption or a list; embedded bytes
are copied once into a memory-mapped file that the workers share (:mod:`recipes.core.sources.blob_file`).

What the usual ``CsvDataset`` does per sample and this does once: every caption is tokenised at
construction with ``encode_batch`` (Rust, all threads) into one flat token array plus per-image
offsets, so workers hold two numpy buffers, not a list of strings per image (pytorch issue
13246). Images stay uint8 from the decoder (:mod:`recipes.core.pixels.images`) through the collate and
the pinned copy and become float once per batch on the device. The comparison with open_clip's
``CsvDataset`` (``benchmarks/multimodal.py``): benchmarks/README.md.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tokenizers import Tokenizer
from torch.utils.data import DataLoader, Dataset

from recipes.core import (
    DataError,
    ReadOptions,
    SkippedRows,
    UserCode,
    arrays,
    build_loader,
    check_on_error,
    checks,
    decode_image,
    drop_skipped,
    hooks,
    imaging,
    parquet,
    skip_or_raise,
    storage,
    tokenizing,
)
from recipes.multimodal.caption_files import index_caption_manifest
from recipes.multimodal.parquet_captions import index_caption_parquet

CAPTION_CHOICES = ("random", "first", "all")
PAIRS_READ_OPTIONS = ("strict_decode", "max_row_group_bytes", "truncation")
# OpenAI CLIP's normalisation (open_clip OPENAI_DATASET_MEAN/STD); pass to DevicePrefetcher.
CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)


class ImageTextDataset(Dataset):
    """Map-style image-caption dataset; item = ``{"image": uint8 [3,H,W], "input_ids": int64 [L], "index": int}``.

    Args:
        manifest: a ``.jsonl``, ``.csv``/``.tsv`` or COCO captions ``.json`` file, a local path
            or an fsspec URL (``s3://``, ``https://``...); or Parquet: a ``.parquet`` file, a list or
            glob of them, or a Hugging Face ``datasets.Dataset`` (see the module docstring).
        tokenizer: a ``tokenizers.Tokenizer`` or a ``tokenizer.json`` path. Ids equal
            ``tokenizer.encode(caption).ids`` with ``enable_truncation(max_length)``: a long
            caption is cut and keeps its special tokens (CLIP's EOT, where its text embedding is
            pooled); the tokenizer you pass is not changed.
        image_root: folder (or URL) the image names are relative to; default: the manifest's.
        transform: applied to the uint8 image tensor (torchvision v2 transforms work). To batch,
            it must bring every image to one size (e.g. ``Resize(224)`` + ``CenterCrop(224)``). An
            exception it raises is a :class:`recipes.core.SampleError` naming the index,
            manifest line and image (a bug, not bad data: ``on_error="skip"`` does not drop it).
        max_length: truncate ids to this many tokens, special tokens included (CLIP's context is
            77); None keeps all.
        captions: ``"random"`` draws one of an image's captions with ``torch.randint`` in
            ``__getitem__``; the loader runs each sample under a seed made of ``(seed, epoch,
            index)``, so the draw is new every epoch yet the same after a resume or with another
            worker count. ``"first"`` always takes the first. ``"all"`` makes one item per
            (image, caption) pair, for retrieval evaluation; ``caption_image[j]`` is the image row
            of item j.
        on_error: ``"raise"`` a :class:`DataError` naming the manifest line (and the image) for
            an empty or missing caption, an unsafe path or a bad image; or ``"skip"`` it with a
            warning (bad rows leave the index at construction, bad images their batch).
        storage_options: passed to fsspec for URLs (endpoint, credentials); never shown.
        cache_dir: Parquet with embedded images: keep their bytes here, keyed by the source's
            content, so that later runs map that copy (else each construction, in every rank,
            copies them into a temporary file of its own). Ranks that build a cold cache at the
            same moment each write; the last one published stays.
        read_options: a :class:`recipes.core.ReadOptions`; this reads its
            ``strict_decode`` (with ``decode="device"`` every image is then decoded, and checked,
            in the worker), ``max_row_group_bytes`` and ``truncation``.

    Parquet columns named other than ``image`` and ``caption``: :meth:`from_parquet`.
    """

    def _init_columns(
        self,
        manifest: Any,
        tokenizer: Tokenizer | str | os.PathLike,
        *,
        image_root: str | os.PathLike | None = None,
        transform: Callable[[torch.Tensor], torch.Tensor] | None = None,
        max_length: int | None = 77,
        captions: str = "random",
        on_error: str = "raise",
        storage_options: dict[str, Any] | None = None,
        image_field: str = "image",
        caption_field: str = "caption",
        cache_dir: str | os.PathLike | None = None,
        read_options: ReadOptions | None = None,
    ) -> None:
        """The constructor's work, with the Parquet column names :meth:`from_parquet` takes."""
        options = checks.read_options_or_default(read_options, "ImageTextDataset", PAIRS_READ_OPTIONS)
        strict_decode, max_row_group_bytes, truncation = (
            options.strict_decode, options.max_row_group_bytes, options.truncation
        )
        if captions not in CAPTION_CHOICES:
            raise ValueError(f"captions must be one of {CAPTION_CHOICES}, got {captions!r}")
        checks.check_count("max_length", max_length, owner="ImageTextDataset")
        encoder = tokenizing.TruncatingEncoder(tokenizer, max_length, truncation=truncation)
        self.on_error, self.strict_decode = check_on_error(on_error), strict_decode
        self.transform, self.captions, self.max_length = transform, captions, max_length
        self.storage_options, tokenizer = storage_options, tokenizing.load_tokenizer(tokenizer)
        name = storage.shown(manifest) if isinstance(manifest, (str, os.PathLike)) else "the manifest"
        table = parquet.is_parquet(manifest)
        with SkippedRows(name) as skipped:
            if table:
                fields = {"image_field": image_field, "caption_field": caption_field, "cache_dir": cache_dir}
                index = index_caption_parquet(manifest, encoder, on_error=on_error, storage_options=storage_options,
                                              max_row_group_bytes=max_row_group_bytes, **fields)
            else:
                index = index_caption_manifest(manifest, encoder, on_error=on_error, storage_options=storage_options)
            skipped.check(len(index.images))
        if not len(index.images):
            raise DataError(f"{index.sources[0]}: the manifest holds no usable image-caption row")
        self.index, self.images, self.blobs, self.caption_tokens = index, index.images, index.blobs, index.tokens
        arrow = table and parquet.is_arrow_dataset(manifest)
        self.manifest = parquet.entry_name(manifest) if arrow else manifest if table else index.entries[0]
        first, counts = None if arrow else index.entries[0], index.counts
        if image_root is None:
            self.image_root = None if first is None else storage.parent(first)
        else:
            self.image_root = image_root if storage.is_url(image_root) else Path(image_root)
        # Captions of image i are caption_tokens[caption_offsets[i]:caption_offsets[i+1]].
        self.caption_offsets = np.zeros(len(counts) + 1, dtype=np.int64)
        np.cumsum(counts, out=self.caption_offsets[1:])
        self.caption_image = np.repeat(np.arange(len(counts), dtype=np.int64), counts)
        self.pad_id = caption_pad_id(tokenizer)

    def __init__(
        self,
        manifest: str | os.PathLike | list[str | os.PathLike] | Any,
        tokenizer: Tokenizer | str | os.PathLike,
        *,
        image_root: str | os.PathLike | None = None,
        transform: Callable[[torch.Tensor], torch.Tensor] | None = None,
        max_length: int | None = 77,
        captions: str = "random",
        on_error: str = "raise",
        storage_options: dict[str, Any] | None = None,
        cache_dir: str | os.PathLike | None = None,
        read_options: ReadOptions | None = None,
    ) -> None:
        self._init_columns(manifest, tokenizer, image_root=image_root, transform=transform, max_length=max_length,
                           captions=captions, on_error=on_error, storage_options=storage_options, cache_dir=cache_dir,
                           read_options=read_options)

    @classmethod
    def from_parquet(
        cls,
        source: str | os.PathLike | list[str | os.PathLike] | Any,
        tokenizer: Tokenizer | str | os.PathLike,
        *,
        image_field: str = "image",
        caption_field: str = "caption",
        **options: Any,
    ) -> ImageTextDataset:
        """Image-caption pairs from Parquet (or a ``datasets.Dataset``) whose columns have other names.

        Args:
            source: a ``.parquet`` file or URL, a list or a glob of them, or a ``datasets.Dataset``.
            tokenizer: as for the constructor.
            image_field: the column of the image: a path, the bytes or an HF ``Image`` struct.
            caption_field: the column of the caption, or of a list of captions.
            options: the constructor's keywords (``image_root``, ``transform``, ``max_length``,
                ``captions``, ``on_error``, ``storage_options``, ``cache_dir``, ``read_options``).
        """
        if not parquet.is_parquet(source):
            raise ValueError(
                f"ImageTextDataset.from_parquet reads Parquet or a datasets.Dataset, and {storage.shown(source)} is not; "
                "a JSONL, CSV or COCO manifest names its own fields: use ImageTextDataset(manifest, tokenizer)"
            )
        dataset = cls.__new__(cls)
        cls._init_columns(dataset, source, tokenizer, image_field=image_field, caption_field=caption_field, **options)
        return dataset

    def __len__(self) -> int:
        return len(self.caption_tokens) if self.captions == "all" else len(self.images)

    def batch_contract(self) -> dict[str, Any]:
        """What a mixed dataset must share with this one (recipes.core.loading.mixing)."""
        return {"collate": "multimodal_collate", "pad_id": self.pad_id}

    def state_source(self) -> str:
        """What a loader state names as this data: the manifests' names, the sample count and a
        digest of the image names (not the folders: moved data still resumes)."""
        manifests = checks.sampled_digest([storage.basename(source) for source in self.index.sources])
        images = checks.sampled_digest(self.images)
        return f"{len(self.index.sources)} manifests {manifests}: {len(self)} samples, images {images}"

    def describe(self, index: int) -> str:
        """Where sample ``index`` comes from, for messages: ``"train.jsonl line 12, image cat/1.jpg"``."""
        row = int(self.caption_image[index]) if self.captions == "all" else index
        image = "embedded image" if self.blobs is not None and self.blobs[row] else f"image {storage.shown(self.images[row])}"
        return f"{self.index.where(row)}, {image}"

    def __getitem__(self, index: int) -> dict[str, Any] | None:
        return caption_item(self, index, None)


class DeviceCaptions(imaging.DeviceView):
    """``decode="device"``'s view of an :class:`ImageTextDataset`: each item's ``"image"`` is an
    ``EncodedImage``, the file's bytes and the crop/flip parameters drawn as ``dataset[i]`` draws
    them, or, for a file the device cannot decode, ``dataset[i]``'s pixels; under ``strict_decode``
    (only libjpeg on the CPU reports corrupt data) the item is ``dataset[i]``.

    Raises:
        ValueError: ``dataset`` is not an ImageTextDataset, or its transform is one no plan reads.
    """

    reads = ImageTextDataset

    def __init__(self, dataset: ImageTextDataset) -> None:
        super().__init__(dataset)
        self.plan = imaging.ImagePlan(dataset.transform)

    def __getitem__(self, index: int) -> dict[str, Any] | None:
        return caption_item(self.dataset, index, self.plan)


def caption_item(dataset: ImageTextDataset, index: int, plan: imaging.ImagePlan | None) -> dict[str, Any] | None:
    """``dataset[index]``; with a ``plan`` (``decode="device"``, :class:`DeviceCaptions`), ``"image"``
    is an ``EncodedImage`` (:func:`recipes.core.imaging.encode_image`)."""
    if dataset.captions == "all":
        caption = index
        row = int(dataset.caption_image[index])
    else:
        row = index
        first, stop = int(dataset.caption_offsets[row]), int(dataset.caption_offsets[row + 1])
        caption = first
        if dataset.captions == "random" and stop - first > 1:
            # torch's global generator: under the loader it is seeded by (seed, epoch, index)
            caption = first + int(torch.randint(stop - first, ()))
    try:
        data = dataset.blobs[row] if dataset.blobs is not None else None
        if data:  # embedded in Parquet
            source = "embedded image"
        elif dataset.image_root is None:
            raise DataError(f"image {dataset.images[row]!r} is a path, and a datasets.Dataset has no folder: pass image_root=...")
        else:
            path = storage.resolve_under(dataset.image_root, dataset.images[row])
            data, source = imaging.read_file(path, dataset.storage_options), storage.shown(path)
        # only libjpeg on the CPU reports corrupt data: strict_decode decodes in the worker
        encoded = plan is not None and not dataset.strict_decode
        if encoded:
            # the transform runs here on the files the device cannot decode
            with UserCode.for_sample(dataset, index):
                image = imaging.encode_image(data, source, plan, dataset.transform, on_error=dataset.on_error)
        else:
            # With a transform, keep the decoder's channels-last layout: no copy, and an
            # antialiased uint8 resize reads it faster than CHW (benchmarks/README.md).
            contiguous = dataset.transform is None
            image = decode_image(data, source=source, contiguous=contiguous, strict=dataset.strict_decode)
    except DataError as error:
        return skip_or_raise(DataError(f"{dataset.index.where(row)}: {error}"), dataset.on_error)
    if not encoded and dataset.transform is not None:
        with UserCode.for_sample(dataset, index):  # a failing transform names the line and image
            image = dataset.transform(image)
    return {"image": image, "input_ids": dataset.caption_tokens.tensor(caption), "index": index}


def caption_pad_id(tokenizer: Tokenizer) -> int:
    """The tokenizer's pad id (:func:`recipes.core.tokenizing.find_pad_id`), or 0 where it has none, as
    CLIP's BPE has not: captions are always padded, and padded positions are masked out."""
    found = tokenizing.find_pad_id(tokenizer)
    return 0 if found is None else found


def multimodal_collate(batch: Sequence[dict[str, Any] | None], *, pad_id: int = 0) -> dict[str, Any]:
    """Batch image-caption items; ``None`` (skipped) samples are dropped.

    Returns:
        ``pixel_values`` uint8 [B,3,H,W] (channels-last memory when the images are, as decoded
        and resized ones are; ``.contiguous()`` gives NCHW memory), ``input_ids`` int64 [B,T] (right-padded with
        ``pad_id``), ``attention_mask`` int64 [B,T], ``lengths`` int64 [B], and ``index`` int64
        [B] (or ``key``, a list of str, for items from :class:`ImageTextShards`); any other key of the
        items batched as :func:`recipes.core.arrays.extra_columns` does.

    Raises:
        ValueError: images of different sizes, or not uint8; the message says which transform fixes it.
    """
    batch = drop_skipped(batch)
    input_ids, attention_mask, lengths = tokenizing.pad_batch([item["input_ids"] for item in batch], pad_id=pad_id)
    out = {
        "pixel_values": imaging.pack_images(
            [item["image"] for item in batch],
            caller="multimodal_collate",
            fix="add a resize + crop transform, e.g. transform=v2.Compose([v2.Resize(224), v2.CenterCrop(224)])",
        ),
        "input_ids": input_ids,
        "attention_mask": attention_mask,
        "lengths": lengths,
    }
    if batch and "key" in batch[0]:
        out["key"] = [item["key"] for item in batch]
    else:
        out["index"] = torch.tensor([item["index"] for item in batch], dtype=torch.int64)
    return out | arrays.extra_columns(batch, ("image", "input_ids", "index", "key"), out, caller="multimodal_collate")


@dataclass(frozen=True)
class MultimodalCollate:
    """:func:`multimodal_collate` with its pad id as a field (a ``collate_fn`` that pickles and shows it)."""

    pad_id: int = 0

    def __call__(self, batch: Sequence[dict[str, Any] | None]) -> dict[str, Any]:
        return multimodal_collate(batch, pad_id=self.pad_id)


def multimodal_collate_for(dataset: Any) -> MultimodalCollate:
    """:class:`MultimodalCollate` with ``dataset``'s pad id (:func:`recipes.core.hooks.dataset_pad_id`), else 0."""
    return MultimodalCollate(pad_id=hooks.dataset_pad_id(dataset, 0))


def multimodal_loader(
    dataset: Dataset,
    batch_size: int,
    *,
    train: bool = True,
    device: str | torch.device | None = None,
    seed: int | None = None,
    stateful: bool = False,
    decode: str = "worker",
    collate_fn: Callable[[list[Any]], Any] | None = None,
    **overrides: Any,
) -> DataLoader:
    """A DataLoader preset for :class:`ImageTextDataset` (or :class:`ImageTextShards`).

    A map-style dataset gets a seeded batch sampler: shuffled per epoch when
    training, split across ranks, each sample seeded by ``(seed, epoch, index)`` (the random
    caption included). An iterable dataset (tar shards) splits itself across ranks and workers;
    it gets the same device preset, with no more workers than it has samples per rank. Either
    way ``stateful=True`` gives an exact mid-epoch resume (for shards: with the same ranks and
    workers). ``overrides`` are DataLoader keyword arguments
    (``num_workers=0``, ``multiprocessing_context="spawn"``, ...). ``collate_fn`` is used as given;
    by default the collate the dataset asks for (its ``batch_contract()``'s ``"collate"``, :func:`recipes.core.hooks.collate_of`),
    else :class:`MultimodalCollate` with its pad id (:class:`recipes.core.hooks.PadsIds`; 0 if none).

    ``decode="device"`` (map-style, with a RandomResizedCrop or Resize + CenterCrop transform):
    workers ship each JPEG's bytes and its crop and flip drawn from the sample's seed;
    ``DevicePrefetcher`` decodes and augments the batch on its device, and on the CPU gives the
    batches of ``decode="worker"``; files it cannot take (PNG, CMYK, progressive, EXIF-turned) are
    decoded in the worker, in the same batch (recipes.core.pixels.device_decode). Iterate it through the
    prefetcher: the raw batches hold encoded bytes.
    """
    collate = hooks.UsualCollate(multimodal_collate_for) if collate_fn is None else collate_fn
    return build_loader(imaging.with_decode(dataset, decode, DeviceCaptions), collate, batch_size=batch_size,
                        train=train, device=device, seed=seed, stateful=stateful, **overrides)
