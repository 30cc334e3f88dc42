"""Image classification: a fast ``ImageFolder``, uint8 collate, v2 presets and the loader preset.

    from recipes.vision import ImageFolderDataset, train_transform, vision_loader
    from recipes.core import DevicePrefetcher

    dataset = ImageFolderDataset("imagenet/train", train_transform(224))
    loader = vision_loader(dataset, batch_size=256, device="cuda", seed=0)
    for images, labels in DevicePrefetcher(loader, "cuda"):   # float32, normalised on the GPU
        ...

``folder.py`` (dataset, collate, loader), ``shards.py`` (:class:`ImageShards`, the same items from
WebDataset tar shards, local or in object storage), ``shard_writer.py`` (:func:`write_shards`, a
folder or a manifest as shards), ``prepare_shards.py`` (:func:`prepare`, a training-ready copy at a bounded
size, in those shards) and ``transforms.py`` import only ``recipes.core``,
so the folder can be copied into a project that has ``recipes`` installed.
"""

import importlib
from typing import TYPE_CHECKING

from recipes.vision.folder import ImageFolderDataset, image_collate, vision_loader
from recipes.vision.transforms import (
    IMAGENET_MEAN,
    IMAGENET_STD,
    RandomHorizontalFlip,
    RandomResizedCrop,
    eval_transform,
    train_transform,
)

SHARD_NAMES = {"ImageShards": "recipes.vision.shards", "write_shards": "recipes.vision.shard_writer",
               "prepare": "recipes.vision.prepare_shards"}
if TYPE_CHECKING:  # loaded on first use, by __getattr__ below
    from recipes.vision.prepare_shards import prepare
    from recipes.vision.shard_writer import write_shards
    from recipes.vision.shards import ImageShards

__all__ = [
    "IMAGENET_MEAN",
    "IMAGENET_STD",
    "ImageFolderDataset",
    "ImageShards",
    "RandomHorizontalFlip",
    "RandomResizedCrop",
    "eval_transform",
    "image_collate",
    "prepare",
    "train_transform",
    "vision_loader",
    "write_shards",
]


def __getattr__(name: str) -> object:
    # the shard names on first use: a program that reads folders does not load the shard stream machinery
    if name in SHARD_NAMES:
        return getattr(importlib.import_module(SHARD_NAMES[name]), name)
    raise AttributeError(f"module 'recipes.vision' has no attribute {name!r}")
