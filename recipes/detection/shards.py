"""COCO detection samples streamed from WebDataset tar shards: ``<key>.jpg`` beside ``<key>.json``.

    shards = CocoShards("s3://bucket/coco/train-{000000..000117}.tar", categories="instances_train2017.json",
                        contiguous_labels=True, order=StreamOrder(shuffle_buffer=1000, seed=0))
    loader = detection_loader(shards, batch_size=8, device="cuda", stateful=True)

A sample is an image (``.jpg``, ``.png``, ...; one a key) and ``<key>.json`` holding ``{"image_id",
"width", "height", "annotations": [COCO annotation dicts]}``. Each sample is read as a one-image
COCO file, by the same rules as :class:`CocoDataset` (:mod:`recipes.detection.coco_index`): its
items equal ``CocoDataset``'s for the same image, boxes, labels, areas, crowd regions left out,
masks from polygons or RLE, degenerate boxes dropped with a :class:`DegenerateBoxWarning`, a decoded
size that disagrees with the sample's refused. ``categories`` (a list of ids or of COCO category
dicts, or a JSON file with a ``"categories"`` list, an instances file for one) are the ids labels
may take; ``contiguous_labels`` needs them. Shards are read, shared out, shuffled, seeded per
sample and resumed as every shard stream of the library is (:class:`recipes.core.streams.ShardStream`).
"""

from __future__ import annotations

import functools
import json
import os
import zlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from torchvision import tv_tensors

from recipes.core import (
    DataError,
    ReadOptions,
    StreamOrder,
    UserCode,
    caches,
    check_on_error,
    checks,
    decode_image,
    ranks,
    sample_seed,
    seeded,
    skip_or_raise,
    storage,
    streams,
)
from recipes.detection.coco import coco_target
from recipes.detection.coco_checks import entry_problems
from recipes.detection.coco_files import columns_of, size_mismatch
from recipes.detection.coco_index import index_instances

IMAGE_MEMBERS = ("jpg", "jpeg", "png", "webp", "bmp", "gif", "tif", "tiff")  # a sample's image, as extensions
MAX_MEMBER_BYTES = 512 * 2**20  # a member is read whole: more than any image under the pixel limit needs
SHARDS_READ_OPTIONS = ("strict_annotations", "strict_decode", "cache_limit_bytes", "verify_cache", "verify_shards")


class CocoShards(streams.ShardStream):
    """Iterate ``(image tv_tensors.Image uint8 [3,H,W], target)``, the items of :class:`CocoDataset`.

    Args:
        paths: the shards: a list, a folder (its ``*.tar``), a ``{000..099}`` range or a glob,
            local or fsspec URLs.
        transforms: a ``torchvision.transforms.v2`` callable on ``(image, target)``, seeded per sample.
        masks: add ``masks`` decoded with pycocotools from polygons or RLE.
        contiguous_labels: ``labels`` are 1..K in the sorted order of ``categories``' ids.
        categories: the category ids labels may take (see the module docstring); None: any.
        order: a :class:`recipes.core.StreamOrder`: the shuffle buffer, its seed, rank and world size.
        on_error: ``"raise"`` a DataError naming the shard and sample, or ``"skip"`` the sample with a warning.
        storage_options: passed to fsspec for URL shards; never shown.
        cache_dir: keep remote shards here once read whole, so that later epochs read local disk.
        read_options: a :class:`recipes.core.ReadOptions`; this reads its ``strict_annotations``,
            ``strict_decode``, ``cache_limit_bytes``, ``verify_cache`` and ``verify_shards`` (a prepared folder's sha256s).
    """

    max_member_bytes = MAX_MEMBER_BYTES

    def __init__(
        self,
        paths: str | os.PathLike | Sequence[str | os.PathLike],
        *,
        transforms: Callable[[Any, Any], tuple[Any, Any]] | None = None,
        masks: bool = False,
        contiguous_labels: bool = False,
        categories: Sequence[int | dict[str, Any]] | str | os.PathLike | None = None,
        order: StreamOrder | None = None,
        on_error: str = "raise",
        storage_options: dict[str, Any] | None = None,
        cache_dir: str | os.PathLike | None = None,
        read_options: ReadOptions | None = None,
    ) -> None:
        order = streams.order_or_default(order, "CocoShards")
        options = checks.read_options_or_default(read_options, "CocoShards", SHARDS_READ_OPTIONS)
        self.categories = _categories(categories)
        if contiguous_labels and self.categories is None:
            raise ValueError("contiguous_labels=True numbers the categories 1..K: pass categories= (their ids, or "
                             "the instances file they come from)")
        ids = sorted(self.categories or ())
        self.category_to_label = {cid: k + 1 for k, cid in enumerate(ids)}
        self.label_to_category = {k: cid for cid, k in self.category_to_label.items()}
        self.transforms, self.masks, self.contiguous_labels = transforms, masks, contiguous_labels
        self.strict, self.strict_decode = options.strict_annotations, options.strict_decode
        # listed and indexed once per job: on rank 0, sent to the others; workers get them with the dataset
        listed = functools.partial(streams.listed_shards, paths, storage_options, max_member_bytes=MAX_MEMBER_BYTES,
                                   cache_dir=cache_dir, verify=options.verify_shards)
        self.shards, self.index = ranks.shared_result(listed, order.rank, order.world_size)
        self.storage_options, self.on_error = storage_options, check_on_error(on_error)
        self.shuffle_buffer = order.shuffle_buffer
        self.cache = None if cache_dir is None else caches.DiskCache(cache_dir, options.cache_limit_bytes,
                                                                     verify=options.verify_cache)
        names = zlib.crc32(chr(10).join(map(storage.basename, self.shards)).encode())  # what a state names as its data
        super().__init__(order.seed, order.rank, order.world_size, source=f"{len(self.shards)} shards {names:08x}")
        self.epochs = streams.ShardEpochs(self.index, order.shuffle_buffer, type(self).__name__)

    def batch_contract(self) -> dict[str, Any]:
        """What a mixed dataset must share with this one (recipes.core.loading.mixing)."""
        return {"collate": "detection_collate", "label_to_category": self.label_to_category}

    def _items(self, shard: str, key: str, files: dict[str, bytes], epoch: int) -> Iterator[tuple[Any, Any]]:
        where = f"{storage.shown(shard)}:{key}"
        try:
            image, target = self._read_sample(files, where, key)
        except DataError as error:
            skip_or_raise(error, self.on_error)
            return
        image = image.as_subclass(tv_tensors.Image)
        if self.transforms is not None:
            name = f"{storage.basename(shard)}/{key}"
            # a seed per sample: the augmentation does not depend on the worker
            with seeded(sample_seed(self.cursor.seed, epoch, zlib.crc32(name.encode()))), UserCode(f"shard {where}"):
                image, target = self.transforms(image, target)
        yield image, target

    def _read_sample(self, files: dict[str, bytes], where: str, key: str) -> tuple[Any, dict[str, Any]]:
        """A sample's decoded image and its target, read as a one-image COCO file; a DataError names ``where``."""
        found = [extension for extension in IMAGE_MEMBERS if extension in files]
        if len(found) != 1:
            raise DataError(f"{where}: " + (f"no image ({'/'.join(IMAGE_MEMBERS)}) among {sorted(files)}" if not found
                                            else f"two images under one key ({', '.join(found)})"))
        if "json" not in files:
            raise DataError(f"{where}: no target (json) among {sorted(files)}")
        doc = _one_image_file(files["json"], where, f"{key}.{found[0]}", self.categories)
        columns = columns_of(doc, masks=self.masks)
        if columns is None:
            problem = next(entry_problems(doc), None)
            raise problem.error(where) if problem else DataError(f"{where}: its .json is not a COCO target")
        index = index_instances(columns, where, on_error="raise", strict=self.strict)
        target = coco_target(index, 0, masks=self.masks, contiguous_labels=self.contiguous_labels, source=where)
        image = decode_image(files[found[0]], source=f"{where}.{found[0]}", contiguous=False, strict=self.strict_decode)
        width, height = int(index.widths[0]), int(index.heights[0])
        if tuple(image.shape[-2:]) != (height, width):
            raise DataError(size_mismatch(f"{where}.{found[0]}", f"{where}.json", target["image_id"], (width, height),
                                          (image.shape[-1], image.shape[-2])))
        return image, target


