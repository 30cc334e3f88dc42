"""The DataLoader preset for video clips: random clips to train on, evenly spaced ones to evaluate, any rank.

    loader = video_loader(dataset, 32, device="cuda", seed=0, stateful=True)                # [B, T, 3, H, W]
    loader = video_loader(dataset, 32, train=False, layout="BCTHW", device="cuda")          # r3d_18's order

A video dataset draws a clip per item only when the preset trains: :func:`video_loader` hands
the DataLoader a copy of the dataset (of each :class:`recipes.video.clip_dataset.ClipDataset`, the
sources of a ``MixedDataset`` or ``Subset`` alike; other datasets as they are) that draws each item's clip from the sample's seed, ``(seed, epoch, index)``,
as the images' augmentations are drawn; evaluating, the copy takes clip ``clip`` of the evenly
spaced ones. The rest is :func:`recipes.core.build_loader`: shuffled epochs split across
ranks, exact resume with ``stateful=True``, errors naming their clips, batches packed in workers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.utils.data import DataLoader, Dataset, Subset

from recipes.core import build_loader, hooks, imaging
from recipes.video.clip_dataset import ClipDataset, DeviceClips
from recipes.video.clips import copy_with
from recipes.video.collate import LAYOUTS, VideoCollate
from recipes.video.device import decode_path


def clips_drawn(dataset: Dataset, random: bool) -> Dataset:
    """``dataset`` drawing its clips at random or evenly spaced (through mixtures and subsets): a
    shallow copy of each :class:`ClipDataset`, sharing its index; any other dataset as it is."""
    from recipes.core import MixedDataset  # here: a plain video dataset needs no mixture machinery

    if isinstance(dataset, ClipDataset):
        return copy_with(dataset, dataset.clips.with_random(random))
    if isinstance(dataset, MixedDataset):
        sources = [clips_drawn(source, random) for source in dataset.datasets]
        return MixedDataset(sources, dataset.weights, samples_per_epoch=dataset.samples_per_epoch)
    if isinstance(dataset, Subset):
        return Subset(clips_drawn(dataset.dataset, random), dataset.indices)
    return dataset


def decode_of(dataset: Dataset, device: Any) -> str:
    """Where the loader decodes ``dataset`` (its sources must agree): ``"worker"`` or ``"device"``."""
    from recipes.core import MixedDataset

    if isinstance(dataset, ClipDataset):
        return decode_path(dataset.options.decode, device, dataset.clips)
    if isinstance(dataset, MixedDataset):
        paths = sorted({decode_of(source, device) for source in dataset.datasets})
        if len(paths) > 1:
            raise ValueError(f"the mixture's sources decode in different places ({paths}): give them one "
                             "VideoOptions(decode=...)")
        return paths[0]
    return decode_of(dataset.dataset, device) if isinstance(dataset, Subset) else "worker"


def video_loader(
    dataset: Dataset,
    batch_size: int,
    *,
    train: bool = True,
    device: str | torch.device | None = None,
    seed: int | None = None,
    stateful: bool = False,
    layout: str = "BTCHW",
    collate_fn: Callable[[list[Any]], Any] | None = None,
    **overrides: Any,
) -> DataLoader:
    """The DataLoader preset for the video datasets, with :func:`recipes.video.collate.video_collate`.

    Training shuffles every epoch, draws each item's clip at random per ``(seed, epoch, index)``
    and drops the last incomplete batch; evaluation keeps the dataset's order, every clip, and
    takes clip ``clip`` of ``clips_per_video`` evenly spaced. Batches are split across the ranks
    of an initialised process group (equal counts when training, every clip once when not).

    Args:
        dataset: a ``VideoFolderDataset`` or ``VideoDataset``, or a ``MixedDataset`` / ``Subset`` of them.
        batch_size: clips per batch.
        train, device, seed, stateful: see :func:`recipes.core.build_loader`; ``stateful=True``
            resumes mid-epoch with exactly the batches still to come.
        layout: ``"BTCHW"`` (``[B, T, 3, H, W]``, video transformers) or ``"BCTHW"``
            (``[B, 3, T, H, W]``, 3-D CNNs such as torchvision's ``r3d_18`` and ``mvit``).
        collate_fn: used as given (``layout`` is then the collate's to apply). Default: the collate
            the dataset asks for (its ``batch_contract()``'s ``"collate"``, :func:`recipes.core.hooks.collate_of`), else :class:`VideoCollate`.
        overrides: DataLoader keyword arguments (``num_workers=0``, ``multiprocessing_context="spawn"``;
            :func:`recipes.core.preset_kwargs`).

    ``VideoOptions(decode="device")`` datasets are iterated through ``DevicePrefetcher(loader,
    device)``, which decodes them (:mod:`recipes.video.device`); it normalises clips of either layout.
    """
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    if collate_fn is None:  # asked of the dataset as given (drawing its clips may hand on another object);
        collate_fn = hooks.collate_of(dataset) or VideoCollate(layout)  # build_loader checks the hooks, once
    dataset = clips_drawn(dataset, random=train)
    decoded = imaging.with_decode(dataset, decode_of(dataset, device), DeviceClips)
    return build_loader(decoded, collate_fn, batch_size=batch_size, train=train, device=device, seed=seed,
                        stateful=stateful, **overrides)
