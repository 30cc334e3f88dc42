"""A training-ready copy of an image-caption manifest: each image re-encoded once at a bounded size,
beside its captions, in the shards :class:`ImageTextShards` reads, with a manifest.

    summary = prepare("train.jsonl", "prepared/", max_side=320, workers=16)
    print(summary)                                     # written, skipped and why, bytes, PSNR, time
    shards = ImageTextShards("prepared/", tokenizer, transform=...)   # listed from prepared/manifest.json

The manifest is read as :class:`ImageTextDataset` reads it (JSONL, CSV / TSV, or a COCO captions
``.json``; image names under ``image_root``, default its folder). Each image is written as
:func:`recipes.vision.prepare` writes it (:func:`recipes.core.imaging.resized_jpeg`: decoded as the
loaders decode it, its longer side resized to ``max_side``, never enlarged, a JPEG of ``quality``;
``max_side=0`` keeps every file's bytes), keyed by its manifest row, next to its captions as
:func:`write_shards` writes them (a ``.txt`` for one, a ``.json`` for more). The shards are written as
every domain's ``prepare`` writes them (:func:`recipes.core.streams.write_prepared`): byte-identical
for any ``workers``, resumed by the same call after a stop at any point, a destination of other
options refused unless ``overwrite=True``, and ``manifest.json`` with each shard's sha256.

For a Parquet source, whose images may be in the file, ``write_shards(..., max_side=...)`` writes
the same members in one process.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from recipes.core import imaging, parquet, storage, streams
from recipes.multimodal.caption_files import read_caption_manifest
from recipes.multimodal.tar_shards import caption_member

__all__ = ["encode_pair", "prepare"]


def prepare(
    source: str | os.PathLike,
    dest: str | os.PathLike,
    *,
    max_side: int = 0,
    quality: int = 90,
    samples_per_shard: int = 1000,
    image_root: str | os.PathLike | None = None,
    workers: int | None = None,
    on_error: str = "raise",
    overwrite: bool = False,
    progress: bool = True,
    storage_options: dict[str, Any] | None = None,
) -> streams.PrepareSummary:
    """Write the manifest ``source`` as shards of images at most ``max_side`` on their longer side,
    each beside its captions (see the module docstring).

    Args:
        source: a local caption manifest: ``.jsonl``, ``.csv`` / ``.tsv``, or a COCO captions ``.json``.
        dest: the folder to write (made if missing): ``shard-000000.tar``, ..., ``manifest.json``.
        max_side, quality, samples_per_shard, workers, on_error, overwrite, progress, storage_options: as
            :func:`recipes.vision.prepare` takes them.
        image_root: the folder the manifest's image names are relative to (default: its folder).
    """
    options = imaging.reencode_options(max_side, quality)
    streams.local_folder(source, "prepare")
    if parquet.is_parquet(source):
        raise ValueError(f"{source}: prepare reads a caption manifest (.jsonl, .csv, .tsv or COCO .json); for "
                         "Parquet, write_shards(source, dest, max_side=...) writes the same shards")
    with streams.collect_skips() as dropped:  # rows that do not parse: named in the summary
        manifest = read_caption_manifest(source, on_error=on_error)
    root = Path(source).parent if image_root is None else streams.local_folder(image_root, "prepare")
    rows = [(f"{row:09d}", f"{manifest.where(row)}: {manifest.images[row]}",
             (str(root), manifest.images[row], manifest.captions[row])) for row in range(len(manifest))]
    rows += [(None, None, error) for error in dropped]
    return streams.write_prepared(
        dest, rows, encode_pair, domain="multimodal", options=options, source=source,
        run=streams.PrepareRun(samples_per_shard, workers, on_error, overwrite, progress,
                               storage_options=storage_options),
    )


def encode_pair(payload: tuple[str, str, list[str]], where: str, options: dict[str, int]) -> tuple[
        list[tuple[str, bytes]], float | None, int]:
    """A row's members (its image as :func:`recipes.core.imaging.resized_jpeg` writes it, its captions),
    PSNR and bytes read; an image name that leaves ``root`` is refused, named."""
    root, name, captions = payload
    data = storage.resolve_under(root, name, source=where).read_bytes()
    encoded, extension, quality, _ = imaging.resized_jpeg(data, where, options["max_side"], options["quality"])
    return [(extension, encoded), caption_member(captions)], quality, len(data)
