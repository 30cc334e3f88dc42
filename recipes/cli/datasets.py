"""Turn a command line's description of a dataset into the domain's dataset and loader.

    dataset = open_dataset(DataOptions("vision", Path("data/train"), size=224), train=True)
    loader = make_loader("vision", dataset, batch_size=64, train=True, device="cpu", seed=0)

What PATH is, per domain (the same files the recipes read):

- vision: an image folder, ``PATH/<class>/**/<image>``.
- text: a ``.txt`` (a line a sample), ``.jsonl``, ``.csv`` or ``.parquet`` file; needs a tokenizer.
- detection: a COCO instances ``.json``; images under ``--image-root``, by default the
  ``images/`` folder next to the file if there is one, else the file's own folder.
- multimodal: a caption manifest (``.jsonl``, ``.csv``, ``.tsv`` or COCO captions ``.json``) or
  Parquet (``--image-field``, ``--caption-field``); images under ``--image-root``, by default the
  manifest's folder, or held in the Parquet file; needs a tokenizer.

The tokenizer defaults to a ``tokenizer.json`` next to PATH, if there is one.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch.utils.data import DataLoader, Dataset

DOMAINS = ("vision", "text", "detection", "multimodal")


@dataclass
class DataOptions:
    """Where a dataset is and how to read it, as the command line gives it."""

    domain: str
    path: Path
    tokenizer: Path | None = None
    image_root: Path | None = None
    size: int = 224
    max_length: int | None = None
    text_field: str = "text"
    label_field: str | None = None
    image_field: str = "image"  # Parquet columns (multimodal)
    caption_field: str = "caption"
    on_error: str = "raise"  # bench and show: stop at a bad sample, or drop it with a warning

    def __post_init__(self) -> None:
        if self.domain not in DOMAINS:
            raise ValueError(f"domain must be one of {DOMAINS}, got {self.domain!r}")
        self.path = Path(self.path).expanduser()

    def missing(self) -> str | None:
        """What does not exist of PATH, ``--image-root`` and ``--tokenizer``, in one line; None if all do."""
        if not self.path.exists():
            return f"{self.path} does not exist"
        root = self.image_root
        if root is not None and self.domain in ("detection", "multimodal") and not Path(root).expanduser().is_dir():
            state = "is not a folder" if Path(root).expanduser().exists() else "does not exist"
            return f"image root {root} {state}; pass --image-root DIR, the folder the image names are relative to"
        if self.tokenizer is not None and self.domain in ("text", "multimodal") and not Path(self.tokenizer).expanduser().is_file():
            return f"tokenizer file {self.tokenizer} does not exist (expected a tokenizer.json)"
        return None

    def tokenizer_path(self) -> Path:
        """``--tokenizer``, else ``tokenizer.json`` next to PATH; a clear error if neither."""
        if self.tokenizer is not None:
            return Path(self.tokenizer).expanduser()
        beside = (self.path if self.path.is_dir() else self.path.parent) / "tokenizer.json"
        if beside.is_file():
            return beside
        raise ValueError(f"{self.domain} needs a tokenizer: pass --tokenizer PATH/tokenizer.json (none next to {self.path})")

    def coco_image_root(self) -> Path:
        """``--image-root``, else ``images/`` next to the annotation file, else its folder."""
        if self.image_root is not None:
            return Path(self.image_root).expanduser()
        beside = self.path.parent / "images"
        return beside if beside.is_dir() else self.path.parent


def open_dataset(options: DataOptions, *, train: bool, include_crowd: bool = False) -> Dataset:
    """The domain's dataset over ``options.path``: training augmentation if ``train``, else none;
    ``include_crowd`` keeps COCO's crowd regions in the targets (detection).

    Without ``train`` the images only get their deterministic resize (classification and
    captions, to batch them) or nothing at all (detection), so what you see is what the file holds.
    """
    from torchvision.transforms import v2

    size = options.size
    if options.domain == "vision":
        from recipes.vision import ImageFolderDataset, eval_transform, train_transform

        transform = train_transform(size) if train else eval_transform(size, resize_size=round(size * 256 / 224))
        return ImageFolderDataset(options.path, transform, on_error=options.on_error)
    if options.domain == "text":
        from recipes.text import TokenizedTextDataset

        return TokenizedTextDataset(
            options.path, options.tokenizer_path(), text_field=options.text_field,
            label_field=options.label_field, max_length=options.max_length, on_error=options.on_error,
        )
    if options.domain == "detection":
        from recipes.detection import CocoDataset

        transforms = v2.RandomHorizontalFlip() if train else None
        return CocoDataset(options.coco_image_root(), options.path, transforms=transforms, include_crowd=include_crowd,
                           on_error=options.on_error)
    from recipes.multimodal import ImageTextDataset

    if train:
        transform = v2.Compose([v2.RandomResizedCrop(size, scale=(0.5, 1.0), antialias=True), v2.RandomHorizontalFlip()])
    else:
        transform = v2.Compose([v2.Resize(size, antialias=True), v2.CenterCrop(size)])
    return ImageTextDataset(
        options.path, options.tokenizer_path(), image_root=options.image_root, transform=transform,
        max_length=77 if options.max_length is None else options.max_length,
        captions="random" if train else "first", image_field=options.image_field, caption_field=options.caption_field,
        on_error=options.on_error,
    )


def loader_function(domain: str) -> Any:
    """The recipe's own ``<domain>_loader`` preset."""
    from recipes.detection import detection_loader
    from recipes.multimodal import multimodal_loader
    from recipes.text import text_loader
    from recipes.vision import vision_loader

    return {"vision": vision_loader, "text": text_loader, "detection": detection_loader, "multimodal": multimodal_loader}[domain]


def make_loader(
    domain: str, dataset: Dataset, batch_size: int, *, train: bool, device: str | torch.device, seed: int = 0, **overrides: Any
) -> DataLoader:
    """``<domain>_loader(dataset, batch_size, train=..., device=..., seed=..., **overrides)``."""
    return loader_function(domain)(dataset, batch_size, train=train, device=device, seed=seed, **overrides)


def quiet_tokenizers_in_workers() -> None:
    """Forked workers of a process that already tokenised print a warning each; it is harmless
    here (workers never tokenise), so say so once through the variable the library reads."""
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
