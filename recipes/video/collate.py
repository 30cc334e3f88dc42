"""Batching clips: ``video_collate`` stacks them into ``[B, T, 3, H, W]`` (or ``[B, 3, T, H, W]``), uint8.

    batch = video_collate([dataset[0], dataset[1]])      # video uint8 [2, T, 3, H, W], label, index, clip, frames
    loader = DataLoader(..., collate_fn=VideoCollate(layout="BCTHW"))   # r3d_18, mvit: [B, 3, T, H, W]

Each clip is copied once, into a batch allocated up front in the clips' own memory order: frames
the decoder and torch's resize give as ``[3, H, W]`` views of ``[H, W, 3]`` memory keep it, so the
copy is a plain one (writing them into ``[B, T, 3, H, W]`` memory would be a transpose, several
times slower for uint8). ``"BTCHW"`` is then a ``tv_tensors.Video`` view of that memory and
``"BCTHW"`` a plain tensor that is the same memory seen as ``[B, 3, T, H, W]`` (channels-last-3d
for 3-D convolutions); ``.contiguous()`` gives C order. In a worker the batch is allocated in
shared memory, so the trip to the main process copies nothing more. ``DevicePrefetcher``
normalises either layout on the device. Clips of ``decode="device"`` loaders are batched as a
:class:`ClipBatch` that the prefetcher decodes (:mod:`recipes.video.device`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils.data import default_collate, get_worker_info
from torchvision import tv_tensors

from recipes.core import arrays, drop_skipped
from recipes.video.device import EncodedClip

LAYOUTS = ("BTCHW", "BCTHW")
ITEM_KEYS = ("video", "label", "index", "clip", "frames")
FIX = "add a resize and crop to the dataset's transform (train_transform(112)) or set VideoOptions(decoder_size=...)"


def stack_clips(clips: Sequence[torch.Tensor], layout: str = "BTCHW") -> torch.Tensor:
    """Clips, each uint8 ``[T, 3, H, W]``, as one batch in ``layout`` (see the module docstring).

    Raises:
        ValueError: a clip that is not uint8, clips of different shapes, or an unknown layout.
    """
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    if not clips:
        empty = torch.empty((0, 0, 3, 0, 0), dtype=torch.uint8)
        return empty.as_subclass(tv_tensors.Video) if layout == "BTCHW" else empty.permute(0, 2, 1, 3, 4)
    first = clips[0]
    for position, clip in enumerate(clips):
        if clip.dtype != torch.uint8 or clip.ndim != 4:
            raise ValueError(f"video_collate: clip {position} is {clip.dtype} {list(clip.shape)}; clips must stay "
                             "uint8 [T, 3, H, W] until the device: remove ToDtype/Normalize from the transform and "
                             "normalise per batch (DevicePrefetcher)")
        if clip.shape != first.shape:
            raise ValueError(f"video_collate: clip {position} is {list(clip.shape)} but clip 0 is {list(first.shape)}; "
                             f"clips in a batch must share one size: {FIX}")
    frames, channels, height, width = first.shape
    frame = channels * height * width
    if first.stride(1) == 1 and channels > 1:  # [3, H, W] views of [H, W, 3] memory
        strides = (frames * frame, frame, 1, width * channels, channels)
    else:
        strides = (frames * frame, frame, height * width, width, 1)
    batch = torch.empty_strided((len(clips), frames, channels, height, width), strides, dtype=torch.uint8,
                                device=first.device)
    if batch.device.type == "cpu" and get_worker_info() is not None:
        batch.share_memory_()  # still unwritten: each clip is copied once, into what crosses to the main process
    torch.stack([clip.as_subclass(torch.Tensor) for clip in clips], out=batch)
    return batch.as_subclass(tv_tensors.Video) if layout == "BTCHW" else batch.permute(0, 2, 1, 3, 4)


@dataclass(frozen=True)
class ClipBatch:
    """The clips of a ``decode="device"`` batch, still to decode: ``DevicePrefetcher`` calls
    :meth:`decode_on` (:class:`recipes.core.contracts.protocols.DecodesOnDevice`)."""

    clips: tuple[EncodedClip, ...]
    layout: str = "BTCHW"

    def __len__(self) -> int:
        return len(self.clips)

    def decode_on(self, device: torch.device) -> torch.Tensor:
        """The clips decoded and transformed on ``device``, stacked in ``layout``."""
        return stack_clips([clip.decode(device) for clip in self.clips], self.layout)


def video_collate(batch: Sequence[dict[str, Any] | None], *, layout: str = "BTCHW") -> dict[str, Any]:
    """Stack clip items into a batch; ``None`` items (skipped) are dropped.

    Returns:
        ``video`` uint8 ``[B, T, 3, H, W]`` (a ``tv_tensors.Video``; ``layout="BCTHW"``: a plain
        ``[B, 3, T, H, W]``), or a :class:`ClipBatch` for ``decode="device"``; ``label`` int64 [B]
        (other targets as ``default_collate`` batches them); ``index``, ``clip`` int64 [B];
        ``frames`` int64 [B, T]; any other key of the items, batched by ``default_collate``.

    Raises:
        ValueError: clips of different shapes or dtypes; the message says which and the fix.
    """
    items = drop_skipped(batch)
    clips = [item["video"] for item in items]
    if clips and isinstance(clips[0], EncodedClip):
        if not all(isinstance(clip, EncodedClip) for clip in clips):
            raise ValueError("video_collate: a batch mixes decoded and encoded clips; give every source "
                             "decode='device'")
        video: Any = ClipBatch(tuple(clips), layout)
    else:
        video = stack_clips(clips, layout)
    labels = [item["label"] for item in items]
    plain = all(type(label) is int for label in labels)
    out = {
        "video": video,
        "label": torch.tensor(labels, dtype=torch.int64) if plain else default_collate(labels),
        "index": torch.tensor([item["index"] for item in items], dtype=torch.int64),
        "clip": torch.tensor([item["clip"] for item in items], dtype=torch.int64),
        "frames": torch.stack([item["frames"] for item in items]) if items else torch.empty((0, 0), dtype=torch.int64),
    }
    out.update(arrays.extra_columns(items, ITEM_KEYS, ITEM_KEYS, caller="video_collate"))
    return out


@dataclass(frozen=True)
class VideoCollate:
    """:func:`video_collate` with its layout as a field (a ``collate_fn`` that pickles and shows it)."""

    layout: str = "BTCHW"

    def __post_init__(self) -> None:
        if self.layout not in LAYOUTS:
            raise ValueError(f"layout must be one of {LAYOUTS}, got {self.layout!r}")

    def __call__(self, batch: Sequence[dict[str, Any] | None]) -> dict[str, Any]:
        return video_collate(batch, layout=self.layout)
