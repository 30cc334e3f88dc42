"""Stack uint8 images into one batch tensor, written once, in shared memory inside a worker.

    pixels = stack_images([image0, image1], caller="image_collate",
                          fix="add a resize/crop transform, e.g. train_transform(224)")

timm's ``fast_collate`` idea: the batch is allocated up front and each image copied into it
once. Inside a DataLoader worker the buffer is allocated in shared memory, as ``default_collate``
does, so sending the batch to the main process moves a handle, not the pixels; and once the main
process hands a batch back (``DevicePrefetcher`` normalising on CPU does), the worker writes a
later batch into the same memory instead of new pages (:class:`SharedBatches`).

Layout: images that are ``[3,H,W]`` views of ``[H,W,3]`` memory (what the decoders and a v2
resize of such a view produce) are batched channels-last (NHWC memory, shape still
``[B,3,H,W]``): each image is then one contiguous copy, where writing it into NCHW memory is a
transpose, ~10x slower for uint8. Convolutions on the GPU prefer channels-last anyway; call
``.contiguous()`` before a ``.view()``. Contiguous CHW images give a contiguous NCHW batch.
"""

from __future__ import annotations

import torch
from torch.utils.data import get_worker_info


def stack_images(images: list[torch.Tensor], *, caller: str = "collate", fix: str = "add a resize/crop transform") -> torch.Tensor:
    """Stack uint8 ``[C,H,W]`` images into ``[B,C,H,W]``; an empty list gives ``[0,3,0,0]``.

    Raises:
        ValueError: a non-uint8 image or two sizes; the message names the samples and ``fix``.
    """
    if not images:
        return torch.empty((0, 3, 0, 0), dtype=torch.uint8)
    first = images[0]
    for position, image in enumerate(images):
        if image.dtype != torch.uint8:
            raise ValueError(
                f"{caller}: sample {position} is {image.dtype}; images must stay uint8 until the device: "
                "remove ToDtype/Normalize from the transform and normalise per batch (DevicePrefetcher "
                "or recipes.core.device.normalize_images)"
            )
        if image.shape != first.shape:
            raise ValueError(
                f"{caller}: sample {position} is {list(image.shape)} but sample 0 is {list(first.shape)}; "
                f"images in a batch must share one size: {fix}"
            )
    channels, height, width = first.shape
    if first.stride(0) == 1 and channels > 1:
        strides = (channels * height * width, 1, width * channels, channels)
    else:
        strides = (channels * height * width, height * width, width, 1)
    numel = len(images) * first.numel()
    if get_worker_info() is not None:
        flat = torch.empty(0, dtype=torch.uint8).set_(_WORKER_BATCHES.take(numel))
    else:
        flat = torch.empty(numel, dtype=torch.uint8)
    out = flat.as_strided((len(images), channels, height, width), strides)
    return torch.stack([image.as_subclass(torch.Tensor) for image in images], out=out)


# --- Shared batches the main process hands back ----------------------------------------------------
#
# A worker writes each batch into new shared memory, and the kernel zeroes and maps every page of it
# on first touch: 1,176 pages for a 32x3x224x224 uint8 batch, ~6 ms on the VMs of benchmarks/vision.py
# (~5 us a page), a fifth of a second per thousand images in each worker. DataLoader has no way to
# hand that memory back, so a batch made here carries an 8-byte tag after its pixels. The main
# process sets it to RELEASED once it has copied the images out and holds no tensor on them any more
# (DevicePrefetcher does, normalising on CPU: recipes.core.device._release); the worker then writes
# a later batch of the same size into the same pages. If nobody sets it (a GPU run pins the batch
# and drops it, a caller keeps raw batches) the worker holds nothing after its first few batches;
# and a worker holds batches at all only where the loader preset expects them back (CPU).
# torch's count sees every tensor, view and numpy array on a batch in the main process, but not
# another process: a loader wrapper that sent raw batches elsewhere and dropped its own reference
# before that process mapped them would get them written over. Nothing in recipes does that.

IN_USE = 0x5245_4349_5045_5301  # two arbitrary 64-bit tags: no other memory ends in them by chance
RELEASED = 0x5245_4349_5045_5302


def tag_offset(numel: int) -> int:
    """Byte offset of the tag after a batch of ``numel`` bytes: the next 8-byte boundary."""
    return (numel + 7) // 8 * 8


def batch_tag(storage: torch.UntypedStorage, numel: int) -> torch.Tensor | None:
    """The int64 tag after ``numel`` bytes of ``storage``, or None if it has no room for exactly one."""
    offset = tag_offset(numel)
    if storage.nbytes() != offset + 8:
        return None
    return torch.empty(0, dtype=torch.int64).set_(storage, offset // 8, (1,))


class SharedBatches:
    """One worker's shared batch memory: reused once the main process tagged it RELEASED.

    Args:
        keep: batches held after sending, to be reused once released (those in flight, and
            the one being read in the main process); 0 holds none and never reuses.
        trial: if none of the first ``trial`` batches came back, nothing is held from then on.
    """

    def __init__(self, keep: int = 4, trial: int = 8) -> None:
        if keep < 0:
            raise ValueError(f"keep must be 0 or more, got {keep}")
        self.keep, self.trial = keep, trial
        self.held: list[tuple[torch.UntypedStorage, torch.Tensor]] = []
        self.made = self.reused = 0

    def take(self, numel: int) -> torch.UntypedStorage:
        """Shared memory for ``numel`` bytes of pixels and a tag set to IN_USE."""
        for storage, tag in self.held:
            if storage.nbytes() == tag_offset(numel) + 8 and int(tag) == RELEASED:
                tag.fill_(IN_USE)
                self.reused += 1
                return storage
        storage = torch.UntypedStorage._new_shared(tag_offset(numel) + 8)
        tag = batch_tag(storage, numel)
        tag.fill_(IN_USE)
        self.made += 1
        if self.keep and (self.reused or self.made <= self.trial):
            self.held.append((storage, tag))
            del self.held[: -self.keep]  # the oldest is dropped; whoever still maps it keeps it alive
        else:
            self.held.clear()  # nobody hands batches back here: hold no memory for them
        return storage


# In a worker: holds nothing unless the loader expects its batches back (hold_batches_for_hand_back).
_WORKER_BATCHES = SharedBatches(keep=0)


def hold_batches_for_hand_back(keep: int = 4) -> None:
    """Worker start-up, when the main process will hand batches back: hold up to ``keep``.

    The CPU loader presets call it (``recipes.core.loader.loader_kwargs``), for DevicePrefetcher
    normalising there. Elsewhere a worker holds no batch once sent: a GPU run pins batches and
    drops them, and held memory would only add to the shared memory in use.
    """
    global _WORKER_BATCHES
    _WORKER_BATCHES = SharedBatches(keep=keep)
