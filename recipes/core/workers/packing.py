"""Send a worker's batch of many small tensors to the main process as one shared buffer per dtype.

    loader = DataLoader(dataset, batch_size=8, num_workers=4,
                        collate_fn=packed_in_workers(detection_collate))

A DataLoader worker hands each tensor of a batch over on its own: a shared-memory file and a
file-descriptor transfer per tensor. A detection batch holds five tensors per image (image,
boxes, labels, area, iscrowd), so with small images the main process spends its time receiving
descriptors instead of training. :func:`packed_in_workers` copies a batch's tensors into one
shared buffer per dtype in the worker; the main process gets the same structure back, each
tensor a view of its buffer with its shape, strides, class and tv_tensors metadata.
benchmarks/detection.py measures the gain (its fourth figure; results in benchmarks/README.md).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
from torch.utils.data import get_worker_info

from recipes.core.contracts.nested import map_tensors, tensors_in

# Stands in for every tensor of a packed batch's structure; one object, so pickle writes it once.
_PLACEHOLDER = torch.empty(0, device="meta")


def packed_in_workers(collate_fn: Callable[[list[Any]], Any]) -> PackedInWorkers:
    """``collate_fn`` whose batches cross from a worker process packed (see the module docstring);
    one already packed is returned as it is. :func:`recipes.core.loading.loader.build_loader` applies it."""
    return collate_fn if isinstance(collate_fn, PackedInWorkers) else PackedInWorkers(collate_fn)


class PackedInWorkers:
    """What :func:`packed_in_workers` returns: ``collate_fn``'s batch, a :class:`PackedBatch` in a
    worker process and as it is in the main process (``num_workers=0``). Picklable, so it works
    with spawned workers."""

    def __init__(self, collate_fn: Callable[[list[Any]], Any]) -> None:
        self.collate_fn = collate_fn

    def __call__(self, samples: list[Any]) -> Any:
        batch = self.collate_fn(samples)
        if get_worker_info() is None or isinstance(batch, PackedBatch):  # the main process, or packed twice
            return batch
        return PackedBatch(batch)

    def __repr__(self) -> str:
        return f"packed_in_workers({self.collate_fn!r})"


class PackedBatch:
    """A batch that pickles as one shared-memory buffer per dtype and unpickles as the batch itself.

    Tensors in dicts, lists, tuples and namedtuples are packed (what :mod:`recipes.core.contracts.nested`
    walks); tensors inside other objects are pickled by torch as usual. A batch holding a tensor
    that is not on the CPU or requires grad is pickled unpacked, and so is one with no two tensors
    of one dtype (images and labels): it would cross as as many buffers, copied once more. Every
    tensor of an unpickled batch keeps its dtype's whole buffer alive.
    """

    def __init__(self, batch: Any) -> None:
        self.batch = batch

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        tensors = tensors_in(self.batch)
        if any(t.device.type != "cpu" or t.requires_grad for t in tensors):
            return _same, (self.batch,)
        if len({t.dtype for t in tensors}) == len(tensors):  # a descriptor a tensor either way
            return _same, (self.batch,)
        pieces: dict[torch.dtype, list[torch.Tensor]] = {}
        entries = []
        for tensor in tensors:
            order = _memory_order(tensor)
            pieces.setdefault(tensor.dtype, []).append(tensor.as_subclass(torch.Tensor).permute(order).reshape(-1))
            # tv_tensors keep their metadata (format, canvas_size, ...) in the instance dict
            entries.append((tensor.dtype, tuple(tensor.shape), order, type(tensor), dict(vars(tensor))))
        buffers = {}
        for dtype, parts in pieces.items():
            if len(parts) == 1 and _whole_storage(parts[0]):
                # a dtype's only tensor (an audio or image batch) moves into shared memory itself: one
                # copy, as DataLoader's own transfer makes, where an empty buffer filled would cost two
                buffers[dtype] = parts[0].share_memory_()
                continue
            # share_memory_ moves the (still unwritten) buffer into shared memory, then one copy fills it
            buffers[dtype] = torch.empty(sum(p.numel() for p in parts), dtype=dtype).share_memory_()
            torch.cat(parts, out=buffers[dtype])
        # the placeholder travels too: pickle restores one object for all its uses, so the main
        # process tells it apart from tensors that objects in the structure unpickle to
        return _unpack, (buffers, entries, _PLACEHOLDER, map_tensors(self.batch, lambda _: _PLACEHOLDER))


def _whole_storage(flat: torch.Tensor) -> bool:
    """Whether the 1-d ``flat`` spans all of its storage (a view of a larger one must be copied out)."""
    return flat.storage_offset() == 0 and flat.untyped_storage().nbytes() == flat.numel() * flat.element_size()


def _memory_order(tensor: torch.Tensor) -> list[int]:
    """Dimensions from the largest stride down, when that order is dense (so a [3,H,W] view of
    [H,W,3] memory is copied as it lies and keeps its strides); else the logical order."""
    order = sorted(range(tensor.dim()), key=tensor.stride, reverse=True)
    return order if tensor.permute(order).is_contiguous() else list(range(tensor.dim()))


def _same(batch: Any) -> Any:
    return batch


def _unpack(
    buffers: dict[torch.dtype, torch.Tensor], entries: list[tuple], placeholder: torch.Tensor, structure: Any
) -> Any:
    offsets = dict.fromkeys(buffers, 0)
    tensors = []
    for dtype, shape, order, cls, metadata in entries:
        start, offsets[dtype] = offsets[dtype], offsets[dtype] + math.prod(shape)
        stored = buffers[dtype][start : offsets[dtype]].view([shape[d] for d in order])
        tensor = stored.permute([order.index(d) for d in range(len(order))])
        if cls is not torch.Tensor:
            tensor = tensor.as_subclass(cls)
            tensor.__dict__.update(metadata)
        tensors.append(tensor)
    restored = iter(tensors)
    return map_tensors(structure, lambda tensor: next(restored) if tensor is placeholder else tensor)
