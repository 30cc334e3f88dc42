"""A training-ready copy of an image folder: each image re-encoded once at a bounded size, in the shards
:class:`ImageShards` reads, with a manifest. Every later epoch decodes fewer pixels.

    summary = prepare("imagenet/train", "prepared/", max_side=320, workers=16)
    print(summary)                                     # written, skipped and why, bytes, PSNR, time
    shards = ImageShards("prepared/", classes="prepared/classes.txt", transform=train_transform(224))

The source is read as :func:`write_shards` reads it: an image folder or a CSV / JSONL of
``path,label``. An image whose longer side is over ``max_side``, or that is not a JPEG, is
decoded as the loaders decode it (EXIF turns, CMYK, palette and 16-bit PNG, the bomb limit), its
longer side resized to ``max_side`` (antialiased, never enlarged), and written as a JPEG of
``quality`` (:func:`recipes.core.imaging.resized_jpeg`). A JPEG within the bound keeps its bytes;
``max_side=0`` keeps every file's bytes.

The shards are written as every domain's ``prepare`` writes them (:func:`recipes.core.streams.write_prepared`):
byte-identical for any ``workers``, resumed by running the same call again after a stop at any
point, a destination of other options refused unless ``overwrite=True``, and ``manifest.json``
with each shard's samples, bytes and sha256, the samples skipped and why, the source and options.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from recipes.core import imaging, streams
from recipes.vision.shard_writer import source_rows

__all__ = ["encode_image", "prepare"]


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
    """Write ``source`` as shards of images at most ``max_side`` on their longer side (see the module docstring).

    Args:
        source: an image folder, or a ``.csv`` / ``.jsonl`` manifest of ``path,label``.
        dest: the folder to write (made if missing), or a URL: ``shard-000000.tar``, ..., ``classes.txt``,
            ``manifest.json``.
        max_side: the longest side an image keeps; 0 keeps every file's bytes.
        quality: the JPEG quality of a re-encoded image (1-95).
        samples_per_shard: source rows a shard holds (fewer where some were skipped).
        image_root: a manifest's paths are relative to it (default: its folder).
        workers: processes writing shards (default: the CPU count); 1 writes in this process.
        on_error: ``"raise"``: an image that does not read stops the run, named; ``"skip"``: it is
            left out with a warning, and named in the summary and the manifest.
        overwrite: replace a destination prepared with other options.
        progress: show a progress bar (samples/s and time left).
        storage_options: passed to fsspec where ``dest`` is a URL (``s3://bucket/prepared``): each
            shard is written locally, then uploaded; never shown.
    """
    options = imaging.reencode_options(max_side, quality)
    streams.local_folder(source, "prepare")
    with streams.collect_skips() as dropped:  # rows of a manifest that do not parse: named in the summary
        classes, listed = source_rows(source, image_root, on_error, owner="prepare")
        rows = [(f"{row:09d}", where, (file, label)) for row, (where, file, label) in enumerate(listed)]
    rows += [(None, None, error) for error in dropped]
    beside = {} if classes is None else {"classes.txt": "".join(f"{name}\n" for name in classes).encode()}
    return streams.write_prepared(
        dest, rows, encode_image, domain="vision", options=options,
        source=source, beside=beside, run=streams.PrepareRun(samples_per_shard, workers, on_error, overwrite, progress,
                               storage_options=storage_options),
    )


def encode_image(payload: tuple[str, int], where: str, options: dict[str, int]) -> tuple[list[tuple[str, bytes]],
                                                                                          float | None, int]:
    """A row's members (its image as :func:`recipes.core.imaging.resized_jpeg` writes it, its ``.cls``),
    PSNR and bytes read."""
    file, label = payload
    data = Path(file).read_bytes()
    encoded, extension, quality, _ = imaging.resized_jpeg(data, where, options["max_side"], options["quality"])
    return [(extension, encoded), ("cls", f"{label}\n".encode())], quality, len(data)
