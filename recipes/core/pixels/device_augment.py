"""``decode="device"``, the device side: decode a batch, then crop, resize and flip it as one piece of work.

    pixels, keep = decode_batch(encoded_batch, "cuda")   # uint8 [B,3,H,W], channels-last, on the GPU

:class:`recipes.core.loading.device.DevicePrefetcher` calls :func:`decode_encoded` on every raw batch, on
its side stream, before it normalises: the uint8 batch the worker path's collate would have made.

How, in a number of operations that does not grow with the batch (on CUDA, kernel launches):
1. The files are decoded in one call (nvJPEG) and zero-padded into one ``[J,3,H,W]`` batch. On
   the CPU each file is decoded by the worker path's decoder, at the scale the worker path decodes
   it at (``draft_size``), and copied into the batch by NumPy.
2. Each sample's box, resize, second crop and flip become two matrices of weights, one a side,
   built on the device from parameters that arrive in one pinned copy: the antialiased bilinear
   (triangle) filter torch's resize uses, stretched over the box, read backwards where flipped.
3. Two batched matrix products resize the whole batch in float32; it is rounded to uint8.

On the CPU the pixels are the worker path's decodes, resized in float32 where the worker path's
uint8 kernel works in fixed point: within a grey level on average, a few at most. nvJPEG has no
reduced-scale decode: a JPEG the worker path decodes at ``1 / s`` is decoded in full and its
weights span ``s`` times the box (the last row and column standing for the reduced decode's
rounded-up edge), nearer a full-resolution reference. TF32 products
(``torch.backends.cuda.matmul.allow_tf32``) change about 3% of the pixels by one grey level.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from recipes.core.pixels.device_decode import EncodedBatch
from recipes.core.contracts.errors import DataError, skip_or_raise
from recipes.core.pixels.image_headers import header_size
from recipes.core.pixels.images import decode_image, decode_jpegs
from recipes.core.contracts.nested import leaves, map_leaves

# the rows of a batch's weight table (:func:`weight_table`), each [J,2]: per sample and side (0:
# its rows, 1: its columns), where output pixel o is centred in the decoded image (ORIGIN + SLOPE * o,
# less half a pixel), the filter's reciprocal half-width, the box [START, END) and the image's SIZE
ORIGIN, SLOPE, INVERSE, START, END, SIZE = range(6)


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
    scales = np.ones(len(batch.params), dtype=np.int64) if batch.scales is None else np.array(batch.scales.tolist())
    images = _decode_all(batch, device, scales)
    kept = np.array([image is not None for image in images], dtype=bool)
    flags = iter(kept.tolist())
    keep = [next(flags) if from_device else True for from_device in batch.on_device.tolist()]
    worker = batch.decoded.to(device, non_blocking=batch.decoded.is_pinned()) if len(batch.decoded) else None
    if kept.any():
        # nvJPEG decodes in full, so a box drawn on a 1/s decode spans s times as many pixels there
        factors = np.ones_like(scales) if device.type == "cpu" else scales
        decoded = [image for image in images if image is not None]
        pixels = augment_images(decoded, np.array(batch.params.tolist())[kept], factors[kept])
        if worker is not None:
            pixels = torch.cat([pixels, worker])
    elif worker is not None:
        pixels = worker
    else:  # every sample dropped
        height, width = batch.image_params()[0].output_size
        return torch.empty((0, 3, height, width), dtype=torch.uint8, device=device), keep
    if worker is not None or not kept.all():  # rows back in batch order
        pixels = pixels.index_select(0, _to_device(_order(np.array(batch.on_device.tolist()), kept), device))
    return pixels.contiguous(memory_format=torch.channels_last), keep


def augment_images(
    images: list[torch.Tensor], params: np.ndarray, scales: np.ndarray | None = None
) -> torch.Tensor:
    """Decoded uint8 ``[3,H,W]`` images, all on one device, through their parameters, as one batch.

    Args:
        images: the decoded images, any sizes.
        params: int [J,11], a row of :class:`recipes.core.pixels.device_decode.ImageParams` a sample;
            every row's output size must be the same.
        scales: int [J]; a sample's parameters were drawn on its image decoded at ``1 / scale``
            (None: all 1).

    Returns:
        uint8 [J,3,h,w], channels-last memory.
    """
    params = np.asarray(params, dtype=np.int64).reshape(len(images), 11)
    scales = np.ones(len(images), dtype=np.int64) if scales is None else np.asarray(scales, dtype=np.int64)
    outputs = {(int(h), int(w)) for h, w in params[:, 8:10]}
    if len(outputs) > 1:
        raise ValueError(f"one batch has one output size; got {sorted(outputs)}")
    (out_height, out_width), = outputs
    sizes = np.array([image.shape[-2:] for image in images], dtype=np.int64)
    table = weight_table(params, scales, sizes)
    height, width = sizes.max(0).tolist()
    # every pixel a weight may reach: the padded images, and boxes past a reduced decode's edge
    span = int(max(height, width, table[END].max()))
    past_edge = bool((table[END] > table[SIZE]).any())
    device_table = _to_device(table, images[0].device)
    weights = resize_weights(device_table, max(out_height, out_width), span, past_edge=past_edge)
    rows, columns = weights[:, 0, :out_height, :height], weights[:, 1, :out_width, :width]
    pixels = pad_images(images, device_table[SIZE]).to(torch.float32).view(len(images), 3 * height, width)
    # two batched products, no copy between: every column resized ([J,w,W] @ [J,W,3H] -> [J,w,3H]),
    # then every row ([J,3w,H] @ [J,H,h] -> [J,3w,h]), which leaves the batch as [J,w,3,h]
    resized = torch.bmm(columns, pixels.mT)
    resized = torch.bmm(resized.view(len(images), 3 * out_width, height), rows.mT)
    resized = resized.round_().clamp_(0, 255).view(len(images), out_width, 3, out_height).permute(0, 2, 3, 1)
    out = torch.empty(resized.shape, dtype=torch.uint8, device=resized.device, memory_format=torch.channels_last)
    return out.copy_(resized)


def weight_table(params: np.ndarray, scales: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """float32 [6,J,2]: the numbers :func:`resize_weights` reads (rows ``ORIGIN`` ... ``SIZE``),
    per sample and side, from its :class:`recipes.core.pixels.device_decode.ImageParams` row, the
    ``scales`` its image was decoded at beyond the parameters' and its decoded ``sizes`` [J,2].

    Output pixel ``o`` of a side is pixel ``r = crop + o`` of the resize (``crop + out - 1 - o``
    flipped), centred at ``start + (r + 0.5) * length / resized`` in the image (torch's
    ``align_corners=False``), which pixel ``k`` is ``(k + 0.5 - centre) * inverse`` filter
    half-widths away from.
    """
    params = params.astype(np.float64)
    top, left, height, width, resized_height, resized_width, crop_top, crop_left, out_height, out_width, flip = params.T
    start = np.stack([top, left], axis=-1) * scales[:, None]
    length = np.stack([height, width], axis=-1) * scales[:, None]
    scale = length / np.stack([resized_height, resized_width], axis=-1)
    step = np.stack([np.ones_like(flip), 1 - 2 * flip], axis=-1)  # the flip mirrors columns only
    first = np.stack([crop_top, crop_left + flip * (out_width - 1)], axis=-1)
    origin = start + scale * (first + 0.5) - 0.5
    inverse = 1 / np.maximum(scale, 1.0)  # a downscale widens the filter: that is the antialiasing
    return np.stack([origin, scale * step, inverse, start, start + length, sizes]).astype(np.float32)


def resize_weights(table: torch.Tensor, out: int, span: int, *, past_edge: bool = False) -> torch.Tensor:
    """float32 [J,2,out,span]: ``[j, side, o, k]`` is the weight of pixel ``k`` of sample ``j``'s
    decoded image (along that side) in its output pixel ``o``, from the table :func:`weight_table`
    makes, on the device; rows past a side's output are junk.

    Torch's antialiased bilinear resize as weights (aten's ``_upsample_bilinear2d_aa``): a triangle
    over the box, one pixel wide on each side of the centre, or as wide as the downscale's ratio,
    normalised. ``past_edge``: some box ends past its image (a reduced decode rounds its size
    up): the weights past the image's last pixel move onto it, as if that pixel were repeated.
    """
    origin, slope, inverse, start, end, size = table[..., None, None].unbind(0)  # each [J,2,1,1]
    o = torch.arange(out, dtype=torch.float32, device=table.device)[:, None]
    k = torch.arange(span, dtype=torch.float32, device=table.device)
    weights = (1 - ((k - origin - slope * o) * inverse).abs_()).clamp_(min=0) * ((k >= start) & (k < end))
    weights = weights / weights.sum(-1, keepdim=True)
    if past_edge:
        past = k >= size
        tail = (weights * past).sum(-1, keepdim=True)
        weights = weights.masked_fill(past, 0) + tail * (k == size - 1)
    return weights


def pad_images(images: list[torch.Tensor], sizes: torch.Tensor) -> torch.Tensor:
    """uint8 [J,3,H,W], contiguous: the images at the top left of a zero batch as large as the
    largest; ``sizes`` [J,2] are their heights and widths, on their device.

    On the CPU the decoders' memory is copied by NumPy (no torch operation an image); elsewhere the
    images are joined end to end and scattered into place, one operation for the batch.
    """
    height, width = max(image.shape[-2] for image in images), max(image.shape[-1] for image in images)
    if images[0].device.type != "cpu":
        return scatter_images(images, sizes, height, width)
    out = np.zeros((len(images), 3, height, width), dtype=np.uint8)  # NumPy's own memory: always writable
    for j, image in enumerate(images):
        # DLPack: the decoder's memory as NumPy sees it, strides and all, with no torch operation. Only
        # read: NumPy before 2.2 marks such a view read-only, so nothing is ever written through one
        out[j, :, : image.shape[-2], : image.shape[-1]] = np.from_dlpack(image)
    return torch.from_numpy(out)


def scatter_images(images: list[torch.Tensor], sizes: torch.Tensor, height: int, width: int) -> torch.Tensor:
    """:func:`pad_images` on any device: the images' pixels end to end (a view of each, one copy),
    scattered where a mask of each image's rows and columns is set, in the mask's order (j, c, y, x)."""
    pixels = torch.cat([image.reshape(-1) for image in images])
    heights, widths = sizes.view(-1, 2, 1, 1).unbind(1)  # [J,1,1] each
    inside = (torch.arange(height, device=sizes.device)[:, None] < heights) & (torch.arange(width, device=sizes.device) < widths)
    out = torch.zeros((len(images), 3, height, width), dtype=torch.uint8, device=sizes.device)
    return out.masked_scatter_(inside[:, None], pixels)


def _to_device(numbers: np.ndarray, device: torch.device) -> torch.Tensor:
    """A host array on ``device``: through pinned memory to CUDA, so the copy does not wait."""
    tensor = torch.from_numpy(np.ascontiguousarray(numbers))
    if device.type == "cuda":
        return tensor.pin_memory().to(device, non_blocking=True)
    return tensor.to(device)


def _order(on_device: np.ndarray, kept: np.ndarray) -> np.ndarray:
    """int64: for each sample kept, in batch order, its row in ``[device-decoded kept; worker-decoded]``."""
    rows = np.empty(len(on_device), dtype=np.int64)
    rows[on_device] = np.cumsum(kept) - 1
    rows[~on_device] = kept.sum() + np.arange((~on_device).sum())
    dropped = np.zeros(len(on_device), dtype=bool)
    dropped[on_device] = ~kept
    return rows[~dropped]


def _decode_all(batch: EncodedBatch, device: torch.device, scales: np.ndarray) -> list[torch.Tensor | None]:
    """Every encoded file of ``batch`` decoded on ``device``; None for a file none takes (after the
    policy). On the CPU a file with a scale > 1 is decoded at that scale, by the worker path's
    decoder; the rest, and every file elsewhere, in full (:func:`_decode_full`)."""
    offsets = np.array(batch.offsets.tolist())
    encoded = batch.data.split(np.diff(offsets).tolist())  # views, one operation
    reduced = [device.type == "cpu" and scale > 1 for scale in scales.tolist()]
    full = [j for j, flag in enumerate(reduced) if not flag]
    images: list[torch.Tensor | None] = [None] * len(encoded)
    decoded = _decode_full([encoded[j] for j in full], [batch.sources[j] for j in full], device, batch.on_error)
    for j, image in zip(full, decoded):
        images[j] = image
    for j in (j for j, flag in enumerate(reduced) if flag):
        images[j] = _decode_reduced(encoded[j], batch.sources[j], int(scales[j]), batch.on_error)
    return images


def _decode_reduced(data: torch.Tensor, source: str, scale: int, on_error: str) -> torch.Tensor | None:
    """``decode_image`` at ``1 / scale``, as the worker path decodes the file: a draft size of the
    file's size over ``scale`` makes PIL pick that scale again (recipes.core.pixels.device_decode.draft_scale)."""
    file = bytearray(np.from_dlpack(data).tobytes())
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
            images.append(decode_image(bytearray(np.from_dlpack(data).tobytes()), source=source).to(device))
        except DataError as error:
            images.append(skip_or_raise(error, on_error))
    return images
