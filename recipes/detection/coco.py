"""COCO instances as a map-style Dataset: a flat numpy index, tv_tensors targets, checked at load.

    from torchvision.transforms import v2
    from recipes.detection import CocoDataset, detection_loader

    dataset = CocoDataset("coco/train2017", "coco/annotations/instances_train2017.json",
                          transforms=v2.RandomHorizontalFlip())
    image, target = dataset[0]        # tv_tensors.Image uint8 [3,H,W], dict (schema below)
    loader = detection_loader(dataset, batch_size=8, device="cuda", seed=0)

Item = ``(image, target)``: ``image`` is ``tv_tensors.Image`` uint8 [3,H,W] (EXIF applied);
``target`` = ``{"image_id": int, "boxes": BoundingBoxes XYXY float32 [N,4] (canvas_size=(H,W)),
"labels": int64 [N] (COCO category ids, or 1..K with contiguous_labels=True), "area": float32
[N], "iscrowd": int64 [N], "masks": tv_tensors.Mask uint8 [N,H,W] (masks=True only)}``. An image
without boxes has the same keys (boxes [0,4], labels [0]); torchvision's wrapper returns only
``image_id`` for it (vision issue 9162). Crowd regions are left out unless ``include_crowd=True``.
The image keeps the decoder's memory layout (a [3,H,W] view of [H,W,3] memory, which v2
transforms and torchvision detectors take as is); ``.contiguous()`` gives NCHW-ordered memory.

What differs from ``torchvision.datasets.CocoDetection`` (which gives the same boxes and labels):

- Index: the JSON is decoded once (:func:`recipes.core.coco_files.read_instances`: msgspec
  against a schema naming only the fields used, so polygons are skipped unless ``masks=True``)
  into a few flat numpy arrays, not a pycocotools ``COCO`` object of per-annotation dicts whose
  reference counts copy them into every worker (pytorch issue 13246). See benchmarks/detection.py.
- Checked at load, each problem named with its image or annotation id: duplicate ids, unknown
  ``category_id``, annotations for missing images, ``file_name`` escaping ``image_root``, boxes
  with a non-positive or non-finite width or height (dropped with one warning, or raised with
  ``strict=True``).
- Sizes: the decoded image must match the file's ``width``/``height``, else boxes would be
  misplaced. COCO sizes describe the pixels as loaded; torchvision's CocoDetection ignores EXIF
  orientation (``PIL.Image.open().convert``), pycocotools never opens images, detectron2 applies
  EXIF and raises ``SizeMismatchError``, as we do. A photo stored sideways whose annotations were
  drawn on the stored pixels is reported as such (rotate the file or strip its EXIF tag). An
  EXIF 180-degree turn keeps the size and cannot be caught this way.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image
from torch.utils.data import Dataset
from torchvision import tv_tensors

from recipes.core.arrays import StringArray
from recipes.core.coco_files import read_instances
from recipes.core.errors import DataError, check_on_error, skip_or_raise
from recipes.core.images import image_size, read_image
from recipes.core.paths import check_relative, resolve_under


class DegenerateBoxWarning(UserWarning):
    """Annotations whose box has a non-positive or non-finite width or height were dropped."""


def _first_duplicate(ids: np.ndarray) -> int | None:
    ordered = np.sort(ids)
    repeated = ordered[1:][ordered[1:] == ordered[:-1]]
    return int(repeated[0]) if len(repeated) else None


def _lookup(sorted_ids: np.ndarray, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Positions of ``ids`` in ``sorted_ids`` and whether each was found."""
    position = np.minimum(np.searchsorted(sorted_ids, ids), max(len(sorted_ids) - 1, 0))
    found = sorted_ids[position] == ids if len(sorted_ids) else np.zeros(len(ids), bool)
    return position, found


def _may_escape(name: Any) -> bool:
    """Cheap screen: names without these characters pass check_relative, so skip the full check."""
    return not isinstance(name, str) or not name or "\x00" in name or ".." in name or ":" in name or name[0] in "/\\"


def _to_rle(segmentation: Any, height: int, width: int) -> dict | None:
    """COCO polygons or RLE -> one RLE, as pycocotools' ``COCO.annToRLE``; None if neither."""
    from pycocotools import mask as coco_mask

    if isinstance(segmentation, list) and segmentation:
        return coco_mask.merge(coco_mask.frPyObjects(segmentation, height, width))
    if isinstance(segmentation, dict) and list(segmentation.get("size", ())) == [height, width]:
        if isinstance(segmentation["counts"], str):  # already compressed
            return segmentation
        return coco_mask.frPyObjects(segmentation, height, width)
    return None


