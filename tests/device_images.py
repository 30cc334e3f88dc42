"""decode="device" checks the domains share: grey-level distances, a full-resolution reference, and
the operations the prefetcher dispatches for a batch (the CPU's stand-in for CUDA kernel launches)."""

from __future__ import annotations

import collections
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

from recipes.core.pixels.device_decode import EncodedBatch, ImageParams
from recipes.core.pixels.images import decode_image

# decode="device" on the CPU against decode="worker": the same decodes, resized in float32 by the
# one and by torch's fixed-point uint8 kernel by the other
GREY_MEAN, GREY_MOST = 1.0, 4


def grey_levels(a: torch.Tensor, b: torch.Tensor) -> tuple[float, float]:
    """Mean and largest absolute difference of two image batches, in grey levels (0-255)."""
    difference = (a.detach().cpu().double() - b.detach().cpu().double()).abs()
    return float(difference.mean()), float(difference.max())


def assert_near_worker(device: torch.Tensor, worker: torch.Tensor) -> None:
    """``decode="device"`` uint8 pixels within :data:`GREY_MEAN` (mean) and :data:`GREY_MOST` of the worker path's."""
    assert device.shape == worker.shape and device.dtype == worker.dtype == torch.uint8
    mean, most = grey_levels(device, worker)
    assert mean <= GREY_MEAN and most <= GREY_MOST, (mean, most)


def reference(batch: EncodedBatch) -> list[torch.Tensor | None]:
    """Each sample of a raw ``decode="device"`` batch as a full-resolution float64 reference: the file
    decoded in full, the box drawn on its ``1 / scale`` decode taken ``scale`` times as large (its last
    row and column repeated where that decode's size was rounded up), resized in float64 with torch's
    antialiased bilinear filter, cropped and flipped. None for a sample the worker decoded."""
    offsets, scales = batch.offsets.tolist(), batch.scales.tolist()
    files = iter(zip(batch.image_params(), scales, offsets, offsets[1:]))
    out: list[torch.Tensor | None] = []
    for on_device in batch.on_device.tolist():
        if not on_device:
            out.append(None)
            continue
        params, scale, start, stop = next(files)
        image = decode_image(bytearray(batch.data[start:stop].numpy().tobytes())).double()
        out.append(_through(image, params, scale))
    return out


def _through(image: torch.Tensor, params: ImageParams, scale: int) -> torch.Tensor:
    top, left, height, width = (side * scale for side in params.box)
    box = image[:, top : top + height, left : left + width]
    short_rows, short_columns = height - box.shape[-2], width - box.shape[-1]
    box = torch.cat([box, box[:, -1:].expand(-1, short_rows, -1)], dim=1) if short_rows else box
    box = torch.cat([box, box[:, :, -1:].expand(-1, -1, short_columns)], dim=2) if short_columns else box
    resized = F.interpolate(box[None], size=params.resized, mode="bilinear", align_corners=False, antialias=True)[0]
    top, left, height, width = params.crop
    crop = resized[:, top : top + height, left : left + width]
    return crop.flip(-1) if params.flip else crop


def distance_to_reference(pixels: torch.Tensor, references: list[torch.Tensor | None]) -> float:
    """Mean absolute difference, in grey levels, of a batch's device-decoded samples from their references."""
    rows = [(row, ref) for row, ref in zip(pixels, references) if ref is not None]
    assert rows, "no sample of the batch went to the device"
    return float(torch.stack([(row.cpu().double() - ref).abs().mean() for row, ref in rows]).mean())


class CountedOperations(TorchDispatchMode):
    """Counts the torch operations dispatched inside the block, by name (``aten.bmm.default``...)."""

    def __init__(self) -> None:
        super().__init__()
        self.counts: collections.Counter[str] = collections.Counter()

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        self.counts[str(func)] += 1
        return func(*args, **(kwargs or {}))


def operations(prepare: Callable[[Any], Any], batch: Any) -> collections.Counter[str]:
    """The operations ``prepare(batch)`` dispatches, by name."""
    with CountedOperations() as counted:
        prepare(batch)
    return counted.counts
