"""Detection batches: list collate, padded collate, and a loader grouped by aspect ratio.

    from recipes.detection import CocoDataset, detection_loader

    loader = detection_loader(dataset, batch_size=8, device="cuda", seed=0)
    for images, targets in loader:        # lists, the form torchvision detection models take
        losses = model([im.float() / 255 for im in images], targets)

    loader = detection_loader(dataset, 8, collate_fn=PaddedDetectionCollate(size_divisibility=32))

Detection images differ in size and in box count, so the default collate cannot stack them:
:func:`detection_collate` keeps lists, :func:`padded_detection_collate` pads both (images to a
common size rounded up to ``size_divisibility``, boxes to the batch's largest count with a
validity mask) for models that want tensors. Training batches hold images of one aspect-ratio
group only (portrait vs landscape by default), read from the annotation file's sizes, so the
padding a batch needs stays small; as in torchvision's detection reference, but no sample is
repeated to fill a group's last batch. A stream (:class:`CocoShards`) is grouped as it streams, by the
images it gives, within each worker (:class:`recipes.core.streams.GroupedBatches`, as detectron2's
``AspectRatioGroupedDataset``), and resumes exactly. A worker's batch holds five tensors per image, so
:func:`detection_loader` sends it to the main process packed into one shared buffer per dtype
(:mod:`recipes.core.workers.packing`): one transfer per tensor would hold the main process back.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, IterableDataset, Subset

from recipes.core import ByGroup, Shuffle, build_loader, drop_skipped, hooks, streams


def detection_collate(batch: Sequence[Any]) -> tuple[list[torch.Tensor], list[dict[str, Any]]]:
    """``[(image, target), ...]`` -> ``(images, targets)``, two lists; skipped samples dropped."""
    batch = drop_skipped(batch)
    return [image for image, _ in batch], [target for _, target in batch]


def padded_detection_collate(
    batch: Sequence[Any], *, size_divisibility: int = 32, pad_value: int = 0
) -> dict[str, Any]:
    """Pad images and boxes into tensors.

    Args:
        batch: ``(image uint8 [3,H,W], target)`` samples (None entries are dropped).
        size_divisibility: the padded height and width are multiples of this (FPN strides).
        pad_value: fill for the padded image area.

    Returns:
        ``{"images": uint8 [B,3,H,W] (top-left aligned), "image_sizes": int64 [B,2] (h, w before
        padding), "boxes": float32 [B,N,4], "labels": int64 [B,N] (-1 = padding), "area":
        float32 [B,N], "iscrowd": int64 [B,N], "box_mask": bool [B,N] (True = a real box),
        "image_id": int64 [B]}``, plus ``"masks": uint8 [B,N,H,W]`` when targets have masks.
    """
    images, targets = detection_collate(batch)
    sizes = torch.tensor([image.shape[-2:] for image in images], dtype=torch.int64).reshape(-1, 2)
    height, width = (-(-sizes.max(0).values // size_divisibility) * size_divisibility).tolist() if images else (0, 0)
    channels = images[0].shape[0] if images else 3
    padded = torch.full((len(images), channels, height, width), pad_value, dtype=torch.uint8)
    for out, image in zip(padded, images):
        out[:, : image.shape[-2], : image.shape[-1]] = image
    count = max((len(t["boxes"]) for t in targets), default=0)
    out = {
        "images": padded,
        "image_sizes": sizes,
        "boxes": torch.zeros((len(images), count, 4), dtype=torch.float32),
        "labels": torch.full((len(images), count), -1, dtype=torch.int64),
        "area": torch.zeros((len(images), count), dtype=torch.float32),
        "iscrowd": torch.zeros((len(images), count), dtype=torch.int64),
        "box_mask": torch.zeros((len(images), count), dtype=torch.bool),
        "image_id": torch.tensor([t["image_id"] for t in targets], dtype=torch.int64),
    }
    with_masks = bool(targets) and "masks" in targets[0]
    if with_masks:
        out["masks"] = torch.zeros((len(images), count, height, width), dtype=torch.uint8)
    for i, target in enumerate(targets):
        n = len(target["boxes"])
        for key in ("boxes", "labels", "area", "iscrowd"):
            out[key][i, :n] = target[key].as_subclass(torch.Tensor)
        out["box_mask"][i, :n] = True
        if with_masks:
            mask = target["masks"]
            out["masks"][i, :n, : mask.shape[-2], : mask.shape[-1]] = mask
    return out


@dataclass(frozen=True)
class PaddedDetectionCollate:
    """:func:`padded_detection_collate` with its options as fields (a ``collate_fn`` that pickles
    and shows them): ``PaddedDetectionCollate(size_divisibility=32)``."""

    size_divisibility: int = 32
    pad_value: int = 0

    def __call__(self, batch: Sequence[Any]) -> dict[str, Any]:
        return padded_detection_collate(batch, **vars(self))


def aspect_ratio_groups(aspect_ratios: np.ndarray | Sequence[float], factor: int = 0) -> np.ndarray:
    """Group id per image from its width / height.

    ``factor=0``: 0 = portrait, 1 = landscape or square. ``factor=k``: the ``2k + 2`` bins of
    torchvision's detection reference (``--aspect-ratio-group-factor``, 3 there), edges
    ``2 ** linspace(-1, 1, 2k + 1)``; every bin lies on one side of 1, so portrait and
    landscape never share a group either way.
    """
    if factor < 0:
        raise ValueError(f"factor must be >= 0, got {factor}")
    edges = np.array([1.0]) if factor == 0 else 2.0 ** np.linspace(-1, 1, 2 * factor + 1)
    return np.searchsorted(edges, np.asarray(aspect_ratios, dtype=np.float64), side="right")


def _aspect_ratios(dataset: Dataset) -> np.ndarray:
    if isinstance(dataset, Subset):
        return _aspect_ratios(dataset.dataset)[np.asarray(dataset.indices)]
    ratios = dataset.aspect_ratios if isinstance(dataset, hooks.KnowsAspectRatios) else None
    if ratios is None:
        raise TypeError(
            f"{type(dataset).__name__} has no aspect_ratios; pass groups=... (one int per sample) or train=False"
        )
    return np.asarray(ratios)


def orientation(item: tuple[torch.Tensor, Any]) -> int:
    """The group of a stream's ``(image, target)`` by its image as given: :func:`aspect_ratio_groups`' default."""
    height, width = item[0].shape[-2:]
    return int(aspect_ratio_groups([width / height])[0])


def detection_loader(
    dataset: Dataset,
    batch_size: int,
    *,
    train: bool = True,
    device: str | torch.device | None = None,
    seed: int | None = None,
    stateful: bool = False,
    collate_fn: Callable[[list[Any]], Any] | None = None,
    groups: Sequence[int] | np.ndarray | None = None,
    **overrides: Any,
) -> DataLoader:
    """A DataLoader for detection: aspect-ratio grouped when training, in order when not.

    Args:
        dataset: a :class:`CocoDataset` (or a ``Subset`` of one), or any dataset with
            ``aspect_ratios``; others need ``groups=``.
        batch_size: images per batch.
        train: shuffle within aspect-ratio groups and drop each group's incomplete last batch;
            ranks of a process group get equal batch counts. False: dataset order, every
            image once across ranks. A stream shuffles itself; training, its batches are each of
            one :func:`orientation`, filled as it streams.
        device, seed, stateful: see :func:`recipes.core.build_loader`.
        collate_fn: used as given; :class:`PaddedDetectionCollate` pads. Default: the collate the dataset
            asks for (its ``batch_contract()``'s ``"collate"``, :func:`recipes.core.hooks.collate_of`), else :func:`detection_collate`.
            Its batches leave worker processes packed (:func:`recipes.core.workers.packing.packed_in_workers`).
        groups: one int per sample; a training batch never mixes two. Default: portrait vs
            landscape; ``aspect_ratio_groups(dataset.aspect_ratios, 3)`` gives torchvision
            reference's bins. Not for a stream, whose samples have no numbers.
        overrides: DataLoader keyword arguments (``num_workers=0``, ...;
            :func:`recipes.core.preset_kwargs`).
    """
    if isinstance(dataset, IterableDataset):  # a stream (CocoShards) orders and shares out itself
        if groups is not None:
            raise ValueError("groups= gives each sample of a map-style dataset its group; a stream's samples are "
                             "grouped by the orientation of their images as they stream")
        plan = None
        if train:  # each worker fills a batch of a group as the stream gives its items
            dataset, batch_size = streams.GroupedBatches(dataset, batch_size, orientation), None
    else:
        if groups is None and overrides.get("shuffle", train):  # evaluation needs no groups
            groups = aspect_ratio_groups(_aspect_ratios(dataset))
        plan = Shuffle() if groups is None else ByGroup(groups)
    collate = hooks.UsualCollate.of(detection_collate) if collate_fn is None else collate_fn
    return build_loader(dataset, collate, batch_size=batch_size, plan=plan, train=train,
                        device=device, seed=seed, stateful=stateful, **overrides)
