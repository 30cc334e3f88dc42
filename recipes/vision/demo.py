"""The domain as the command line runs it: ``recipes demo vision`` (the fixture image folder
through the training preset) and the folder or tar shards ``recipes bench/show vision PATH`` open.

    from recipes.vision.demo import build
    dataset, loader = build(fixtures_dir())
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from torch.utils.data import DataLoader

from recipes.core import storage, streams
from recipes.vision import ImageFolderDataset, eval_transform, train_transform, vision_loader


def build(fixtures: Path) -> tuple[ImageFolderDataset, DataLoader]:
    """An ImageFolderDataset over ``vision/`` (3 classes, 14 images in every mode the decoder
    handles, a nested folder and an ignored text file) with 64x64 training crops, and a seeded
    CPU loader of batches of 4 (training drops the last 2 images)."""
    dataset = ImageFolderDataset(fixtures / "vision", train_transform(64))
    return dataset, vision_loader(dataset, 4, device="cpu", seed=0, num_workers=0)


def open_path(options: Any, *, train: bool) -> ImageFolderDataset | Any:
    """The image folder, or the tar shards (a shard, or a folder of them: an ``ImageShards``, its
    ``classes.txt`` read where it has one), at ``options.path`` (the CLI's ``DataOptions``):
    training crops and flips of ``options.size`` if ``train``, else the evaluation resize and centre crop."""
    size = options.size
    transform = train_transform(size) if train else eval_transform(size, resize_size=round(size * 256 / 224))
    if streams.is_shards(options.path):
        from recipes.vision import ImageShards

        folder = Path(options.path) if Path(options.path).is_dir() else Path(options.path).parent
        names = folder / "classes.txt"
        return ImageShards(str(options.path), transform=transform, classes=names if names.is_file() else None,
                           on_error=options.on_error)
    return ImageFolderDataset(options.path, transform, on_error=options.on_error)


def prepare_path(source: Path, dest: Path, *, max_side: int = 0, quality: int = 90, image_root: Path | None = None,
                 **run: Any) -> tuple[Any, str]:
    """``recipes prepare vision SOURCE DEST``: :func:`recipes.vision.prepare`, and how to read what it wrote."""
    from recipes.vision import prepare

    summary = prepare(source, dest, max_side=max_side, quality=quality, image_root=image_root, **run)
    classes = str(storage.join(dest, "classes.txt"))
    return summary, f"recipes.vision.ImageShards({str(dest)!r}, classes={classes!r})"
