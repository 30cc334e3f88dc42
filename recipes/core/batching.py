"""Stack uint8 images into one batch tensor, each image copied once.

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

import torch


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
    out = torch.empty_strided((len(images), channels, height, width), strides, dtype=torch.uint8)
    return torch.stack([image.as_subclass(torch.Tensor) for image in images], out=out)
