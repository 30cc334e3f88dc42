"""Stack uint8 images into one batch tensor, each image copied once; carry the item keys a collate does not know.

    pixels = stack_images([image0, image1], caller="image_collate",
                          fix="add a resize/crop transform, e.g. train_transform(224)")

timm's ``fast_collate`` idea: the batch is allocated up front and each image copied into it
once, in the images' own memory layout. A worker's batch then travels to the main process in
shared memory, as any tensor does; the worker never touches it again.

Layout: images that are ``[3,H,W]`` views of ``[H,W,3]`` memory (what the decoders and a v2
resize of such a view produce) are batched channels-last (NHWC memory, shape still
``[B,3,H,W]``): each image is then one contiguous copy, where writing it into NCHW memory is a
transpose, ~10x slower for uint8. Convolutions on the GPU prefer channels-last anyway; call
``.contiguous()`` before a ``.view()``. Contiguous CHW images give a contiguous NCHW batch.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
from torch.utils.data import default_collate


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
                "or recipes.core.loading.device.normalize_images)"
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
    out = torch.empty_strided((len(images), channels, height, width), strides, dtype=torch.uint8)
    return torch.stack([image.as_subclass(torch.Tensor) for image in images], out=out)


def extra_columns(batch: list[dict[str, Any]], known: Iterable[str], taken: Iterable[str], *, caller: str) -> dict[str, Any]:
    """The keys of dict items that a collate does not itself batch, each batched as
    ``torch.utils.data.default_collate`` does (tensors of one shape stacked, numbers to a tensor,
    strings to a list), else kept as a list of the items' values.

    A key a user adds to a copied recipe's items (``n_tokens``, ``source``) so reaches the batch
    instead of being dropped. ``known`` are the item keys the collate reads; ``taken`` the batch
    keys it writes, which an extra key may not overwrite.

    Raises:
        ValueError: an extra key is named like a batch key the collate writes, or not every item has it.
    """
    if not batch:
        return {}
    known, taken = set(known), set(taken)
    out: dict[str, Any] = {}
    for key in batch[0]:
        if key in known:
            continue
        if key in taken:
            raise ValueError(f"{caller}: the items' key {key!r} would overwrite the batch's own {key!r}; rename it")
        missing = [position for position, item in enumerate(batch) if key not in item]
        if missing:
            raise ValueError(f"{caller}: item 0 has the key {key!r} but item {missing[0]} of the batch has not")
        values = [item[key] for item in batch]
        try:
            out[key] = default_collate(values)
        except (RuntimeError, TypeError):  # tensors of different shapes, or values it cannot batch
            out[key] = values
    return out
