"""The domain as the command line runs it: ``recipes demo multimodal`` (COCO-style captions on the
bundled fixture images) and the manifest ``recipes bench/show multimodal PATH`` open.

    from recipes.multimodal.demo import build
    dataset, loader = build(fixtures_dir())
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from torch.utils.data import DataLoader
from torchvision.transforms import v2

from recipes.core import parquet
from recipes.multimodal.pairs import ImageTextDataset, multimodal_loader


def build(fixtures: Path) -> tuple[ImageTextDataset, DataLoader]:
    """An ImageTextDataset over ``multimodal/captions.json`` (a random caption per image each
    epoch, 64x64 crops) and a seeded CPU loader of batches of 4."""
    transform = v2.Compose([v2.RandomResizedCrop(64, scale=(0.5, 1.0), antialias=True), v2.RandomHorizontalFlip()])
    dataset = ImageTextDataset(
        fixtures / "multimodal" / "captions.json", fixtures / "text" / "tokenizer.json", transform=transform
    )
    return dataset, multimodal_loader(dataset, 4, device="cpu", seed=0, num_workers=0)


def open_path(options: Any, *, train: bool) -> ImageTextDataset:
    """The caption manifest or Parquet file at ``options.path`` (the CLI's ``DataOptions``): random
    crops, flips and a random caption if ``train``, else a resize, centre crop and the first caption."""
    size = options.size
    if train:
        transform = v2.Compose([v2.RandomResizedCrop(size, scale=(0.5, 1.0), antialias=True), v2.RandomHorizontalFlip()])
    else:
        transform = v2.Compose([v2.Resize(size, antialias=True), v2.CenterCrop(size)])
    max_length = 77 if options.max_length is None else options.max_length
    common = {"image_root": options.image_root, "transform": transform, "max_length": max_length,
              "captions": "random" if train else "first", "on_error": options.on_error}
    if not parquet.is_parquet(options.path):  # a JSONL, CSV or COCO manifest names its own fields
        return ImageTextDataset(options.path, options.tokenizer_path(), **common)
    columns = {"image_field": options.image_field, "caption_field": options.caption_field}
    return ImageTextDataset.from_parquet(options.path, options.tokenizer_path(), **columns, **common)


def prepare_path(source: Path, dest: Path, *, max_side: int = 0, quality: int = 90, image_root: Path | None = None,
                 **run: Any) -> tuple[Any, str]:
    """``recipes prepare multimodal MANIFEST DEST``: :func:`recipes.multimodal.prepare`, and how to read what it wrote."""
    from recipes.multimodal.prepare_shards import prepare

    summary = prepare(source, dest, max_side=max_side, quality=quality, image_root=image_root, **run)
    return summary, f"recipes.multimodal.ImageTextShards({str(dest)!r}, tokenizer)"
