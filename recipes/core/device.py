"""Moving batches to the device, and turning uint8 images into normalised floats there.

    for batch in DevicePrefetcher(loader, "cuda"):      # images arrive as normalised float32
        loss = model(batch["pixel_values"]) ...

Images stay ``uint8`` from the file to the GPU: a quarter of the bytes of float32 through the
collate, the pinned-memory copy and the PCIe transfer (timm's "fast collate" idea). On CUDA the
prefetcher copies batch k+1 on a side stream while the model works on batch k, then normalises
it there. On CPU it does the same conversion synchronously, once per batch, and hands the uint8
batch's shared memory back to the worker that made it (``recipes.core.batching``).

What counts as an image: a ``tv_tensors.Image`` of dtype uint8, or a plain uint8 tensor shaped
``[B, C, H, W]`` with C = len(mean). Masks (``tv_tensors.Mask``), token ids and labels are moved
but not converted.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence
from typing import Any

import torch
from torchvision import tv_tensors

from recipes.core.batching import IN_USE, RELEASED, batch_tag

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


def to_device(batch: Any, device: str | torch.device, non_blocking: bool = True) -> Any:
    """Move every tensor in a nested dict/list/tuple to ``device``; other leaves are kept.

    tv_tensors keep their class and metadata (``BoundingBoxes.canvas_size``...). ``non_blocking``
    is used only where it is safe and useful: a pinned CPU tensor going to CUDA. Anything else
    (pageable memory, device-to-host) is copied synchronously, so the result is always ready.
    """
    device = torch.device(device)
    if isinstance(batch, torch.Tensor):
        asynchronous = non_blocking and device.type == "cuda" and batch.device.type == "cpu" and batch.is_pinned()
        return batch.to(device, non_blocking=asynchronous)
    if isinstance(batch, dict):
        return {key: to_device(value, device, non_blocking) for key, value in batch.items()}
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):  # namedtuple
        return type(batch)(*(to_device(value, device, non_blocking) for value in batch))
    if isinstance(batch, (list, tuple)):
        return type(batch)(to_device(value, device, non_blocking) for value in batch)
    return batch


def normalize_images(
    batch: Any,
    mean: Sequence[float] = IMAGENET_MEAN,
    std: Sequence[float] = IMAGENET_STD,
    dtype: torch.dtype = torch.float32,
) -> Any:
    """Turn every uint8 image in a nested batch into ``(x / 255 - mean) / std`` of ``dtype``.

    The memory layout is kept: a channels-last batch gives a channels-last float batch.
    """
    return _normalize(batch, tuple(mean), tuple(std), dtype, torch.empty_strided)


def _normalize(batch: Any, mean: tuple, std: tuple, dtype: torch.dtype, empty: Any) -> Any:
    """:func:`normalize_images`, with CPU outputs allocated by ``empty(size, stride, dtype=)``."""
    if isinstance(batch, torch.Tensor):
        if not _is_image(batch, len(mean)):
            return batch
        plain = batch.as_subclass(torch.Tensor)
        nhwc = plain.ndim == 4 and not plain.is_contiguous() and plain.is_contiguous(memory_format=torch.channels_last)
        if plain.device.type == "cpu":
            strides = plain.stride() if nhwc else _dense_strides(plain.shape)
            out = empty(plain.shape, strides, dtype=dtype).copy_(plain)  # the cast
        else:
            out = plain.to(dtype, copy=True)  # the cast, in the same layout
        scale, shift = _affine(mean, std, dtype, plain.device)
        if nhwc:
            _multiply_add_rows(out, scale, shift)
        elif plain.device.type == "cpu":
            _multiply_add_planes(out, mean, std)
        else:
            torch.addcmul(shift, out, scale, out=out)  # one fused kernel, in place
        return tv_tensors.wrap(out, like=batch) if isinstance(batch, tv_tensors.Image) else out
    if isinstance(batch, dict):
        return {key: _normalize(value, mean, std, dtype, empty) for key, value in batch.items()}
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):
        return type(batch)(*(_normalize(value, mean, std, dtype, empty) for value in batch))
    if isinstance(batch, (list, tuple)):
        return type(batch)(_normalize(value, mean, std, dtype, empty) for value in batch)
    return batch


@functools.lru_cache(maxsize=16)
def _affine(mean: tuple[float, ...], std: tuple[float, ...], dtype: torch.dtype, device: torch.device):
    """(x/255 - m)/s == x * (1/(255 s)) + (-m/s): one multiply-add after the cast; cached so a
    CUDA batch does not wait on two tiny host-to-device copies."""
    scale = torch.tensor([1 / (255 * s) for s in std], dtype=dtype, device=device).view(-1, 1, 1)
    shift = torch.tensor([-m / s for m, s in zip(mean, std)], dtype=dtype, device=device).view(-1, 1, 1)
    return scale, shift


def _multiply_add_rows(out: torch.Tensor, scale: torch.Tensor, shift: torch.Tensor) -> None:
    """``out = out * scale + shift`` per channel, in place, on a channels-last [B,C,H,W] batch.

    A [C,1,1] broadcast over NHWC memory runs ~3x slower on CPU than over NCHW (its innermost
    loop is C long). Viewed as rows of W*C values, the per-channel constants repeat W times along
    each row, and the multiply-add vectorises as well as in NCHW.
    """
    n, c, h, w = out.shape
    rows = out.permute(0, 2, 3, 1).view(n * h, w * c)  # a view of the NHWC memory
    torch.addcmul(shift.view(-1).repeat(w), rows, scale.view(-1).repeat(w), out=rows)


def _multiply_add_planes(out: torch.Tensor, mean: tuple, std: tuple) -> None:
    """CPU, NCHW: ``out = (out / 255 - mean) / std`` in place, a multiply and an add per plane.

    On CPU a multiply-add that broadcasts [C,1,1] constants over NCHW runs ~3x slower than
    these plain scalar passes over contiguous planes (4.4-12 ms against 2.7-3.1 ms for a
    32x3x224x224 batch, one thread), and the main process's time is taken from the workers.
    """
    planes = out.view(-1, out.shape[-3], out.shape[-2] * out.shape[-1])
    for channel, (m, s) in enumerate(zip(mean, std)):
        planes[:, channel].mul_(1 / (255 * s)).add_(-m / s)


def _dense_strides(shape: Sequence[int]) -> tuple[int, ...]:
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= max(size, 1)
    return tuple(reversed(strides))


class _Recycler:
    """CPU float batches for :class:`DevicePrefetcher`, reused once the caller has let go of them.

    A fresh 32x3x224x224 float32 batch is 19 MB of new pages: ~4,700 page faults and the
    kernel zeroing them cost 4-11 ms per batch in the main process, 2-5x the normalisation
    itself, all of it taken from the loader workers on a busy CPU (``benchmarks/vision.py``:
    main-process system time 0.30 -> 0.07 ms an image). A buffer is handed out again only when
    no tensor, view or numpy array the caller kept still refers to its memory: torch counts
    the tensors using a storage, and the caller gets an alias, never the pooled tensor itself.
    A caller that keeps every batch (a list of outputs) just gets fresh memory each time; one
    that keeps only ``batch.untyped_storage()``, without a tensor, is not counted. The pool
    holds at most ``keep`` batches (57 MB for the batch above) while the prefetcher lives.
    """

    def __init__(self, keep: int = 3) -> None:
        if keep < 1:
            raise ValueError(f"keep must be at least 1, got {keep}")
        self.keep = keep
        self._pool: list[tuple[torch.Tensor, int]] = []  # (buffer, its storage use count when idle)

    def __call__(self, size: Sequence[int], stride: Sequence[int], *, dtype: torch.dtype) -> torch.Tensor:
        size, stride = tuple(size), tuple(stride)
        for buffer, idle in self._pool:
            if buffer.shape == size and buffer.stride() == stride and buffer.dtype == dtype and _storage_uses(buffer) == idle:
                return buffer.detach()  # a new alias: while the caller holds it, the count is higher
        buffer = torch.empty_strided(size, stride, dtype=dtype)
        idle = _storage_uses(buffer)
        if idle is None:  # no way to count users in this torch: never reuse
            return buffer
        self._pool.append((buffer, idle))
        del self._pool[: -self.keep]  # forget the oldest; whoever holds it keeps it alive
        return buffer.detach()


def _storage_uses(tensor: torch.Tensor) -> int | None:
    """How many tensors share ``tensor``'s memory (torch's own count), or None if unknown."""
    try:
        return torch._C._storage_Use_Count(tensor.untyped_storage()._cdata)
    except (AttributeError, RuntimeError, TypeError):
        return None


def _is_image(tensor: torch.Tensor, channels: int) -> bool:
    if tensor.dtype != torch.uint8 or isinstance(tensor, tv_tensors.Mask):
        return False
    if isinstance(tensor, tv_tensors.Image):
        return tensor.shape[-3] == channels
    return tensor.ndim == 4 and tensor.shape[1] == channels


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


def _tensors(batch: Any) -> Iterator[torch.Tensor]:
    """Every tensor in a nested dict/list/tuple batch."""
    if isinstance(batch, torch.Tensor):
        yield batch
    elif isinstance(batch, dict):
        for value in batch.values():
            yield from _tensors(value)
    elif isinstance(batch, (list, tuple)):
        for value in batch:
            yield from _tensors(value)


def _record_stream(batch: Any, stream: torch.cuda.Stream) -> None:
    """Tell the caching allocator that ``stream`` uses these tensors (allocated on another)."""
    for tensor in _tensors(batch):
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

    On CPU the float batches come from a small pool of reused buffers, and each uint8 image batch
    a loader worker made (``image_collate``, ``multimodal_collate``) is handed back to that worker
    once it is normalised, so the worker writes a later batch into the same shared memory instead
    of new pages: 1.10-1.15x the images/s of ``benchmarks/vision.py``'s loader (three runs of 12
    alternating rounds on a 2-core VM, where a new page costs ~5 us). This needs the workers of a
    CPU preset (``loader_kwargs("cpu")``), which hold batches for it; the caller only ever sees
    the float copies.
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
        self._recycler = _Recycler()  # CPU output batches; the CUDA caching allocator does this on GPU

    def __len__(self) -> int:
        return len(self.loader)

    def state_dict(self) -> dict[str, Any]:
        return self._state if self._state is not None else self.loader.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._state = None
        self.loader.load_state_dict(state)

    def _prepare(self, batch: Any) -> Any:
        batch = to_device(batch, self.device)
        return _normalize(batch, self.mean, self.std, self.dtype, self._recycler) if self.normalize else batch

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
            # than they speed this up (benchmarks/vision.py, 2 cores: 1.5x -> 1.8x torchvision).
            threads = 1 if getattr(self.loader, "num_workers", 0) > 0 else torch.get_num_threads()
            for batch in batches:
                prepared = _with_threads(threads, self._prepare, batch)
                if self.normalize:
                    _release(batch, len(self.mean))  # its images were copied out: back to the workers
                yield prepared
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


_PRIVATE_USES: int | None = None


def _release(batch: Any, channels: int) -> None:
    """Hand the uint8 image batches of a batch just normalised back to the workers that made them.

    ``batch`` is the loader's raw batch after :func:`_normalize` replaced its images, so nothing
    handed to the caller refers to them. Each image tensor is released only if it alone still uses
    its memory (torch's count: no view, numpy array or other tensor kept by a loader wrapper),
    and only if a worker made it with a tag (:mod:`recipes.core.batching`, shared batches).
    """
    global _PRIVATE_USES
    for images in _tensors(batch):
        if not _is_image(images, channels) or images.device.type != "cpu" or images.storage_offset() != 0:
            continue
        if _PRIVATE_USES is None:
            _PRIVATE_USES = _storage_uses(torch.empty(1)) or -1  # one tensor alone on its memory
        if _storage_uses(images) != _PRIVATE_USES:
            continue
        storage = images.untyped_storage()
        tag = batch_tag(storage, images.numel()) if storage.is_shared() else None
        if tag is not None and int(tag) == IN_USE:
            tag.fill_(RELEASED)
