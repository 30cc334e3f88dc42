"""A training-ready copy of a COCO dataset: each image re-encoded once at a bounded size, its
annotations scaled with it, in the shards :class:`CocoShards` reads.

    summary = prepare("coco/train2017", "coco/annotations/instances_train2017.json", "prepared/", max_side=640)
    shards = CocoShards("prepared/", categories="prepared/categories.json", contiguous_labels=True)

The file is checked and its images listed as :func:`write_shards` does (``CocoDataset``'s rules,
id order, images without annotations too). An image whose longer side is over ``max_side`` is
re-encoded as :func:`recipes.core.imaging.resized_jpeg` writes it, and its annotations are scaled
by the image's new width and height over the old: boxes and polygons point by point, areas by
both, RLE masks decoded, resized nearest-neighbour and encoded again. Its ``.json`` holds the new
``width`` and ``height``. The shards are written as every domain's ``prepare`` writes them
(:func:`recipes.core.streams.write_prepared`): byte-identical for any ``workers``, resumed by
running the same call again after a stop, ``manifest.json`` beside them.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torchvision.transforms.v2 import InterpolationMode
from torchvision.transforms.v2 import functional as F

from recipes.core import imaging, storage, streams
from recipes.detection.coco_files import decode_masks
from recipes.detection.shard_writer import coco_samples

__all__ = ["encode_sample", "prepare", "scaled_annotation"]


def prepare(
    image_root: str | os.PathLike,
    ann_file: str | os.PathLike,
    dest: str | os.PathLike,
    *,
    max_side: int = 0,
    quality: int = 90,
    samples_per_shard: int = 1000,
    workers: int | None = None,
    on_error: str = "raise",
    overwrite: bool = False,
    progress: bool = True,
    storage_options: dict[str, Any] | None = None,
) -> streams.PrepareSummary:
    """Write the images of ``ann_file`` (under ``image_root``) at most ``max_side`` on their longer
    side, with their annotations scaled alike, as shards in ``dest`` beside ``categories.json``.

    Args:
        image_root, ann_file: the images and their COCO instances file, as ``CocoDataset`` takes them.
        dest: the folder to write (made if missing).
        max_side: the longest side an image keeps; 0 keeps every file's bytes.
        quality: the JPEG quality of a re-encoded image (1-95).
        samples_per_shard, workers, on_error, overwrite, progress, storage_options: as
            :func:`recipes.vision.prepare` takes them (:class:`recipes.core.streams.PrepareRun`).
    """
    options = imaging.reencode_options(max_side, quality)
    for path in (image_root, ann_file):
        streams.local_folder(path, "prepare")
    rows = []
    with streams.collect_skips() as dropped:  # images and annotations the checks refuse: named in the summary
        doc, samples = coco_samples(image_root, ann_file, on_error)
        for image_id, image, listed in samples:
            where = f"{storage.shown(ann_file)} image id {image_id} ({image['file_name']})"
            file = os.path.join(os.fspath(image_root), image["file_name"])  # checked under the root by CocoDataset
            rows.append((f"{image_id:012d}", where, (file, image, listed)))
    rows += [(None, None, error) for error in dropped]
    beside = {"categories.json": (json.dumps({"categories": doc["categories"]}, sort_keys=True) + "\n").encode()}
    return streams.write_prepared(dest, rows, encode_sample, domain="detection",
                                  options=options, source=ann_file, beside=beside,
                                  run=streams.PrepareRun(samples_per_shard, workers, on_error, overwrite, progress,
                                                         storage_options=storage_options))


def encode_sample(payload: tuple[str, dict[str, Any], list[dict[str, Any]]], where: str,
                  options: dict[str, int]) -> tuple[list[tuple[str, bytes]], float | None, int]:
    """A row's members (its image, its ``.json`` target scaled with it), the re-encode's PSNR and bytes read."""
    file, image, annotations = payload
    data = Path(file).read_bytes()
    encoded, extension, quality, size = imaging.resized_jpeg(data, where, options["max_side"], options["quality"])
    width, height = image["width"], image["height"]
    if size is not None:
        annotations = [scaled_annotation(annotation, (height, width), size, where) for annotation in annotations]
        height, width = size
    target = {"image_id": image["id"], "width": width, "height": height, "annotations": annotations}
    return [(extension, encoded), ("json", json.dumps(target, sort_keys=True).encode())], quality, len(data)


def scaled_annotation(annotation: dict[str, Any], old: tuple[int, int], new: tuple[int, int],
                      where: str) -> dict[str, Any]:
    """``annotation`` of an image of ``old`` ``(height, width)`` on the image resized to ``new``."""
    sy, sx = new[0] / old[0], new[1] / old[1]
    scaled = dict(annotation)
    x, y, w, h = annotation["bbox"]
    scaled["bbox"] = [x * sx, y * sy, w * sx, h * sy]
    if isinstance(annotation.get("area"), (int, float)):
        scaled["area"] = annotation["area"] * sx * sy
    segmentation = annotation.get("segmentation")
    if isinstance(segmentation, list):  # polygons: x, y, x, y, ...
        scaled["segmentation"] = [[value * (sx if k % 2 == 0 else sy) for k, value in enumerate(polygon)]
                                  for polygon in segmentation]
    elif isinstance(segmentation, dict):  # an RLE of the old size
        from pycocotools import mask as coco_mask

        mask = decode_masks([json.dumps(segmentation).encode()], *old, source=where, ann_ids=[annotation.get("id")])
        resized = F.resize(torch.from_numpy(mask), list(new), interpolation=InterpolationMode.NEAREST)
        rle = coco_mask.encode(np.asfortranarray(resized[0].numpy()))
        scaled["segmentation"] = {"size": list(new), "counts": rle["counts"].decode("ascii")}
    return scaled
