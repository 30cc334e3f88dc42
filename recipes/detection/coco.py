"""COCO instances as a map-style Dataset: a flat numpy index, tv_tensors targets, checked at load.

    from torchvision.transforms import v2
    from recipes.detection import CocoDataset, detection_loader

    dataset = CocoDataset("coco/train2017", "coco/annotations/instances_train2017.json",
                          transforms=v2.RandomHorizontalFlip())
    image, target = dataset[0]        # tv_tensors.Image uint8 [3,H,W], dict (schema below)
    loader = detection_loader(dataset, batch_size=8, device="cuda", seed=0)

Item = ``(image, target)``: ``image`` is ``tv_tensors.Image`` uint8 [3,H,W] (EXIF applied, the
decoder's memory layout; ``.contiguous()`` gives NCHW order); ``target`` = ``{"image_id": int,
"boxes": BoundingBoxes XYXY float32 [N,4] (canvas_size=(H,W)), "labels": int64 [N] (COCO
category ids, or 1..K with contiguous_labels=True), "area": float32 [N], "iscrowd": int64 [N],
"masks": tv_tensors.Mask uint8 [N,H,W] (masks=True only), and a tensor [N] per ``extra_fields``
name}``. An image without boxes has the same keys with N = 0, where torchvision's CocoDetection
wrapper returns only ``image_id``.

The same boxes and labels as ``torchvision.datasets.CocoDetection``, but the file is read once
into a few numpy arrays (:mod:`recipes.detection.coco_index`), not a dict per annotation that forked
workers copy (pytorch issue 13246), and every problem is named with its file and id: at load,
or when an image is read (unreadable, or a size other than the file says).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
from torch.utils.data import Dataset
from torchvision import tv_tensors
from torchvision.tv_tensors import BoundingBoxFormat

from recipes.core import (
    DataError,
    ReadOptions,
    UserCode,
    check_on_error,
    checks,
    read_image,
    skip_or_raise,
    storage,
)
from recipes.detection.coco_files import decode_masks, image_path, read_instances, size_mismatch
from recipes.detection.coco_index import CocoIndex, DegenerateBoxWarning, index_instances

__all__ = ["CocoDataset", "DegenerateBoxWarning"]


class CocoDataset(Dataset):
    """COCO detection dataset over a flat numpy index; see the module docstring for the item.

    Args:
        image_root: folder the images' ``file_name`` entries are relative to.
        ann_file: COCO instances JSON (``images``, ``annotations``, ``categories``), a local path
            or an fsspec URL; a test-dev ``image_info`` file without ``annotations`` gives empty
            targets.
        transforms: a ``torchvision.transforms.v2`` callable on ``(image, target)``; flips and
            crops then move the boxes (and masks) with the pixels. An exception it raises is a
            :class:`recipes.core.SampleError` naming the index, image id and file (a bug,
            not bad data: ``on_error="skip"`` does not drop it).
        masks: add ``masks`` decoded with pycocotools from polygons or RLE.
        include_crowd: keep ``iscrowd=1`` regions in the targets (they are always kept for
            :func:`evaluate`, where COCOeval treats them as ignore regions).
        remove_empty: drop images without any box left in their target (after crowd filtering).
        on_error: ``"raise"`` or ``"skip"`` an unreadable image, a size mismatch, a
            ``file_name`` escaping ``image_root``, an annotation of an image not in ``images``
            (the annotation is left out) or of an unknown category (its image is left out);
            duplicate ids and a malformed file always raise.
        contiguous_labels: ``labels`` are 1..K (category ids in sorted order, 0 = background)
            instead of COCO ids, for models built with ``num_classes=K + 1``.
        storage_options: passed to fsspec when ``ann_file`` is a URL; never shown.
        extra_fields: more fields of each annotation to put in the target, each a tensor [N]
            beside ``labels`` (int64 where every value is an integer or a boolean, else float32),
            e.g. ``("occluded",)``. An annotation without one, or with a value that is not a number,
            is a DataError naming the field and the annotation id (``on_error="skip"``: its image is
            left out). For any other use of the annotations, override :meth:`extend_target`.
        read_options: a :class:`recipes.core.ReadOptions`; this reads its
            ``strict_annotations`` (raise on boxes with a non-positive or non-finite width or
            height instead of dropping them with one :class:`DegenerateBoxWarning`) and
            ``strict_decode`` (raise or skip, per ``on_error``, an image libjpeg reports as corrupt).

    Attributes:
        index: the :class:`recipes.detection.coco_index.CocoIndex` (image sizes and file names,
            every annotation) in image id order.
        categories: COCO category id -> name, in id order; ``category_to_label`` and
            ``label_to_category`` map ids to 1..K and back.
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
        contiguous_labels: bool = False,
        storage_options: dict[str, Any] | None = None,
        read_options: ReadOptions | None = None,
        extra_fields: Sequence[str] = (),
    ) -> None:
        options = checks.read_options_or_default(read_options, "CocoDataset", ("strict_annotations", "strict_decode"))
        self.extra_fields = _checked_fields(extra_fields)
        # the annotations whole only for an extend_target that reads them (no cost otherwise)
        self._keeps_annotations = type(self).extend_target is not CocoDataset.extend_target
        self.image_root, self.ann_file = Path(image_root), ann_file if storage.is_url(ann_file) else Path(ann_file)
        if not self.image_root.is_dir():
            raise FileNotFoundError(f"image_root {storage.shown(image_root)} is not a directory")
        if not storage.is_url(self.ann_file) and not self.ann_file.is_file():
            raise FileNotFoundError(f"ann_file {self.ann_file} does not exist (expected a COCO instances .json)")
        self._real_root = os.path.realpath(self.image_root) + os.sep
        self.transforms, self.masks, self.contiguous_labels = transforms, masks, contiguous_labels
        self.on_error, self.strict_decode = check_on_error(on_error), options.strict_decode
        self.index = index_instances(
            read_instances(self.ann_file, masks=masks, extra_fields=self.extra_fields, raw=self._keeps_annotations,
                           storage_options=storage_options), storage.shown(self.ann_file),
            on_error=on_error,
            include_crowd=include_crowd, remove_empty=remove_empty, strict=options.strict_annotations,
        )
        self.categories = self.index.categories
        self.category_to_label = {cid: k + 1 for k, cid in enumerate(self.categories)}
        self.label_to_category = {k: cid for cid, k in self.category_to_label.items()}
        self.image_ids = self.index.image_ids  # the COCO id of every image, in dataset order (ascending)
        self.aspect_ratios = self.index.widths / self.index.heights  # width / height, from the file: no image opened

    def __len__(self) -> int:
        return len(self.index.image_ids)

    def batch_contract(self) -> dict[str, Any]:
        """What a mixed dataset must share with this one (recipes.core.loading.mixing)."""
        return {"collate": "detection_collate", "label_to_category": self.label_to_category,
                "per_sample": ("aspect_ratios",)}

    def ground_truth(self) -> dict[str, list[dict[str, Any]]]:
        """This dataset's images and boxes (crowd included) as a COCO dict, for :func:`evaluate`."""
        return self.index.ground_truth()

    def __getitem__(self, index: int) -> tuple[tv_tensors.Image, dict[str, Any]] | None:
        """``(image, target)`` of :meth:`load_image` and :meth:`load_target`, through ``transforms``."""
        index = index + len(self) if index < 0 else index
        if not 0 <= index < len(self):
            raise IndexError(f"index {index} is out of range for {len(self)} images")
        try:
            image = self.load_image(index)
            target = self.load_target(index)
        except DataError as error:
            return skip_or_raise(error, self.on_error)
        image = image.as_subclass(tv_tensors.Image)  # what Image(image) does, minus its checks
        if self.transforms is not None:
            with UserCode.for_sample(self, index, what="transforms"):  # names the image id and file
                image, target = self.transforms(image, target)
        return image, target

    def state_source(self) -> str:
        """What a loader state names as this data: the annotation file's name, the image count and
        digests of the image ids and file names (not the folders: moved data still resumes)."""
        ids, files = checks.sampled_digest(self.index.image_ids), checks.sampled_digest(self.index.file_names)
        return f"{storage.basename(self.ann_file)}: {len(self)} images, ids and names {ids}{files}"

    def describe(self, index: int) -> str:
        """Where sample ``index`` comes from, for messages: ``"instances.json image id 42 (000042.jpg)"``."""
        return f"{storage.shown(self.ann_file)} image id {self.index.image_ids[index]} ({self.index.file_names[index]})"

    def load_image(self, index: int) -> torch.Tensor:
        """Image ``index`` as uint8 [3,H,W], before ``transforms``: its ``file_name`` under
        ``image_root``, decoded, its size checked against the annotations. Override it to read
        images another way (an archive, a database); a :class:`DataError` it raises follows ``on_error``."""
        source = _source(self, index)
        path = image_path(self.image_root, self._real_root, self.index.file_names[index], source)
        try:
            image = read_image(path, contiguous=False, strict=self.strict_decode)  # the decoder's layout: no copy
        except DataError as error:  # it names the file; add which image of the annotations
            raise DataError(f"{source}: {error}") from None
        width, height = int(self.index.widths[index]), int(self.index.heights[index])
        if tuple(image.shape[-2:]) != (height, width):
            raise DataError(size_mismatch(path, storage.shown(self.ann_file), int(self.index.image_ids[index]),
                                          (width, height), (image.shape[-1], image.shape[-2])))
        return image

    def load_target(self, index: int) -> dict[str, Any]:
        """Image ``index``'s target, before ``transforms`` (keys in the module docstring). Override it
        to add keys or build another target; a :class:`DataError` it raises follows ``on_error``."""
        target = coco_target(self.index, index, masks=self.masks, contiguous_labels=self.contiguous_labels,
                             source=_source(self, index))
        if self._keeps_annotations:
            target = self.extend_target(index, target, self.index.annotations_of(self.index.item_rows_of(index)))
        return target

    def extend_target(self, index: int, target: dict[str, Any], annotations: list[dict[str, Any]]) -> dict[str, Any]:
        """Override it to build more of image ``index``'s target from its annotations, as the file
        has them (dicts, one per box of ``target`` and in its order), as torchvision's
        ``CocoDetection._load_target`` hands them over; return the target. Only an override is
        called, and only then are the annotations kept (as JSON bytes in one buffer, which forked
        workers share). A :class:`DataError` it raises follows ``on_error``."""
        return target