class CocoDataset(Dataset):
    """COCO detection dataset over a flat numpy index; see the module docstring for the item.

    Args:
        image_root: folder the images' ``file_name`` entries are relative to.
        ann_file: COCO instances JSON (``images``, ``annotations``, ``categories``).
        transforms: a ``torchvision.transforms.v2`` callable on ``(image, target)``; flips and
            crops then move the boxes (and masks) with the pixels.
        masks: add ``masks`` decoded with pycocotools from polygons or RLE.
        include_crowd: keep ``iscrowd=1`` regions in the targets (they are always kept for
            :func:`evaluate`, where COCOeval treats them as ignore regions).
        remove_empty: drop images without any box left in their target (after crowd filtering).
        on_error: ``"raise"`` or ``"skip"`` an unreadable image, a size mismatch, a
            ``file_name`` escaping ``image_root``, an annotation of an image not in ``images``
            (the annotation is left out) or of an unknown category (its image is left out);
            duplicate ids and a malformed file always raise.
        strict: raise on boxes with a non-positive or non-finite width or height instead of
            dropping them with one :class:`DegenerateBoxWarning`.
        contiguous_labels: ``labels`` are 1..K (category ids in sorted order, 0 = background)
            instead of COCO ids, for models built with ``num_classes=K + 1``.
    """

    def __init__(
        self,
        image_root: str | os.PathLike,
        ann_file: str | os.PathLike,
        transforms: Callable[[Any, Any], tuple[Any, Any]] | None = None,
        *,
        masks: bool = False,
        include_crowd: bool = False,
        remove_empty: bool = False,
        on_error: str = "raise",
        strict: bool = False,
        contiguous_labels: bool = False,
    ) -> None:
        self.image_root, self.ann_file = Path(image_root), Path(ann_file)
        if not self.image_root.is_dir():
            raise FileNotFoundError(f"image_root {self.image_root} is not a directory")
        self._real_root = os.path.realpath(self.image_root) + os.sep
        self.transforms, self.masks, self.include_crowd = transforms, masks, include_crowd
        self.on_error, self.contiguous_labels = check_on_error(on_error), contiguous_labels
        columns = read_instances(self.ann_file, masks=masks)
        self._index_categories(columns)
        keep_images = self._check_images(columns)
        self._index_annotations(columns, keep_images, strict=strict, remove_empty=remove_empty)

    # -- index ---------------------------------------------------------------------------------

    def _index_categories(self, c: dict[str, Any]) -> None:
        duplicate = _first_duplicate(c["category_ids"])
        if duplicate is not None:
            raise DataError(f"{self.ann_file}: category id {duplicate} appears more than once in 'categories'")
        order = np.argsort(c["category_ids"])
        self._category_ids = c["category_ids"][order]
        #: COCO category id -> name, in id order; labels 1..K follow this order.
        self.categories = {int(c["category_ids"][i]): c["category_names"][i] for i in order}
        self.category_to_label = {cid: k + 1 for k, cid in enumerate(self.categories)}
        self.label_to_category = {k: cid for cid, k in self.category_to_label.items()}

    def _check_images(self, c: dict[str, Any]) -> np.ndarray:
        ids, widths, heights = c["image_ids"], c["widths"], c["heights"]
        duplicate = _first_duplicate(ids)
        if duplicate is not None:
            raise DataError(f"{self.ann_file}: image id {duplicate} appears more than once in 'images'")
        valid = (widths >= 1) & (heights >= 1) & (widths % 1 == 0) & (heights % 1 == 0)
        if not valid.all():
            k = int(np.flatnonzero(~valid)[0])
            raise DataError(
                f"{self.ann_file}: image {ids[k]} has width {widths[k]} and height {heights[k]}; "
                "both must be positive whole numbers"
            )
        keep = np.ones(len(ids), bool)
        for k, name in enumerate(c["file_names"]):
            if _may_escape(name):
                try:
                    check_relative(name, source=f"{self.ann_file}, image {ids[k]}")
                except DataError as error:
                    skip_or_raise(error, self.on_error)  # "skip": warn, and the image is left out
                    keep[k] = False
        return keep

    def _index_annotations(
        self, c: dict[str, Any], keep_images: np.ndarray, *, strict: bool, remove_empty: bool
    ) -> None:
        src, ids = self.ann_file, c["ann_ids"]
        duplicate = _first_duplicate(ids)
        if duplicate is not None:
            raise DataError(f"{src}: annotation id {duplicate} appears more than once in 'annotations'")
        order = np.argsort(c["image_ids"], kind="stable")
        image_ids = c["image_ids"][order]
        row, found = _lookup(image_ids, c["ann_image_ids"])
        for k in np.flatnonzero(~found):  # "skip": the annotation is left out, with a warning each
            skip_or_raise(DataError(
                f"{src}: annotation {ids[k]} refers to image {c['ann_image_ids'][k]}, which is not in "
                f"'images' ({int((~found).sum())} annotation(s) do)"
            ), self.on_error)
        _, known = _lookup(self._category_ids, c["ann_category_ids"])
        unknown = found & ~known
        for k in np.flatnonzero(unknown):  # "skip": its image is left out (a box would be missing)
            skip_or_raise(DataError(
                f"{src}: annotation {ids[k]} has category_id {c['ann_category_ids'][k]}, which is not in "
                f"'categories' {self._category_ids.tolist()} ({int(unknown.sum())} annotation(s) do); "
                f"image {c['ann_image_ids'][k]} cannot be used"
            ), self.on_error)
        # XYWH -> XYXY in float32, as torchvision's wrapper does it: the same boxes to the bit.
        boxes = c["bbox"].astype(np.float32)
        boxes[:, 2:] += boxes[:, :2]
        good = np.isfinite(boxes).all(1) & (boxes[:, 2] > boxes[:, 0]) & (boxes[:, 3] > boxes[:, 1])
        good &= found  # from here on, "good" also means "has an image"
        if not good[found].all():
            bad = np.flatnonzero(~good & found)
            listed = ", ".join(str(i) for i in ids[bad[:10]]) + (", ..." if len(bad) > 10 else "")
            what = (
                f"{len(bad)} annotation(s) whose bbox has a non-positive or non-finite width or height (ids {listed})"
            )
            if strict:
                raise DataError(
                    f"{src}: annotation {ids[bad[0]]} has bbox {c['bbox'][bad[0]].tolist()}; {what}; "
                    "fix them, or pass strict=False to drop them with a warning"
                )
            warnings.warn(f"{src}: dropped {what}", DegenerateBoxWarning, stacklevel=3)
        keep_images = keep_images[order]
        keep_images[row[unknown]] = False
        shown = ~c["iscrowd"] | self.include_crowd
        if remove_empty:
            keep_images &= np.bincount(row[good & shown], minlength=len(order)) > 0
        new_row = np.cumsum(keep_images) - 1
        keep = good.copy()
        keep[good] = keep_images[row[good]]  # (row is meaningless where no image was found)
        ann = np.flatnonzero(keep)[np.argsort(row[keep], kind="stable")]  # by image, then file order
        row = new_row[row[ann]]

        kept = np.flatnonzero(keep_images)
        self.image_ids = image_ids[kept]
        self.widths = c["widths"][order][kept].astype(np.int64)
        self.heights = c["heights"][order][kept].astype(np.int64)
        self.file_names = StringArray(c["file_names"][i] for i in order[kept])
        counts = np.bincount(row, minlength=len(kept))
        #: annotations of image i (crowd included) are rows ann_offsets[i]:ann_offsets[i+1]
        self.ann_offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        self.ann_ids = ids[ann]
        self.boxes = boxes[ann]
        self.category_ids = c["ann_category_ids"][ann]
        self._labels = np.searchsorted(self._category_ids, self.category_ids).astype(np.int64) + 1
        area = c["area"][ann].astype(np.float32)
        box_area = c["bbox"][ann, 2] * c["bbox"][ann, 3]
        self.areas = np.where(np.isnan(area), box_area, area).astype(np.float32)
        self.iscrowd = c["iscrowd"][ann].astype(np.int64)
        visible = shown[ann]
        self._item_rows = np.flatnonzero(visible)
        self._item_offsets = np.concatenate([[0], np.cumsum(np.bincount(row[visible], minlength=len(kept)))])
        if self.masks:
            segments = [c["segments"][i] for i in ann]
            self._segment_offsets = np.concatenate([[0], np.cumsum([len(s) for s in segments])]).astype(np.int64)
            self._segments = np.frombuffer(b"".join(segments), dtype=np.uint8).copy()

    # -- items ---------------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self.image_ids)

    @property
    def aspect_ratios(self) -> np.ndarray:
        """Width / height of every image, from the annotation file (no image is opened)."""
        return self.widths / self.heights

    def __getitem__(self, index: int) -> tuple[tv_tensors.Image, dict[str, Any]] | None:
        index = index + len(self) if index < 0 else index
        height, width = int(self.heights[index]), int(self.widths[index])  # IndexError past the end
        source = f"{self.ann_file}, image {self.image_ids[index]}"
        try:
            path = self._path(self.file_names[index], source)
            try:
                image = read_image(path, contiguous=False)  # the decoder's layout: no copy (~18 us)
            except DataError as error:  # it names the file; add which image of the annotations
                raise DataError(f"{source}: {error}") from None
            if tuple(image.shape[-2:]) != (height, width):
                raise DataError(self._size_mismatch(path, index, image.shape[-1], image.shape[-2]))
            target = self._target(index, height, width, source)
        except DataError as error:
            return skip_or_raise(error, self.on_error)
        image = image.as_subclass(tv_tensors.Image)  # what Image(image) does, minus its checks
        if self.transforms is not None:
            image, target = self.transforms(image, target)
        return image, target

    def _path(self, name: str, source: str) -> str:
        # The root was resolved once; a one-component name that is not a symlink stays inside it
        # (COCO's flat folders: one lstat). Otherwise follow links with os.path.realpath, a
        # fifth of pathlib's resolve(); what lands outside gets resolve_under's verdict.
        path = self._real_root + name
        if "/" not in name and os.sep not in name and not os.path.islink(path):
            return path
        path = os.path.realpath(path)
        return path if path.startswith(self._real_root) else resolve_under(self.image_root, name, source=source)

    def _target(self, index: int, height: int, width: int, source: str) -> dict[str, Any]:
        rows = self._item_rows[self._item_offsets[index] : self._item_offsets[index + 1]]
        labels = self._labels if self.contiguous_labels else self.category_ids
        target = {
            "image_id": int(self.image_ids[index]),
            "boxes": tv_tensors.BoundingBoxes(
                torch.from_numpy(self.boxes[rows]), format="XYXY", canvas_size=(height, width)
            ),
            "labels": torch.from_numpy(labels[rows]),
            "area": torch.from_numpy(self.areas[rows]),
            "iscrowd": torch.from_numpy(self.iscrowd[rows]),
        }
        if self.masks:
            target["masks"] = tv_tensors.Mask(self._decode_masks(rows, height, width, source))
        return target

    def _decode_masks(self, rows: np.ndarray, height: int, width: int, source: str) -> torch.Tensor:
        from pycocotools import mask as coco_mask

        if len(rows) == 0:
            return torch.zeros((0, height, width), dtype=torch.uint8)
        rles = []
        for row in rows.tolist():
            raw = self._segments[self._segment_offsets[row] : self._segment_offsets[row + 1]].tobytes()
            where = f"{source}, annotation {self.ann_ids[row]}"
            try:
                rle = _to_rle(json.loads(raw), height, width)
            except (TypeError, ValueError, KeyError, IndexError) as error:
                raise DataError(f"{where}: cannot decode segmentation {raw[:60]!r} ({error})") from None
            if rle is None:
                raise DataError(
                    f"{where}: segmentation must be polygons or an RLE of size [{height}, {width}], got {raw[:60]!r}"
                )
            rles.append(rle)
        with warnings.catch_warnings():
            # pycocotools 2.0.x on numpy 2 warns about its own __array__; nothing a user can fix
            warnings.simplefilter("ignore", DeprecationWarning)
            masks = coco_mask.decode(rles)
        return torch.from_numpy(masks).permute(2, 0, 1).contiguous()

    def _size_mismatch(self, path: str | Path, index: int, got_width: int, got_height: int) -> str:
        width, height = int(self.widths[index]), int(self.heights[index])
        message = (
            f"{path}: decoded image is {got_width}x{got_height} (WxH) but {self.ann_file} gives image "
            f"{self.image_ids[index]} as {width}x{height}; its boxes would be misplaced"
        )
        try:
            with Image.open(path) as stored:
                stored_size = stored.size
            upright_size = image_size(path)
        except (OSError, DataError):
            return message
        if stored_size == (width, height) and upright_size != stored_size:
            message += (
                ". The file is stored sideways with an EXIF orientation tag, and the annotations were drawn "
                "on the stored pixels: rotate the image upright and its annotations with it, or strip the tag"
            )
        return message

    # -- evaluation ----------------------------------------------------------------------------

    def ground_truth(self) -> dict[str, list[dict[str, Any]]]:
        """This dataset's images and boxes (crowd included) as a COCO dict, for :func:`evaluate`."""
        xywh = self.boxes.astype(np.float64)
        xywh[:, 2:] -= xywh[:, :2]
        image_ids = np.repeat(self.image_ids, np.diff(self.ann_offsets)).tolist()
        fields = zip(
            self.ann_ids.tolist(),
            image_ids,
            self.category_ids.tolist(),
            xywh.tolist(),
            self.areas.tolist(),
            self.iscrowd.tolist(),
        )
        return {
            "images": [
                {"id": i, "width": w, "height": h, "file_name": n}
                for i, w, h, n in zip(
                    self.image_ids.tolist(), self.widths.tolist(), self.heights.tolist(), self.file_names
                )
            ],
            "annotations": [
                {"id": a, "image_id": i, "category_id": c, "bbox": b, "area": s, "iscrowd": k}
                for a, i, c, b, s, k in fields
            ],
            "categories": [{"id": i, "name": n} for i, n in self.categories.items()],
        }
