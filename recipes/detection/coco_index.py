"""The checked, flat index of a COCO instances file: per-image and per-annotation numpy arrays.

    index = index_instances(read_instances(path, masks=False), path)
    rows = index.item_rows_of(3)                   # annotation rows the 4th image shows
    index.boxes[rows], index.category_ids[rows]    # XYXY float32 [N,4], int64 [N]

The rules of :mod:`recipes.detection.coco_checks` run once, when a dataset is built, and their
first problem is raised, named with its image or annotation id (``recipes check`` lists every
one in the same words): duplicate ids, an unknown ``category_id``, an annotation of an image not
in ``images``, a ``file_name`` escaping the image root, a box with a non-positive or non-finite
width or height. Arrays, not a dict per annotation: forked DataLoader workers share them as they
are, where Python objects are copied into every worker by reference counting (pytorch issue 13246).
"""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from recipes.core import arrays, skip_or_raise
from recipes.detection.coco_checks import ColumnChecks


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
    bytes (with masks, else None). ``extras``: each ``extra_fields`` field, per row, int64 where
    every value is an integer or a boolean, else float32. ``annotations`` / ``annotation_offsets``:
    each row's annotation whole, as raw JSON bytes (where asked for, else None). ``categories``:
    category id -> name, in id order.
    """

    image_ids: np.ndarray
    widths: np.ndarray
    heights: np.ndarray
    file_names: arrays.StringArray
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
    extras: dict[str, np.ndarray] = field(default_factory=dict)
    annotations: np.ndarray | None = None
    annotation_offsets: np.ndarray | None = None

    def item_rows_of(self, image: int) -> np.ndarray:
        """Annotation rows of image position ``image`` that its item shows."""
        return self.item_rows[self.item_offsets[image] : self.item_offsets[image + 1]]

    def segments_of(self, rows: np.ndarray) -> list[bytes]:
        """The raw segmentation JSON of each row (an index built with masks)."""
        return _pieces(self.segments, self.segment_offsets, rows)

    def annotations_of(self, rows: np.ndarray) -> list[dict[str, Any]]:
        """Each row's annotation as the file has it (an index built with its annotations)."""
        return [json.loads(piece) for piece in _pieces(self.annotations, self.annotation_offsets, rows)]

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
    checks = ColumnChecks(columns)
    keep_images = np.ones(len(columns["image_ids"]), bool)  # in file order
    degenerate = []
    for problem in checks.problems():
        if problem.drops in ("image", "box") and problem.section == "annotations" and not checks.found[problem.row]:
            continue  # an annotation of no image is left out, named once: not again for its category or box
        if problem.drops == "box":
            degenerate.append(problem)
            continue
        if not problem.drops:
            raise problem.error(source)
        skip_or_raise(problem.error(source), on_error)
        if problem.drops == "image":
            keep_images[problem.row if problem.section == "images" else checks.image_of(problem.row)] = False
    if degenerate:
        ids = [int(columns["ann_ids"][p.row]) for p in degenerate]
        listed = ", ".join(map(str, ids[:10])) + (", ..." if len(ids) > 10 else "")
        if strict:
            raise degenerate[0].error(source, hint=(
                f"{len(ids)} annotation(s) have such a box (ids {listed}): fix them, or pass strict=False to drop "
                "them with a warning"
            ))
        # stacklevel: index_instances, the dataset's __init__, its caller
        warnings.warn(
            f"{source}: dropped {len(ids)} annotation(s) whose bbox has a non-positive or non-finite width or height "
            f"(ids {listed})", DegenerateBoxWarning, stacklevel=3,
        )

    order, row, found = checks.image_order, checks.image_rows, checks.found
    image_ids, ann_ids, categories = columns["image_ids"][order], columns["ann_ids"], columns["category_ids"]
    good = checks.good_boxes & found
    keep_images = keep_images[order]
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
    segments, segment_offsets = _packed(columns["segments"], ann)
    annotations, annotation_offsets = _packed(columns.get("raw"), ann)
    extras = {name: _numbers([values[i] for i in ann]) for name, values in columns.get("extra", {}).items()}
    category_order = np.argsort(categories)
    return CocoIndex(
        image_ids=image_ids[kept],
        widths=columns["widths"][order][kept].astype(np.int64),
        heights=columns["heights"][order][kept].astype(np.int64),
        file_names=arrays.StringArray(columns["file_names"][i] for i in order[kept]),
        ann_offsets=_offsets(np.bincount(row, minlength=len(kept))),
        ann_ids=ann_ids[ann],
        category_ids=columns["ann_category_ids"][ann],
        labels=checks.category_rows[ann].astype(np.int64) + 1,
        boxes=checks.boxes[ann],
        areas=np.where(np.isnan(area), columns["bbox"][ann, 2] * columns["bbox"][ann, 3], area).astype(np.float32),
        iscrowd=columns["iscrowd"][ann].astype(np.int64),
        item_rows=np.flatnonzero(visible),
        item_offsets=_offsets(np.bincount(row[visible], minlength=len(kept))),
        segments=segments,
        segment_offsets=segment_offsets,
        categories={int(categories[i]): columns["category_names"][i] for i in category_order},
        extras=extras,
        annotations=annotations,
        annotation_offsets=annotation_offsets,
    )


def _packed(pieces: list[bytes] | None, rows: np.ndarray) -> tuple[np.ndarray | None, np.ndarray | None]:
    """``pieces[rows]`` end to end in one uint8 buffer, and where each starts (None, None: no pieces)."""
    if pieces is None:
        return None, None
    kept = [pieces[i] for i in rows]
    return np.frombuffer(b"".join(kept), dtype=np.uint8).copy(), _offsets(np.array([len(p) for p in kept], np.int64))


def _pieces(buffer: np.ndarray, offsets: np.ndarray, rows: np.ndarray) -> list[bytes]:
    return [buffer[offsets[row] : offsets[row + 1]].tobytes() for row in rows.tolist()]


def _numbers(values: list) -> np.ndarray:
    """Checked numbers (coco_checks): int64 where all are integers or booleans, else float32."""
    if all(type(value) in (int, bool) and -(2**63) <= value < 2**63 for value in values):
        return np.array(values, dtype=np.int64)
    return np.array(values, dtype=np.float64).astype(np.float32)


def _offsets(counts: np.ndarray) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
