"""Clip transforms on uint8: the short side resized, a crop, a flip, one set of parameters per clip.

    dataset = VideoFolderDataset(root, transform=train_transform(112))   # random crop + flip per clip
    dataset = VideoFolderDataset(root, transform=eval_transform(112))    # centre crop

torchvision's video classification reference, with a short-side resize in place of its fixed
``(128, 171)``, so that portrait and rotated videos keep their aspect. A ``tv_tensors.Video`` makes
v2 draw a crop and a flip once for all the frames of a clip; the clips stay uint8, to be
normalised on the device (``DevicePrefetcher``).
"""

from __future__ import annotations

from torchvision.transforms import v2

RESIZE_RATIO = 128 / 112  # the reference's resize before its 112 crop


def _resize_size(size: int, resize_size: int | None) -> int:
    resize_size = round(size * RESIZE_RATIO) if resize_size is None else resize_size
    if not 0 < size <= resize_size:
        raise ValueError(f"resize_size ({resize_size}) must be at least the crop size ({size}), both > 0")
    return resize_size


def train_transform(size: int = 112, resize_size: int | None = None) -> v2.Compose:
    """The short side to ``resize_size`` (default ``size * 128 / 112``), a random ``size`` square, a random flip."""
    return v2.Compose([v2.Resize(_resize_size(size, resize_size), antialias=True), v2.RandomCrop(size),
                       v2.RandomHorizontalFlip()])


def eval_transform(size: int = 112, resize_size: int | None = None) -> v2.Compose:
    """The short side to ``resize_size`` (default ``size * 128 / 112``), the centre ``size`` square."""
    return v2.Compose([v2.Resize(_resize_size(size, resize_size), antialias=True), v2.CenterCrop(size)])
