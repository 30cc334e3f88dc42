"""COCO detection: CocoDataset (flat numpy index, tv_tensors targets), list and padded collate,
an aspect-ratio grouped loader, and COCO box evaluation.

    from recipes.detection import CocoDataset, detection_collate, detection_loader, evaluate

The folder owns what only detection uses: ``coco.py`` (the dataset), ``coco_files.py`` (reading
the file, decoding masks), ``coco_index.py`` (the checked index), ``loader.py`` (collate functions
and the loader), ``evaluate.py`` (COCOeval), ``shards.py`` (:class:`CocoShards`, the same items
from WebDataset tar shards), ``shard_writer.py`` (:func:`write_shards`, a COCO file as them) and
``prepare_shards.py`` (:func:`prepare`, a training-ready copy at a bounded size, boxes and masks scaled).
It imports only ``recipes.core``: images, paths, storage, errors, the sampler and its plans, shard
streams. ``python -m recipes copy detection DEST`` copies the folder into a project to edit.
"""

import importlib
from typing import TYPE_CHECKING

from recipes.detection.coco import CocoDataset, DegenerateBoxWarning
from recipes.detection.evaluate import STAT_NAMES, evaluate, to_coco_results
from recipes.detection.loader import (
    PaddedDetectionCollate,
    aspect_ratio_groups,
    detection_collate,
    detection_loader,
    padded_detection_collate,
)

SHARD_NAMES = {"CocoShards": "recipes.detection.shards", "write_shards": "recipes.detection.shard_writer",
               "prepare": "recipes.detection.prepare_shards"}
if TYPE_CHECKING:  # loaded on first use, by __getattr__ below
    from recipes.detection.prepare_shards import prepare
    from recipes.detection.shard_writer import write_shards
    from recipes.detection.shards import CocoShards

__all__ = [
    "STAT_NAMES",
    "CocoDataset",
    "CocoShards",
    "DegenerateBoxWarning",
    "PaddedDetectionCollate",
    "aspect_ratio_groups",
    "detection_collate",
    "detection_loader",
    "evaluate",
    "padded_detection_collate",
    "prepare",
    "to_coco_results",
    "write_shards",
]


def __getattr__(name: str) -> object:
    # the shard names on first use: a program that reads a COCO file does not load the shard stream machinery
    if name in SHARD_NAMES:
        return getattr(importlib.import_module(SHARD_NAMES[name]), name)
    raise AttributeError(f"module 'recipes.detection' has no attribute {name!r}")
