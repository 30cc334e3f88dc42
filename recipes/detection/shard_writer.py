"""Write a COCO instances file and its images as WebDataset tar shards, for :class:`CocoShards`.

    write_shards("coco/train2017", "coco/annotations/instances_train2017.json", "shards/", samples_per_shard=1000)

Each image's original bytes go in unchanged, keyed by its image id (``000000000042.jpg``), beside
``000000000042.json``: ``{"image_id", "width", "height", "annotations"}``, the image's annotations
as the file holds them. ``categories.json`` (the file's ``{"categories": [...]}``) goes beside the
shards, for ``CocoShards(..., categories="shards/categories.json")``. Images are written in id
order, those without annotations too (as ``CocoDataset`` keeps them); the file is checked as
``CocoDataset`` checks it, and an image that does not read is named, or skipped with
``on_error="skip"``. Equal shards (all but the last), each written under a temporary name and
renamed, and byte-identical for the same input, as :func:`recipes.vision.write_shards` writes them.
"""

from __future__ import annotations

import json
import os
import tarfile
from pathlib import Path
from typing import Any

from recipes.core import DataError, imaging, skip_or_raise, storage, streams
from recipes.detection.coco import CocoDataset

def write_shards(
    image_root: str | os.PathLike,
    ann_file: str | os.PathLike,
    dest: str | os.PathLike,
    samples_per_shard: int = 1000,
    *,
    prefix: str = "shard",
    on_error: str = "raise",
) -> list[Path]:
    """Write the images of ``ann_file`` (under ``image_root``) and their annotations as
    ``dest/<prefix>-000000.tar``, ... and ``dest/categories.json``; returns the shard paths, in order."""
    if samples_per_shard < 1:
        raise ValueError(f"samples_per_shard must be >= 1, got {samples_per_shard}")
    doc, samples = coco_samples(image_root, ann_file, on_error)
    out = Path(dest)
    out.mkdir(parents=True, exist_ok=True)
    (out / "categories.json").write_text(json.dumps({"categories": doc["categories"]}, sort_keys=True) + "\n")
    paths = []
    for first in range(0, len(samples), samples_per_shard):
        path = out / f"{prefix}-{len(paths):06d}.tar"
        partial = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        with tarfile.open(partial, "w", format=tarfile.PAX_FORMAT) as tar:
            for image_id, image, listed in samples[first : first + samples_per_shard]:
                where = f"{storage.shown(ann_file)} image id {image_id} ({image['file_name']})"
                try:
                    data = storage.resolve_under(image_root, image["file_name"], source=where).read_bytes()
                    kind = imaging.open_image(data, source=where).format
                except DataError as error:
                    skip_or_raise(error, on_error)
                    continue
                except OSError as error:
                    skip_or_raise(DataError(f"{where}: cannot read it ({error})"), on_error)
                    continue
                target = {"image_id": image_id, "width": image["width"], "height": image["height"],
                          "annotations": listed}
                extension = imaging.EXTENSION_OF_FORMAT.get(kind, Path(image["file_name"]).suffix.lower().lstrip("."))
                streams.add_member(tar, f"{image_id:012d}.{extension}", data)
                streams.add_member(tar, f"{image_id:012d}.json", json.dumps(target, sort_keys=True).encode())
        os.replace(partial, path)
        paths.append(path)
    return paths


def coco_samples(image_root: str | os.PathLike, ann_file: str | os.PathLike,
                 on_error: str) -> tuple[dict[str, Any], list[tuple[int, dict[str, Any], list[dict[str, Any]]]]]:
    """``(the file, [(image id, its image entry, its annotations as the file holds them)])``, the
    images in id order as ``CocoDataset`` checks and keeps them (those without annotations too)."""
    checked = CocoDataset(image_root, ann_file, on_error=on_error)  # the file as the dataset reads it
    doc = json.loads(storage.read_bytes(ann_file))
    by_image: dict[int, list] = {}
    for annotation in doc.get("annotations", []):
        by_image.setdefault(annotation["image_id"], []).append(annotation)
    images = {image["id"]: image for image in doc["images"]}
    return doc, [(image_id, images[image_id], by_image.get(image_id, [])) for image_id in checked.image_ids.tolist()]
