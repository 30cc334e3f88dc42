"""Moving batches to the device, and turning uint8 images into normalised floats there.

    for batch in DevicePrefetcher(loader, "cuda"):      # images arrive as normalised float32
        loss = model(batch["pixel_values"]) ...

Images stay ``uint8`` from the file to the GPU: a quarter of the bytes of float32 through the
collate, the pinned-memory copy and the PCIe transfer (timm's "fast collate" idea). On CUDA the
prefetcher copies batch k+1 on a side stream while the model works on batch k, then normalises
it there. On CPU it does the same conversion synchronously, once per batch, into new memory: a
batch it has handed out is never written again, whatever the caller keeps of it.

With ``decode="device"`` loaders, the raw batch holds encoded JPEGs and per-sample crop and flip
parameters (:mod:`recipes.core.pixels.device_decode`); the prefetcher decodes and augments them on its
device first (:mod:`recipes.core.pixels.device_augment`), on the side stream, then goes on as above.

What counts as an image: a ``tv_tensors.Image`` or ``tv_tensors.Video`` (``[..., C, H, W]``) of
dtype uint8, or a plain uint8 tensor ``[B, C, H, W]`` or ``[B, C, T, H, W]``, with C = len(mean);
its memory order is kept. A batch field that decodes itself (:class:`recipes.core.contracts.protocols.DecodesOnDevice`)
is decoded first. Masks (``tv_tensors.Mask``), token ids and labels are moved but not converted.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterator, Sequence
from typing import Any

import torch
from torchvision import tv_tensors

from recipes.core.contracts.nested import map_leaves, map_tensors, tensors_in
from recipes.core.contracts.protocols import DecodesOnDevice
from recipes.core.pixels.device_augment import decode_encoded

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


def to_device(batch: Any, device: str | torch.device, non_blocking: bool = True) -> Any:
    """Move every tensor in a nested dict/list/tuple to ``device``; other leaves are kept.

    tv_tensors keep their class and metadata (``BoundingBoxes.canvas_size``...). ``non_blocking``
    is used only where it is safe and useful: a pinned CPU tensor going to CUDA. Anything else
    (pageable memory, device-to-host) is copied synchronously, so the result is always ready.
    """
    device = torch.device(device)

    def move(tensor: torch.Tensor) -> torch.Tensor:
        asynchronous = non_blocking and device.type == "cuda" and tensor.device.type == "cpu" and tensor.is_pinned()
        return tensor.to(device, non_blocking=asynchronous)

    return map_tensors(batch, move)


def normalize_images(
    batch: Any,
    mean: Sequence[float] = IMAGENET_MEAN,
    std: Sequence[float] = IMAGENET_STD,
    dtype: torch.dtype = torch.float32,
) -> Any:
    """Turn every uint8 image in a nested batch into ``(x / 255 - mean) / std`` of ``dtype``.

    The memory layout is kept: a channels-last batch gives a channels-last float batch.
    """
    mean, std = tuple(mean), tuple(std)
    return map_tensors(batch, lambda tensor: _normalize_image(tensor, mean, std, dtype))


def _normalize_image(tensor: torch.Tensor, mean: tuple, std: tuple, dtype: torch.dtype) -> torch.Tensor:
    """One tensor of :func:`normalize_images`: a new float tensor if it is an image, else itself."""
    if not _is_image(tensor, len(mean)):
        return tensor
    plain = tensor.as_subclass(torch.Tensor)
    channel = plain.ndim - 3 if isinstance(tensor, (tv_tensors.Image, tv_tensors.Video)) else 1
    # the cast, into new memory in the same layout (C order when the tensor is not dense)
    out = plain.to(dtype, memory_format=torch.preserve_format, copy=True)
    scale, shift = _affine(mean, std, dtype, plain.device)
    order = sorted(range(out.ndim), key=out.stride, reverse=True)
    if plain.device.type != "cpu":
        shape = [-1 if dim == channel else 1 for dim in range(out.ndim)]
        torch.addcmul(shift.view(shape), out, scale.view(shape), out=out)  # one fused kernel, in place
    elif out.is_contiguous():
        _multiply_add_planes(out, channel, mean, std)
    elif order[-1] == channel and out.permute(order).is_contiguous():
        _multiply_add_rows(out.permute(order), scale, shift)
    else:  # another dense layout: a broadcast, slower on CPU but right
        shape = [-1 if dim == channel else 1 for dim in range(out.ndim)]
        torch.addcmul(shift.view(shape), out, scale.view(shape), out=out)
    return tv_tensors.wrap(out, like=tensor) if isinstance(tensor, (tv_tensors.Image, tv_tensors.Video)) else out


@functools.lru_cache(maxsize=16)
def _affine(mean: tuple[float, ...], std: tuple[float, ...], dtype: torch.dtype, device: torch.device):
    """(x/255 - m)/s == x * (1/(255 s)) + (-m/s): one multiply-add after the cast; [C] each, cached
    so a CUDA batch does not wait on two tiny host-to-device copies."""
    scale = torch.tensor([1 / (255 * s) for s in std], dtype=dtype, device=device)
    shift = torch.tensor([-m / s for m, s in zip(mean, std)], dtype=dtype, device=device)
    return scale, shift


def _multiply_add_rows(inner: torch.Tensor, scale: torch.Tensor, shift: torch.Tensor) -> None:
    """``inner = inner * scale + shift`` per channel, in place, where ``inner`` is a contiguous view
    with the channels last (an NHWC image batch, a clip batch of channels-last frames).

    A [C,1,1] broadcast over such memory runs ~3x slower on CPU than over NCHW (its innermost
    loop is C long). Viewed as rows of W*C values, the per-channel constants repeat W times along
    each row, and the multiply-add vectorises as well as in NCHW.
    """
    width = inner.shape[-2]
    rows = inner.view(-1, width * inner.shape[-1])
    torch.addcmul(shift.repeat(width), rows, scale.repeat(width), out=rows)


def _multiply_add_planes(out: torch.Tensor, channel: int, mean: tuple, std: tuple) -> None:
    """CPU, C order: ``out = (out / 255 - mean) / std`` in place, a multiply and an add per plane.

    On CPU a multiply-add that broadcasts [C,1,1] constants over NCHW runs ~3x slower than
    these plain scalar passes over contiguous planes, and the main process's time is taken
    from the workers.
    """
    planes = out.view(-1, out.shape[channel], math.prod(out.shape[channel + 1 :]))
    for index, (m, s) in enumerate(zip(mean, std)):
        planes[:, index].mul_(1 / (255 * s)).add_(-m / s)


def _is_image(tensor: torch.Tensor, channels: int) -> bool:
    if tensor.dtype != torch.uint8 or isinstance(tensor, tv_tensors.Mask):
        return False
    if isinstance(tensor, (tv_tensors.Image, tv_tensors.Video)):
        return tensor.ndim >= 3 and tensor.shape[-3] == channels
    return tensor.ndim in (4, 5) and tensor.shape[1] == channels


def decode_leaves(batch: Any, device: torch.device) -> Any:
    """``batch`` with every field that decodes itself (:class:`recipes.core.contracts.protocols.DecodesOnDevice`)
    replaced by what it decodes to on ``device``."""
    return map_leaves(batch, lambda leaf: leaf.decode_on(device) if isinstance(leaf, DecodesOnDevice) else leaf)


def _with_threads(threads: int, function: Any, *args: Any) -> Any:
    """Call ``function`` with torch's intra-op thread count set to ``threads``, then restore it."""
    previous = torch.get_num_threads()
    if threads == previous:
        return function(*args)
    torch.set_num_threads(threads)
    try:
        return function(*args)
    finally:
        torch.set_num_threads(previous)


