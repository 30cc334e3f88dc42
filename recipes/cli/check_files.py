"""Decode every image of a dataset in worker processes, and check an image folder's layout.

    results = inspect_images([("a.jpg", None), ("b.png", (640, 480))], workers=2)
    report = check_image_folder(Path("data/train"), workers=2)
    report = check_image_shards(Path("shards/"))      # its *.tar, as ImageShards reads them

Each image is read once: PIL parses the header (format, mode, size; a decompression bomb is
refused there, before any pixel is allocated), then :func:`recipes.core.pixels.images.decode_image`
decodes it exactly as the loaders will, so a file that passes here loads in training, with
``strict=True``: a JPEG libjpeg reports as corrupt (it would load with grey or smeared blocks) is
named with libjpeg's reason, as the loaders' ``ReadOptions(strict_decode=True)`` would refuse it. The files
go to a ``multiprocessing`` pool in chunks (:mod:`recipes.cli.worker_pool`), so 100k small files
cost a few hundred round trips, not 100k; results come back in order under a tqdm bar.
"""

from __future__ import annotations

import os
import warnings
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
from torchvision.datasets.folder import IMG_EXTENSIONS

from recipes.cli.report import Report, counts
from recipes.cli.worker_pool import map_in_workers
from recipes.core.sources.class_folders import normalise_extensions, scan_class_folders
from recipes.core.contracts.errors import DataError
from recipes.core.pixels.images import decode_image, open_image
from recipes.core.sources.tar_samples import is_shards

INLINE_BELOW = 64  # fewer files than this are checked in this process: a pool costs more to start


class ImageInfo(NamedTuple):
    """One image: its size as decoded (EXIF applied), PIL's mode and format, or the error."""

    path: str
    width: int = 0
    height: int = 0
    mode: str = ""
    format: str = ""
    error: str | None = None


def inspect_image(item: tuple[str, tuple[int, int] | None] | tuple[str, tuple[int, int] | None, bytes]) -> ImageInfo:
    """Header and full decode of one file; ``item`` is ``(path, expected (width, height) or None)``,
    or ``(name, expected, data)`` for an image held in another file (Parquet bytes)."""
    path, expected, *held = item
    try:
        data = held[0] if held else Path(path).read_bytes()
    except OSError as error:
        return ImageInfo(path, error=f"cannot read file ({error.strerror or error})")
    mode = kind = ""
    try:
        header = open_image(data, source=path)
        mode, kind = header.mode, header.format or ""
        image = decode_image(data, source=path, strict=True)
    except DataError as error:
        return ImageInfo(path, mode=mode, format=kind, error=str(error).removeprefix(f"{path}: "))
    height, width = image.shape[-2:]
    info = ImageInfo(path, int(width), int(height), mode, kind)
    if expected is not None and (info.width, info.height) != tuple(expected):
        reason = (f"decoded image is {width}x{height} (WxH) but the annotations say "
                  f"{expected[0]}x{expected[1]}; its boxes would be misplaced")
        if header.size == tuple(expected):
            reason += " (the file is stored sideways with an EXIF orientation tag the annotations ignored)"
        return info._replace(error=reason)
    return info


def inspect_images(
    items: Sequence[tuple[Any, ...]], *, workers: int | None = None, progress: bool = True
) -> list[ImageInfo]:
    """:func:`inspect_image` over ``items`` in ``workers`` processes (default: the usable CPUs)."""
    return map_in_workers(inspect_image, items, workers=workers, progress=progress, desc="decoding images", unit="img",
                          inline_below=INLINE_BELOW, max_chunksize=512)