def _one_image_file(data: bytes, where: str, file_name: str, categories: dict[int, str] | None) -> dict[str, Any]:
    """A sample's ``.json`` (``{"image_id", "width", "height", "annotations"}``) as a COCO instances
    document of one image, its categories ``categories`` or those its annotations name."""
    try:
        sample = json.loads(data)
    except ValueError as error:
        raise DataError(f"{where}: its .json is not JSON ({type(error).__name__}: {error})") from None
    if not isinstance(sample, dict) or not isinstance(sample.get("annotations", []), list):
        raise DataError(f"{where}: its .json must be an object with 'image_id', 'width', 'height' and an "
                        f"'annotations' list, got {str(sample)[:80]!r}")
    missing = [name for name in ("image_id", "width", "height") if name not in sample]
    if missing:
        raise DataError(f"{where}: its .json has no {', '.join(map(repr, missing))} (keys: {sorted(sample)})")
    annotations = [dict(ann, image_id=sample["image_id"]) if isinstance(ann, dict) else ann
                   for ann in sample.get("annotations", [])]
    named = categories if categories is not None else {
        ann["category_id"]: str(ann["category_id"]) for ann in annotations
        if isinstance(ann, dict) and isinstance(ann.get("category_id"), int)}
    return {"images": [{"id": sample["image_id"], "width": sample["width"], "height": sample["height"],
                        "file_name": file_name}],
            "annotations": annotations, "categories": [{"id": cid, "name": name} for cid, name in named.items()]}


def _categories(categories: Sequence[int | dict[str, Any]] | str | os.PathLike | None) -> dict[int, str] | None:
    """``{id: name}`` of a list of ids or COCO category dicts, or of a JSON file's ``"categories"``."""
    if categories is None:
        return None
    if isinstance(categories, (str, os.PathLike)):
        listed = json.loads(storage.read_bytes(categories)).get("categories")
        if not isinstance(listed, list):
            raise ValueError(f"{storage.shown(categories)} holds no 'categories' list")
        categories = listed
    found = {}
    for entry in categories:
        cid = entry.get("id") if isinstance(entry, dict) else entry
        name = entry.get("name", str(cid)) if isinstance(entry, dict) else str(cid)
        if not isinstance(cid, int) or isinstance(cid, bool) or cid in found:
            raise ValueError(f"categories must be distinct integer ids (or COCO category dicts), got {entry!r}")
        found[cid] = name
    return found
