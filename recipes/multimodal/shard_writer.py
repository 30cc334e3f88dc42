"""Write an image-caption manifest as WebDataset tar shards, for :class:`ImageTextShards` or open_clip.

    write_shards("train.jsonl", "shards/", samples_per_shard=1000)
    python recipes/multimodal/shard_writer.py train.jsonl shards/ --samples-per-shard 1000

Each image's original bytes go in unchanged (no re-encoding), keyed by its manifest row
(``000000042.jpg``), next to its caption file (:mod:`recipes.core.tar_shards`). Equal shards
(all but the last) let a shard count that is a multiple of ``ranks x workers`` give every
reader the same share. A shard is written under a temporary name and renamed, so a reader
never sees half of one, and the same input gives byte-identical shards. Run the file as a
script (not ``python -m recipes.multimodal.shard_writer``, which imports the module twice: once
with the package, once as ``__main__``, and warns about it).
"""

from __future__ import annotations

import argparse
import io
import os
import tarfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from recipes.core.caption_files import read_caption_manifest
from recipes.core.errors import DataError, skip_or_raise
from recipes.core.images import open_image
from recipes.core.paths import resolve_under
from recipes.core.tar_shards import EXTENSION_OF_FORMAT, caption_member


def write_shards(
    source: Any,
    out_dir: str | os.PathLike,
    samples_per_shard: int = 1000,
    *,
    image_root: str | os.PathLike | None = None,
    prefix: str = "shard",
    on_error: str = "raise",
) -> list[Path]:
    """Write a manifest (or an ``ImageTextDataset``'s manifest) as WebDataset tar shards.

    Args:
        source: a manifest path (see :mod:`recipes.core.caption_files`), or a dataset with
            ``.manifest`` and ``.image_root``.
        out_dir: folder for ``<prefix>-000000.tar``, ``<prefix>-000001.tar``, ...
        samples_per_shard: images per shard (the last shard may hold fewer).
        image_root: folder the image names are relative to; default: the dataset's root or
            the manifest's folder.
        on_error: ``"raise"`` on a bad row or an unreadable image header, or ``"skip"`` it.

    Returns:
        The shard paths, in order.
    """
    if samples_per_shard < 1:
        raise ValueError(f"samples_per_shard must be >= 1, got {samples_per_shard}")
    manifest = getattr(source, "manifest", source)
    root = image_root if image_root is not None else getattr(source, "image_root", Path(manifest).parent)
    rows = read_caption_manifest(manifest, on_error=on_error)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for number, start in enumerate(range(0, len(rows), samples_per_shard)):
        path = out / f"{prefix}-{number:06d}.tar"
        partial = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        with tarfile.open(partial, "w", format=tarfile.PAX_FORMAT) as tar:
            for row in range(start, min(start + samples_per_shard, len(rows))):
                try:
                    data = resolve_under(root, rows.images[row], source=rows.where(row)).read_bytes()
                    kind = open_image(data, source=f"{rows.where(row)}: {rows.images[row]}").format
                except DataError as error:
                    skip_or_raise(error, on_error)
                    continue
                except OSError as error:
                    skip_or_raise(DataError(f"{rows.where(row)}: cannot read {rows.images[row]} ({error})"), on_error)
                    continue
                key = f"{row:09d}"
                extension = EXTENSION_OF_FORMAT.get(kind, Path(rows.images[row]).suffix.lower().lstrip("."))
                _add(tar, f"{key}.{extension}", data)
                caption_extension, caption = caption_member(rows.captions[row])
                _add(tar, f"{key}.{caption_extension}", caption)
        os.replace(partial, path)
        paths.append(path)
    return paths


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = len(data), 0o644, 0  # fixed metadata: reproducible shards
    tar.addfile(info, io.BytesIO(data))


def main(argv: Sequence[str] | None = None) -> None:
    """The command line: ``python shard_writer.py MANIFEST OUT_DIR [--samples-per-shard N] [--image-root DIR]``."""
    parser = argparse.ArgumentParser(description="Write an image-caption manifest as WebDataset tar shards.")
    parser.add_argument("manifest", help=".jsonl, .csv/.tsv or COCO captions .json")
    parser.add_argument("out_dir")
    parser.add_argument("--samples-per-shard", type=int, default=1000)
    parser.add_argument("--image-root", default=None, help="default: the manifest's folder")
    args = parser.parse_args(argv)
    paths = write_shards(args.manifest, args.out_dir, args.samples_per_shard, image_root=args.image_root)
    print(f"wrote {len(paths)} shards to {args.out_dir}")


if __name__ == "__main__":
    main()