def summarize_images(
    report: Report, infos: Sequence[ImageInfo], *, where: dict[str, str] | None = None, held_in: dict[str, str] | None = None
) -> None:
    """Add formats, modes and sizes of the decoded images to ``report``, and a problem for each failure:
    at ``where[path]`` in its file, or in the file ``held_in[path]`` for an image held in another."""
    good = [info for info in infos if info.error is None]
    report.summary["decoded"] = f"{len(good)} of {len(infos)} images"
    if good:
        report.summary["formats"] = counts(info.format for info in good)
        report.summary["modes"] = counts(info.mode for info in good)
        widths = np.array([info.width for info in good])
        heights = np.array([info.height for info in good])
        # one key orders them, the area, shown beside each size: 80x80 is larger than 96x64
        areas = widths * heights
        order = np.argsort(areas, kind="stable")
        picked = {"smallest": order[0], "median": order[len(order) // 2], "largest": order[-1]}
        report.summary["sizes by area"] = ", ".join(
            f"{name} {widths[i]}x{heights[i]} ({areas[i]:,} px)" for name, i in picked.items()
        ) + " (WxH)"
    for info in infos:
        report.files.append({key: value for key, value in info._asdict().items() if value not in ("", None)})
        if info.error is not None:
            report.add((held_in or {}).get(info.path, info.path), info.error, (where or {}).get(info.path, ""))


def check_image_folder(root: Path, *, workers: int | None = None, progress: bool = True) -> Report:
    """An ImageFolder root: every image decodes, every image sits in a class folder, no class is empty."""
    report = Report("vision", str(root))
    if not root.is_dir():
        report.add(root, "not a folder: pass the folder holding one folder per class")
        return report
    extensions = normalise_extensions(IMG_EXTENSIONS)
    found = scan_class_folders(str(root), extensions)  # the walk ImageFolderDataset indexes with
    classes, images, ignored = found.classes, [], []
    for entry in sorted(os.scandir(root), key=lambda entry: entry.name):
        if entry.is_file() and entry.name.lower().endswith(extensions):
            images.append(entry.path)
            if classes:  # without any class folder, the one problem below says it all
                report.add(entry.path, "image outside any class folder: ImageFolderDataset ignores it; "
                           "move it into PATH/<class>/")
        elif entry.is_file():
            ignored.append(entry.path)
    images += [str(root / relative) for relative in found.relative]
    ignored += [str(root / relative) for relative in found.ignored]
    counted = Counter(found.labels)
    per_class = {name: counted[label] for label, name in enumerate(classes)}
    for name in found.empty:
        report.add(root / name, "class folder holds no image file: ImageFolderDataset refuses it; add images or remove it")
    if not classes:
        report.add(root, "no class folder: ImageFolderDataset needs PATH/<class>/<image> (checked the images as they are)")
    report.summary["images"] = len(images)
    report.summary["classes"] = per_class if per_class else "none"
    if ignored:
        shown = ", ".join(os.path.relpath(path, root) for path in ignored[:3])
        report.summary["ignored"] = f"{len(ignored)} file(s) without an image extension ({shown}{', ...' if len(ignored) > 3 else ''})"
    summarize_images(report, inspect_images([(path, None) for path in images], workers=workers, progress=progress))
    return report


def check_image_shards(path: Path, *, progress: bool = True) -> Report:
    """Tar shards (a shard, or a folder of them) as :class:`recipes.vision.ImageShards` reads them:
    each sample's image decoded with ``strict_decode`` and its label read, in this process; each
    sample the reader would skip is a problem named by shard and key. A ``classes.txt`` beside the
    shards (:func:`recipes.vision.write_shards` writes one) names the labels; a ``manifest.json``
    (``recipes prepare``) has each shard's bytes checked against its sha256."""
    from tqdm.auto import tqdm

    from recipes.core import ReadOptions, SkippedSampleWarning, StreamOrder
    from recipes.vision.shards import ImageShards

    report = Report("vision", str(path))
    names = (path if path.is_dir() else path.parent) / "classes.txt"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", SkippedSampleWarning)
        shards = ImageShards(str(path), classes=names if names.is_file() else None, on_error="skip",
                             order=StreamOrder(seed=0, rank=0, world_size=1), read_options=ReadOptions(strict_decode=True))
        labels = Counter(label for _, label in tqdm(shards, disable=not progress, desc="decoding shards", unit="img"))
    for warning in caught:
        if issubclass(warning.category, SkippedSampleWarning):
            where, _, reason = str(warning.message).removeprefix("skipped: ").partition(": ")
            report.add(where, reason)
    report.summary["shards"] = len(shards.shards)
    check_manifest(report, path)
    report.summary["decoded"] = f"{sum(labels.values())} samples"
    classes = shards.classes or [str(label) for label in range(max(labels, default=-1) + 1)]
    report.summary["classes"] = {classes[label]: labels[label] for label in sorted(labels)} or "none"
    return report


def check_manifest(report: Report, path: Path, unit: str = "shards") -> None:
    """Each shard (``unit``) of the ``manifest.json`` that ``recipes prepare`` wrote beside them read
    against its sha256, into ``report``; nothing where there is none."""
    if path.is_dir() and (path / "manifest.json").is_file():
        from recipes.core import streams

        listed, damaged = streams.manifest_problems(path)
        for shard, problem in damaged:
            report.add(shard, problem)
        report.summary["manifest"] = f"{listed - len(damaged)} of {listed} {unit} as manifest.json lists them (sha256)"


def check_folder(options: Any, *, workers: int | None = None, progress: bool = True) -> Report:
    """``recipes check`` of the image folder or the tar shards the CLI's ``options`` name
    (:func:`check_image_folder`, :func:`check_image_shards`)."""
    if is_shards(options.path):
        return check_image_shards(options.path, progress=progress)
    return check_image_folder(options.path, workers=workers, progress=progress)
