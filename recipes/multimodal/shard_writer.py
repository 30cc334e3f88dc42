"""Write an image-caption manifest as WebDataset tar shards, for :class:`ImageTextShards` or open_clip.

    write_shards("train.jsonl", "shards/", samples_per_shard=1000)
    python recipes/multimodal/shard_writer.py train.jsonl shards/ --samples-per-shard 1000

Each image's original bytes go in unchanged (or, with ``max_side``, re-encoded at a bounded size),
keyed by its manifest row (``000000042.jpg``), next to its caption file
(:mod:`recipes.multimodal.tar_shards`). Equal shards (all but the last) let a shard count that is
a multiple of ``ranks x workers`` give every reader the same share. A shard is written under a
temporary name and renamed, so a reader never sees half of one, and the same input gives
byte-identical shards. Run the file as a script (not ``python -m recipes.multimodal.shard_writer``,
which imports the module twice: once with the package, once as ``__main__``, and warns about it).
"""

from __future__ import annotations

import argparse
import itertools
import os
import tarfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from recipes.core import DataError, imaging, parquet, skip_or_raise, storage, streams
from recipes.multimodal.caption_files import CaptionManifest, read_caption_manifest
from recipes.multimodal.parquet_captions import caption_rows
from recipes.multimodal.tar_shards import caption_member


def write_shards(
    source: Any,
    out_dir: str | os.PathLike,
    samples_per_shard: int = 1000,
    *,
    max_side: int = 0,
    image_root: str | os.PathLike | None = None,
    prefix: str = "shard",
    on_error: str = "raise",
    image_field: str = "image",
    caption_field: str = "caption",
    storage_options: dict[str, Any] | None = None,
    max_row_group_bytes: int = parquet.MAX_ROW_GROUP_BYTES,
) -> list[Path]:
    """Write a manifest (or an ``ImageTextDataset``'s manifest) as WebDataset tar shards.

    Args:
        source: a manifest path (see :mod:`recipes.multimodal.caption_files`); Parquet (a file, a list
            or glob of them, or a ``datasets.Dataset``: :mod:`recipes.multimodal.parquet_captions`);
            or a dataset with ``.manifest`` and ``.image_root``.
        out_dir: folder for ``<prefix>-000000.tar``, ``<prefix>-000001.tar``, ...
        samples_per_shard: images per shard (the last shard may hold fewer).
        max_side: 0 writes each image's bytes unchanged; N > 0 re-encodes an image whose longer side
            is over N, or that is not a JPEG, as a JPEG of quality 90 at most N on its longer side
            (:func:`recipes.core.imaging.resized_jpeg`, as :func:`recipes.multimodal.prepare` does).
        image_root: folder the image names are relative to; default: the dataset's root or
            the manifest's folder.
        on_error: ``"raise"`` on a bad row or an unreadable image header, or ``"skip"`` it.
        image_field, caption_field: the Parquet columns of the image and the caption(s).
        storage_options: passed to fsspec for a Parquet URL.
        max_row_group_bytes: Parquet: refuse a row group whose footer declares more than this
            uncompressed (:data:`recipes.core.parquet.MAX_ROW_GROUP_BYTES`, 256 MiB); raise
            it for a trusted file written with larger row groups.

    Returns:
        The shard paths, in order.
    """
    if samples_per_shard < 1:
        raise ValueError(f"samples_per_shard must be >= 1, got {samples_per_shard}")
    options = imaging.reencode_options(max_side, 90)
    manifest = getattr(source, "manifest", source)
    if parquet.is_parquet(manifest):
        fields = {"image_field": image_field, "caption_field": caption_field, "storage_options": storage_options,
                  "max_row_group_bytes": max_row_group_bytes}
        rows = ((r.where, r.name, r.data, r.captions) for r in caption_rows(manifest, on_error=on_error, **fields))
        first = None if parquet.is_arrow_dataset(manifest) else parquet.parquet_entries(manifest, storage_options)[0]
    else:
        rows, first = _manifest_rows(read_caption_manifest(manifest, on_error=on_error)), manifest
    root = image_root if image_root is not None else getattr(source, "image_root", None if first is None else Path(first).parent)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths, first = [], 0  # first: the manifest row of the shard's first sample
    while chunk := list(itertools.islice(rows, samples_per_shard)):
        path = out / f"{prefix}-{len(paths):06d}.tar"
        partial = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        with tarfile.open(partial, "w", format=tarfile.PAX_FORMAT) as tar:
            for row, (where, name, data, captions) in enumerate(chunk, start=first):
                try:
                    data = data if data is not None else _read(root, name, where)
                    shown = f"{where}: {name or 'embedded image'}"
                    if max_side:
                        data, extension, _, _ = imaging.resized_jpeg(data, shown, **options)
                    else:
                        kind = imaging.open_image(data, source=shown).format
                        suffix = Path(name).suffix.lower().lstrip(".") or "img"
                        extension = imaging.EXTENSION_OF_FORMAT.get(kind, suffix)
                except DataError as error:
                    skip_or_raise(error, on_error)
                    continue
                except OSError as error:
                    skip_or_raise(DataError(f"{where}: cannot read {name} ({error})"), on_error)
                    continue
                key = f"{row:09d}"
                streams.add_member(tar, f"{key}.{extension}", data)
                caption_extension, caption = caption_member(captions)
                streams.add_member(tar, f"{key}.{caption_extension}", caption)
        first += len(chunk)
        os.replace(partial, path)
        paths.append(path)
    return paths


def _manifest_rows(rows: CaptionManifest) -> Iterator[tuple[str, str, None, list[str]]]:
    for row in range(len(rows)):
        yield rows.where(row), rows.images[row], None, rows.captions[row]


def _read(root: str | os.PathLike | None, name: str, where: str) -> bytes:
    if root is None:
        raise DataError(f"{where}: image {name!r} is a path, and a datasets.Dataset has no folder: pass image_root=...")
    return storage.resolve_under(root, name, source=where).read_bytes()


def main(argv: Sequence[str] | None = None) -> None:
    """The command line: ``python shard_writer.py MANIFEST OUT_DIR [--samples-per-shard N] [--image-root DIR]``."""
    parser = argparse.ArgumentParser(description="Write an image-caption manifest as WebDataset tar shards.")
    parser.add_argument("manifest", help=".jsonl, .csv/.tsv, COCO captions .json, or .parquet (a glob in quotes)")
    parser.add_argument("out_dir")
    parser.add_argument("--samples-per-shard", type=int, default=1000)
    parser.add_argument("--image-root", default=None, help="default: the manifest's folder")
    parser.add_argument("--max-side", type=int, default=0, help="re-encode images to at most this longer side")
    args = parser.parse_args(argv)
    paths = write_shards(args.manifest, args.out_dir, args.samples_per_shard, image_root=args.image_root,
                         max_side=args.max_side)
    print(f"wrote {len(paths)} shards to {args.out_dir}")


if __name__ == "__main__":
    main()
