"""The standard ImageNet augmentations as transforms.v2 pipelines on uint8 tensors.

    dataset = ImageFolderDataset("train", train_transform(224))      # RandomResizedCrop + flip
    val = ImageFolderDataset("val", eval_transform(224, resize_size=256))  # Resize + CenterCrop
    for images, labels in DevicePrefetcher(vision_loader(dataset, 256), "cuda"):
        ...                                                          # mean/std applied there

No ``ToDtype`` and no ``Normalize`` here: images stay uint8 (a quarter of the bytes) until the
device, where ``DevicePrefetcher`` normalises the whole batch with ``IMAGENET_MEAN`` /
``IMAGENET_STD`` in one fused multiply-add. Resizing is antialiased bilinear, the uint8 kernel
torch shares with Pillow-SIMD, so the pixels match what the PIL pipeline produces up to rounding.

Randomness: v2 draws from torch's global generator, and the loaders in this package run each
sample under a seed made of ``(seed, epoch, index)``, so a seed reproduces every crop and flip
exactly, whatever the number of workers, after a resume, on any rank.

Each preset carries ``draft_size``, the smallest ``(width, height)`` a JPEG may be decoded at
for its output to stay exact; :class:`ImageFolderDataset` reads it (see its module docstring for
the measurements behind the two rules below).
"""

from __future__ import annotations

import math

from torchvision.transforms import v2

from recipes.core.device import IMAGENET_MEAN, IMAGENET_STD

__all__ = ["IMAGENET_MEAN", "IMAGENET_STD", "eval_transform", "train_transform"]


def train_transform(
    size: int = 224, *, scale: tuple[float, float] = (0.08, 1.0), ratio: tuple[float, float] = (3 / 4, 4 / 3)
) -> v2.Compose:
    """``RandomResizedCrop(size)`` + ``RandomHorizontalFlip()`` on a uint8 image -> uint8 [3,size,size].

    Args:
        size: output side in pixels.
        scale, ratio: RandomResizedCrop's area fraction and aspect-ratio ranges.

    ``draft_size``: the smallest crop RandomResizedCrop can draw has area ``scale[0] * area`` and
    aspect ratio at the edge of ``ratio``, so its shorter side is ``sqrt(scale[0] * r * area)``
    with ``r = min(ratio[0], 1 / ratio[1])``. Decoding at no less than ``k x k`` pixels, with
    ``k = size / sqrt(scale[0] * r)``, keeps even that crop ``size`` pixels wide and high: every
    crop is still a downscale, as with a full decode (~915 px for 224).
    """
    transform = v2.Compose(
        [
            # antialias: a 400 px crop squeezed into 224 aliases badly without it (v2 default, explicit)
            v2.RandomResizedCrop(size, scale=scale, ratio=ratio, antialias=True),
            v2.RandomHorizontalFlip(),
        ]
    )
    narrowest = min(ratio[0], 1 / ratio[1])
    side = math.ceil(size / math.sqrt(scale[0] * narrowest)) + 1  # +1: RRC rounds crop sides
    transform.draft_size = (side, side)
    return transform


def eval_transform(size: int = 224, resize_size: int = 256) -> v2.Compose:
    """``Resize(resize_size)`` (shorter side) + ``CenterCrop(size)`` -> uint8 [3,size,size].

    ``draft_size`` is ``(resize_size, resize_size)``: a JPEG decoded at no less than that on
    both sides is still shrunk by the Resize, never enlarged.
    """
    transform = v2.Compose([v2.Resize(resize_size, antialias=True), v2.CenterCrop(size)])
    transform.draft_size = (resize_size, resize_size)
    return transform