def _record_stream(batch: Any, stream: torch.cuda.Stream) -> None:
    """Tell the caching allocator that ``stream`` uses these tensors (allocated on another)."""
    for tensor in tensors_in(batch):
        if tensor.is_cuda:
            tensor.record_stream(stream)


class DevicePrefetcher:
    """Iterate a loader with batches already on ``device`` and images normalised.

    Args:
        loader: any iterable of batches (a DataLoader, usually with ``pin_memory=True``).
        device: target device; on CUDA the copy of the next batch overlaps the current step.
        mean, std: per-channel normalisation; ``normalize=False`` moves images as uint8.
        dtype: float dtype for images (``torch.bfloat16`` halves the activation memory).

    ``state_dict()`` / ``load_state_dict()`` pass through to a stateful loader and describe the
    batches the *caller* has consumed, not the one prefetched ahead.

    Every batch it yields is new memory, and neither it nor the raw batch it came from is ever
    written again: keep, log or send on whatever you like.
    """

    def __init__(
        self,
        loader: Any,
        device: str | torch.device,
        *,
        mean: Sequence[float] = IMAGENET_MEAN,
        std: Sequence[float] = IMAGENET_STD,
        normalize: bool = True,
        dtype: torch.dtype = torch.float32,
    ) -> None:
        self.loader = loader
        self.device = torch.device(device)
        self.mean, self.std, self.normalize, self.dtype = tuple(mean), tuple(std), normalize, dtype
        self._state: dict[str, Any] | None = None

    def __len__(self) -> int:
        return len(self.loader)

    def state_dict(self) -> dict[str, Any]:
        return self._state if self._state is not None else self.loader.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._state = None
        self.loader.load_state_dict(state)

    def _prepare(self, batch: Any) -> Any:
        batch = decode_encoded(batch, self.device)  # decode="device": decode, crop, resize, flip here
        batch = decode_leaves(batch, self.device)  # fields that decode themselves (a domain's clips)
        batch = to_device(batch, self.device)
        return normalize_images(batch, self.mean, self.std, self.dtype) if self.normalize else batch

    def _fetch(self, batches: Iterator[Any]) -> tuple[bool, Any, dict[str, Any] | None]:
        """Next raw batch, and the loader state from just before it was drawn."""
        state = self.loader.state_dict() if hasattr(self.loader, "state_dict") else None
        try:
            return True, next(batches), state
        except StopIteration:
            return False, None, state

    def __iter__(self) -> Iterator[Any]:
        self._state = None
        batches = iter(self.loader)
        if self.device.type != "cuda":
            # With loader workers on CPU, every core is already busy loading: normalise on one
            # thread. Intra-op threads would spin beside the workers and slow the loader more
            # than they speed this up (benchmarks/README.md).
            threads = 1 if getattr(self.loader, "num_workers", 0) > 0 else torch.get_num_threads()
            for batch in batches:
                yield _with_threads(threads, self._prepare, batch)
            return
        stream = torch.cuda.Stream(self.device)
        ok, batch, _ = self._fetch(batches)
        if ok:
            with torch.cuda.stream(stream):
                batch = self._prepare(batch)
        while ok:
            current = torch.cuda.current_stream(self.device)
            current.wait_stream(stream)  # the copy and normalisation of `batch` are done
            _record_stream(batch, current)
            ok, upcoming, self._state = self._fetch(batches)  # state right after `batch`
            if ok:
                with torch.cuda.stream(stream):
                    upcoming = self._prepare(upcoming)  # overlaps the caller's step on `batch`
            yield batch
            batch = upcoming
        self._state = None