def coco_target(ix: CocoIndex, index: int, *, masks: bool, contiguous_labels: bool, source: str) -> dict[str, Any]:
    """Image ``index`` of the index ``ix`` as a target (the keys in the module docstring): its shown
    boxes as XYXY ``BoundingBoxes``, labels (1..K with ``contiguous_labels``), areas, crowd flags,
    ``masks`` decoded (errors name ``source``) and the extra fields."""
    height, width = int(ix.heights[index]), int(ix.widths[index])
    rows = ix.item_rows_of(index)
    labels = ix.labels if contiguous_labels else ix.category_ids
    target = {
        "image_id": int(ix.image_ids[index]),
        "boxes": tv_tensors.BoundingBoxes(
            torch.from_numpy(ix.boxes[rows]), format=BoundingBoxFormat.XYXY, canvas_size=(height, width)
        ),
        "labels": torch.from_numpy(labels[rows]),
        "area": torch.from_numpy(ix.areas[rows]),
        "iscrowd": torch.from_numpy(ix.iscrowd[rows]),
    }
    if masks:
        decoded = decode_masks(ix.segments_of(rows), height, width, source=source, ann_ids=ix.ann_ids[rows].tolist())
        target["masks"] = tv_tensors.Mask(torch.from_numpy(decoded))
    for name, values in ix.extras.items():
        target[name] = torch.from_numpy(values[rows])
    return target


def _source(dataset: CocoDataset, index: int) -> str:
    """Image ``index`` of ``dataset`` for messages: the annotation file and the image id."""
    return f"{storage.shown(dataset.ann_file)}, image {dataset.index.image_ids[index]}"


_TARGET_KEYS = ("image_id", "boxes", "labels", "area", "iscrowd", "masks")


def _checked_fields(fields: Sequence[str]) -> tuple[str, ...]:
    """``extra_fields`` as a tuple of new target keys, or a ValueError saying what is wrong."""
    if isinstance(fields, str) or not all(isinstance(name, str) for name in fields):
        raise ValueError(f"extra_fields must be a sequence of annotation field names, as ('occluded',), got {fields!r}")
    taken = [name for name in fields if name in _TARGET_KEYS]
    if taken:
        raise ValueError(f"extra_fields {taken} would replace the target's own keys {list(_TARGET_KEYS)}")
    return tuple(dict.fromkeys(fields))
