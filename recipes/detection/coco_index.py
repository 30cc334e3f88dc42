"""The checked, flat index of a COCO instances file: per-image and per-annotation numpy arrays.

    index = index_instances(read_instances(path, masks=False), path)
    rows = index.item_rows_of(3)                   # annotation rows the 4th image shows
    index.boxes[rows], index.category_ids[rows]    # XYXY float32 [N,4], int64 [N]

Every problem of the file is found here, once, when a dataset is built, and named with its
image or annotation id: duplicate ids, an unknown ``category_id``, an annotation of an image
not in ``images``, a ``file_name`` escaping the image root, a box with a non-positive or
non-finite width or height. Arrays, not a dict per annotation: forked DataLoader workers share
them as they are, where Python objects are copied into every worker by reference counting
(pytorch issue 13246).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from recipes.core.arrays import StringArray
from recipes.core.errors import DataError, skip_or_raise
from recipes.core.paths import check_relative


class DegenerateBoxWarning(UserWarning):
    """Annotations whose box has a non-positive or non-finite width or height were dropped."""


@dataclass(frozen=True)
class CocoIndex:
    """What a COCO dataset serves, as flat arrays.

    Per image, in id order: ``image_ids``, ``widths``, ``heights`` int64 [I], ``file_names``.
    Per annotation, grouped by image and in file order within one: rows
    ``ann_offsets[i]:ann_offsets[i + 1]`` belong to image ``i`` (crowd regions included);
    ``ann_ids``, ``category_ids``, ``labels`` (1..K in category id order) int64 [A], ``boxes``
    XYXY float32 [A,4], ``areas`` float32 [A] (the box's where the file has none), ``iscrowd``
    int64 [A]. ``item_rows`` / ``item_offsets``: the rows an item shows (crowd regions only with
    ``include_crowd``). ``segments`` / ``segment_offsets``: each row's segmentation as raw JSON
    bytes (with masks, else None). ``categories``: category id -> name, in id order.
    """

    image_ids: np.ndarray
    widths: np.ndarray
    heights: np.ndarray
    file_names: StringArray
    ann_offsets: np.ndarray
    ann_ids: np.ndarray
    category_ids: np.ndarray
    labels: np.ndarray
    boxes: np.ndarray
    areas: np.ndarray
    iscrowd: np.ndarray
    item_rows: np.ndarray
    item_offsets: np.ndarray
    segments: np.ndarray | None
    segment_offsets: np.ndarray | None
    categories: dict[int, str]

    def item_rows_of(self, image: int) -> np.ndarray:
        """Annotation rows of image position ``image`` that its item shows."""
        return self.item_rows[self.item_offsets[image] : self.item_offsets[image + 1]]

    def segments_of(self, rows: np.ndarray) -> list[bytes]:
        """The raw segmentation JSON of each row (an index built with masks)."""
        offsets = self.segment_offsets
        return [self.segments[offsets[row] : offsets[row + 1]].tobytes() for row in rows.tolist()]

    def ground_truth(self) -> dict[str, list[dict[str, Any]]]:
        """Images and boxes (crowd included) as a COCO dict, what pycocotools' COCOeval reads."""
        xywh = self.boxes.astype(np.float64)
        xywh[:, 2:] -= xywh[:, :2]
        image_ids = np.repeat(self.image_ids, np.diff(self.ann_offsets)).tolist()
        rows = zip(self.ann_ids.tolist(), image_ids, self.category_ids.tolist(), xywh.tolist(),
                   self.areas.tolist(), self.iscrowd.tolist())
        images = zip(self.image_ids.tolist(), self.widths.tolist(), self.heights.tolist(), self.file_names)
        return {
            "images": [{"id": i, "width": w, "height": h, "file_name": n} for i, w, h, n in images],
            "annotations": [
                {"id": a, "image_id": i, "category_id": c, "bbox": b, "area": s, "iscrowd": k}
                for a, i, c, b, s, k in rows
            ],
            "categories": [{"id": i, "name": n} for i, n in self.categories.items()],
        }


def index_instances(
    columns: dict[str, Any],
    source: str | Path,
    *,
    on_error: str = "raise",
    include_crowd: bool = False,
    remove_empty: bool = False,
    strict: bool = False,
) -> CocoIndex:
    """Check :func:`recipes.detection.coco_files.read_instances` columns and index them.

    Args:
        columns: the file's columns; ``source``: the file, for messages.
        on_error: ``"skip"`` leaves out (with a warning each) an image whose ``file_name``
            escapes the root, an annotation of an image not in ``images``, and the image of an
            annotation with an unknown category; ``"raise"`` raises on the first. Duplicate
            ids and image sizes that are not positive whole numbers always raise.
        include_crowd: items show ``iscrowd=1`` regions too (the index always holds them).
        remove_empty: leave out images whose item would show no box.
        strict: raise on a degenerate box instead of dropping it with one DegenerateBoxWarning.
    """
    categories = columns["category_ids"]
    _refuse_duplicates(source, categories, "category", "categories")
    _refuse_duplicates(source, columns["image_ids"], "image", "images")
    keep_images = _check_images(columns, source, on_error)
    _refuse_duplicates(source, columns["ann_ids"], "annotation", "annotations")
    known_categories = np.sort(categories)

    order = np.argsort(columns["image_ids"], kind="stable")
    image_ids, ann_ids = columns["image_ids"][order], columns["ann_ids"]
    row, found = _lookup(image_ids, columns["ann_image_ids"])
    for k in np.flatnonzero(~found):  # "skip": the annotation is left out
        skip_or_raise(DataError(
            f"{source}: annotation {ann_ids[k]} refers to image {columns['ann_image_ids'][k]}, which is not in "
            f"'images' ({int((~found).sum())} annotation(s) do)"
        ), on_error)
    _, known = _lookup(known_categories, columns["ann_category_ids"])
    unknown = found & ~known
    for k in np.flatnonzero(unknown):  # "skip": its image is left out (a box would be missing)
        skip_or_raise(DataError(
            f"{source}: annotation {ann_ids[k]} has category_id {columns['ann_category_ids'][k]}, which is not in "
            f"'categories' {known_categories.tolist()} ({int(unknown.sum())} annotation(s) do); "
            f"image {columns['ann_image_ids'][k]} cannot be used"
        ), on_error)
    boxes, good = _xyxy_boxes(columns, source, found, strict)

    keep_images = keep_images[order]
    keep_images[row[unknown]] = False
    shown = ~columns["iscrowd"] | include_crowd
    if remove_empty:
        keep_images &= np.bincount(row[good & shown], minlength=len(order)) > 0
    new_row = np.cumsum(keep_images) - 1
    keep = good.copy()
    keep[good] = keep_images[row[good]]  # (row is meaningless where no image was found)
    ann = np.flatnonzero(keep)[np.argsort(row[keep], kind="stable")]  # by image, then file order
    row = new_row[row[ann]]
    kept = np.flatnonzero(keep_images)
    visible = shown[ann]
    area = columns["area"][ann]
    segments = segment_offsets = None
    if columns["segments"] is not None:
        pieces = [columns["segments"][i] for i in ann]
        segment_offsets = _offsets(np.array([len(s) for s in pieces], dtype=np.int64))
        segments = np.frombuffer(b"".join(pieces), dtype=np.uint8).copy()
    category_order = np.argsort(categories)
    return CocoIndex(
        image_ids=image_ids[kept],
        widths=columns["widths"][order][kept].astype(np.int64),
        heights=columns["heights"][order][kept].astype(np.int64),
        file_names=StringArray(columns["file_names"][i] for i in order[kept]),
        ann_offsets=_offsets(np.bincount(row, minlength=len(kept))),
        ann_ids=ann_ids[ann],
        category_ids=columns["ann_category_ids"][ann],
        labels=np.searchsorted(known_categories, columns["ann_category_ids"][ann]).astype(np.int64) + 1,
        boxes=boxes[ann],
        areas=np.where(np.isnan(area), columns["bbox"][ann, 2] * columns["bbox"][ann, 3], area).astype(np.float32),
        iscrowd=columns["iscrowd"][ann].astype(np.int64),
        item_rows=np.flatnonzero(visible),
        item_offsets=_offsets(np.bincount(row[visible], minlength=len(kept))),
        segments=segments,
        segment_offsets=segment_offsets,
        categories={int(categories[i]): columns["category_names"][i] for i in category_order},
    )


def _refuse_duplicates(source: str | Path, ids: np.ndarray, what: str, section: str) -> None:
    ordered = np.sort(ids)
    repeated = ordered[1:][ordered[1:] == ordered[:-1]]
    if len(repeated):
        raise DataError(f"{source}: {what} id {repeated[0]} appears more than once in '{section}'")


def _check_images(columns: dict[str, Any], source: str | Path, on_error: str) -> np.ndarray:
    """Sizes must be positive whole numbers; images whose name escapes the root are left out
    (``"skip"``) or raise. Returns which images to keep, in file order."""
    ids, widths, heights = columns["image_ids"], columns["widths"], columns["heights"]
    valid = (widths >= 1) & (heights >= 1) & (widths % 1 == 0) & (heights % 1 == 0)
    if not valid.all():
        k = int(np.flatnonzero(~valid)[0])
        raise DataError(
            f"{source}: image {ids[k]} has width {widths[k]} and height {heights[k]}; "
            "both must be positive whole numbers"
        )
    keep = np.ones(len(ids), bool)
    for k, name in enumerate(columns["file_names"]):
        # a cheap screen first: names without these characters pass check_relative
        if not isinstance(name, str) or not name or "\x00" in name or ".." in name or ":" in name or name[0] in "/\\":
            try:
                check_relative(name, source=f"{source}, image {ids[k]}")
            except DataError as error:
                skip_or_raise(error, on_error)
                keep[k] = False
    return keep


def _xyxy_boxes(
    columns: dict[str, Any], source: str | Path, found: np.ndarray, strict: bool
) -> tuple[np.ndarray, np.ndarray]:
    """XYWH -> XYXY in float32, as torchvision's wrapper does it (the same boxes to the bit),
    and which rows are good: a finite, positive-size box of an image in the file."""
    boxes = columns["bbox"].astype(np.float32)
    boxes[:, 2:] += boxes[:, :2]
    good = np.isfinite(boxes).all(1) & (boxes[:, 2] > boxes[:, 0]) & (boxes[:, 3] > boxes[:, 1]) & found
    bad = np.flatnonzero(~good & found)
    if len(bad):
        ids = columns["ann_ids"]
        listed = ", ".join(str(i) for i in ids[bad[:10]]) + (", ..." if len(bad) > 10 else "")
        what = f"{len(bad)} annotation(s) whose bbox has a non-positive or non-finite width or height (ids {listed})"
        if strict:
            raise DataError(
                f"{source}: annotation {ids[bad[0]]} has bbox {columns['bbox'][bad[0]].tolist()}; {what}; "
                "fix them, or pass strict=False to drop them with a warning"
            )
        # stacklevel: this function, index_instances, the dataset's __init__, its caller
        warnings.warn(f"{source}: dropped {what}", DegenerateBoxWarning, stacklevel=4)
    return boxes, good


def _lookup(sorted_ids: np.ndarray, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Positions of ``ids`` in ``sorted_ids`` and whether each was found."""
    position = np.minimum(np.searchsorted(sorted_ids, ids), max(len(sorted_ids) - 1, 0))
    found = sorted_ids[position] == ids if len(sorted_ids) else np.zeros(len(ids), bool)
    return position, found


def _offsets(counts: np.ndarray) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
