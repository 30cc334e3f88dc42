"""``decode="device"``, the device side: decode, crop, resize and flip a batch where it will be used.

    pixels, keep = decode_batch(encoded_batch, "cuda")   # uint8 [B,3,H,W], channels-last, on the GPU

:class:`recipes.core.device.DevicePrefetcher` calls :func:`decode_encoded` on every raw batch,
on its side stream, before it normalises: the result is the uint8 batch the worker path's
collate would have made, now on the device, so normalisation, dtypes and layouts are the same.

Per sample, in the worker path's order: the crop box (a view), an antialiased bilinear resize,
the crop after it (a view), the flip. On the CPU the resize is torch's uint8 kernel, the one
the worker path runs, and a JPEG the worker path decodes at reduced scale (``draft_size``) is
decoded at that scale by the same decoder, so batches equal ``decode="worker"`` exactly, whatever
the image size. CUDA has no uint8 antialiased kernel: the crop is resized in float32 and rounded,
as torchvision's own ``v2.Resize`` does on a CUDA tensor (within one grey level of the CPU's
fixed-point kernel). nvJPEG has no reduced-scale decode: such a JPEG is decoded in full and the
same region (its box scaled up, the edge repeated where the reduced size was rounded up) resized
once, on average under a grey level from the reduced decode's pixels with the CPU's kernels.
The parameters are host tensors read with ``tolist()``: nothing waits on the device per sample.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F

from recipes.core.device_decode import EncodedBatch, ImageParams
from recipes.core.errors import DataError, skip_or_raise
from recipes.core.image_headers import header_size
from recipes.core.images import decode_image, decode_jpegs
from recipes.core.nested import leaves, map_leaves


def decode_encoded(batch: Any, device: str | torch.device) -> Any:
    """``batch`` with every :class:`EncodedBatch` replaced by its decoded uint8 images on ``device``.

    Samples dropped under ``on_error="skip"`` (a file the header passed but no decoder takes)
    leave every per-sample field of the batch: each tensor or list as long as the batch.
    """
    if not any(isinstance(leaf, EncodedBatch) for _, leaf in leaves(batch)):
        return batch
    kept: list[list[bool]] = []

    def decode(leaf: Any) -> Any:
        if not isinstance(leaf, EncodedBatch):
            return leaf
        pixels, keep = decode_batch(leaf, device)
        kept.append(keep)
        return pixels

    size = next(len(leaf) for _, leaf in leaves(batch) if isinstance(leaf, EncodedBatch))
    batch = map_leaves(batch, decode)
    keep = [all(flags) for flags in zip(*kept)]
    if all(keep):
        return batch
    return _rows(batch, torch.tensor(keep), size)


def _rows(batch: Any, keep: torch.Tensor, size: int) -> Any:
    """``batch`` with only the kept rows of each per-sample field: a tensor or a list ``size`` long."""
    if isinstance(batch, torch.Tensor):
        return batch[keep.to(batch.device)] if batch.ndim and len(batch) == size else batch
    if isinstance(batch, list) and len(batch) == size:
        return [item for item, kept in zip(batch, keep.tolist()) if kept]
    if isinstance(batch, dict):
        return {key: _rows(value, keep, size) for key, value in batch.items()}
    if isinstance(batch, tuple):
        fields = [_rows(value, keep, size) for value in batch]
        return type(batch)(*fields) if hasattr(batch, "_fields") else type(batch)(fields)
    return batch


def decode_batch(batch: EncodedBatch, device: str | torch.device) -> tuple[torch.Tensor, list[bool]]:
    """Decode and augment one :class:`EncodedBatch` on ``device``.

    Returns:
        uint8 [B',3,H,W] (channels-last memory) of the samples kept, and one flag per sample:
        False for one dropped under ``on_error="skip"``.
    """
    device = torch.device(device)
    params = batch.image_params()
    scales = [1] * len(params) if batch.scales is None else batch.scales.tolist()
    images = _decode_all(batch, device, scales)
    # the CPU decodes at the worker path's reduced scale; nvJPEG in full, so boxes are scaled up
    factors = [1 if device.type == "cpu" else scale for scale in scales]
    on_device = batch.on_device.tolist()
    height, width = params[0].output_size if params else batch.decoded.shape[-2:]
    out = torch.empty((len(on_device), 3, height, width), dtype=torch.uint8, device=device)
    out = out.contiguous(memory_format=torch.channels_last)
    decoded = batch.decoded.to(device, non_blocking=batch.decoded.is_pinned())
    keep, encoded, worker = [], iter(zip(images, params, factors)), iter(decoded)
    for row, from_device in enumerate(on_device):
        if not from_device:
            out[row].copy_(next(worker))
            keep.append(True)
            continue
        image, sample, factor = next(encoded)
        keep.append(image is not None)
        if image is not None:
            out[row].copy_(augment(image, sample, scale=factor))
    return (out if all(keep) else out[torch.tensor(keep, device=device)]), keep


def augment(image: torch.Tensor, params: Sequence[int], *, scale: int = 1) -> torch.Tensor:
    """One decoded ``uint8 [3,H,W]`` image through its :class:`ImageParams` (or 11 ints in their
    order): the box, the resize, the crop, the flip.

    ``scale`` > 1: ``image`` is the full decode of a JPEG whose parameters were drawn on its
    ``1 / scale`` decode; the first box is scaled up to the same region of ``image``.
    """
    params = ImageParams(*params)
    top, left, height, width = params.box
    if scale > 1:
        image = _scaled_box(image, top, left, height, width, scale)
        top, left, height, width = 0, 0, height * scale, width * scale
    image = image[:, top : top + height, left : left + width]
    if params.resized != (height, width):
        image = resize(image, params.resized)
    top, left, height, width = params.crop
    image = image[:, top : top + height, left : left + width]
    return image.flip(-1) if params.flip else image


def _scaled_box(image: torch.Tensor, top: int, left: int, height: int, width: int, scale: int) -> torch.Tensor:
    """The region of a full decode that a box in its ``1 / scale`` decode covers: ``scale`` times the
    box, its last rows and columns repeated where the box ends in the reduced decode's rounded-up
    edge (a reduced decode's edge pixel stands for ``scale`` rows, the JPEG's edge-padded block)."""
    crop = image[:, top * scale : (top + height) * scale, left * scale : (left + width) * scale]
    short_rows, short_columns = height * scale - crop.shape[-2], width * scale - crop.shape[-1]
    if short_rows:
        crop = torch.cat([crop, crop[:, -1:].expand(-1, short_rows, -1)], dim=1)
    if short_columns:
        crop = torch.cat([crop, crop[:, :, -1:].expand(-1, -1, short_columns)], dim=2)
    return crop


def resize(image: torch.Tensor, size: tuple[int, int], *, in_float: bool | None = None) -> torch.Tensor:
    """Antialiased bilinear resize of a uint8 ``[3,H,W]`` image: torch's uint8 kernel on the CPU
    (the worker path's), float32 and rounding elsewhere (or wherever ``in_float`` asks)."""
    if in_float is None:
        in_float = image.device.type != "cpu"
    if not in_float:
        # dense [H,W,3] memory, the uint8 kernel's fast path, seen as [1,3,H,W]: made from [1,H,W,3]
        # so that its batch stride is not ambiguous, or torch would give CHW output, slower (pytorch #68430)
        hwc = image.permute(1, 2, 0).contiguous()[None].permute(0, 3, 1, 2)
        return F.interpolate(hwc, size=size, mode="bilinear", align_corners=False, antialias=True)[0]
    # plain CHW, read once by the cast: CUDA's antialiased kernel copies any other layout to it first
    out = F.interpolate(image[None].float(), size=size, mode="bilinear", align_corners=False, antialias=True)[0]
    return out.round_().clamp_(0, 255).to(torch.uint8)


def _decode_all(batch: EncodedBatch, device: torch.device, scales: list[int]) -> list[torch.Tensor | None]:
    """Every encoded file of ``batch`` decoded on ``device``; None for a file none takes (after the
    policy). On the CPU a file with a scale > 1 is decoded at that scale, by the worker path's
    decoder; the rest, and every file elsewhere, in full (:func:`_decode_full`)."""
    offsets = batch.offsets.tolist()
    encoded = [batch.data[start:stop] for start, stop in zip(offsets, offsets[1:])]
    reduced = [device.type == "cpu" and scale > 1 for scale in scales]
    full = [j for j, flag in enumerate(reduced) if not flag]
    images: list[torch.Tensor | None] = [None] * len(encoded)
    decoded = _decode_full([encoded[j] for j in full], [batch.sources[j] for j in full], device, batch.on_error)
    for j, image in zip(full, decoded):
        images[j] = image
    for j in (j for j, flag in enumerate(reduced) if flag):
        images[j] = _decode_reduced(encoded[j], batch.sources[j], scales[j], batch.on_error)
    return images


def _decode_reduced(data: torch.Tensor, source: str, scale: int, on_error: str) -> torch.Tensor | None:
    """``decode_image`` at ``1 / scale``, as the worker path decodes the file: a draft size of the
    file's size over ``scale`` makes PIL pick that scale again (recipes.core.device_decode.draft_scale)."""
    file = bytearray(data.numpy().tobytes())
    size = header_size(file)
    try:
        if size is None:
            raise DataError(f"{source}: cannot decode image (header unreadable)")
        return decode_image(file, source=source, draft_size=(size[0] // scale, size[1] // scale), contiguous=False)
    except DataError as error:
        return skip_or_raise(error, on_error)


def _decode_full(
    encoded: list[torch.Tensor], sources: list[str], device: torch.device, on_error: str
) -> list[torch.Tensor | None]:
    """Files decoded in full on ``device``: one batched call, and only if that fails, one call a
    file, then the CPU decoder; None for a file none takes (after the policy)."""
    if not encoded:
        return []
    try:
        return decode_jpegs(encoded, device, sources)
    except DataError:
        pass
    images: list[torch.Tensor | None] = []
    for data, source in zip(encoded, sources):
        try:
            images.append(decode_jpegs([data], device, [source])[0])
            continue
        except DataError:
            pass
        try:  # the worker path's decoder, on the CPU
            images.append(decode_image(bytearray(data.numpy().tobytes()), source=source).to(device))
        except DataError as error:
            images.append(skip_or_raise(error, on_error))
    return images
