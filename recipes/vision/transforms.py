"""The standard ImageNet augmentations as transforms.v2 pipelines on uint8 tensors.

    dataset = ImageFolderDataset("train", train_transform(224))      # RandomResizedCrop + flip
    val = ImageFolderDataset("val", eval_transform(224, resize_size=256))  # Resize + CenterCrop
    for images, labels in DevicePrefetcher(vision_loader(dataset, 256), "cuda"):
        ...                                                          # mean/std applied there

No ``ToDtype`` and no ``Normalize`` here: images stay uint8 (a quarter of the bytes) until the
device, where ``DevicePrefetcher`` normalises the whole batch with ``IMAGENET_MEAN`` /
``IMAGENET_STD`` in one fused multiply-add. Resizing is antialiased bilinear, the uint8 kernel
torch shares with Pillow-SIMD, so the pixels match what the PIL pipeline produces up to rounding.

Memory layout: decoded images are ``[3,H,W]`` views of the decoder's ``[H,W,3]`` memory, and the
presets keep that layout (channels-last) from the decoder to the batch: torch's antialiased
uint8 resize is fastest on it (see :class:`RandomResizedCrop`). ``.contiguous()`` gives CHW memory.

Randomness: the transforms draw from torch's global generator, and the loaders in this package run each
sample under a seed made of ``(seed, epoch, index)``, so a seed reproduces every crop and flip
exactly, whatever the number of workers, after a resume, on any rank.

Each preset carries ``draft_size``, the smallest ``(width, height)`` a JPEG may be decoded at
for every crop to stay a downscale; :class:`ImageFolderDataset` reads it.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torchvision import tv_tensors
from torchvision.transforms import v2
from torchvision.transforms.v2 import functional as F

from recipes.core import IMAGENET_MEAN, IMAGENET_STD

__all__ = ["IMAGENET_MEAN", "IMAGENET_STD", "RandomHorizontalFlip", "RandomResizedCrop", "eval_transform", "train_transform"]


class RandomResizedCrop(v2.RandomResizedCrop):
    """``v2.RandomResizedCrop``: the same crop distribution and, for a box, the same pixels; faster.

    - A crop of a channels-last image (the decoder's layout) is a strided view, which torch's
      antialiased uint8 resize reads through a slow generic path. The crop is first copied into
      dense ``[h,w,3]`` memory, which the resize reads on its channels-last fast path.
    - Boxes follow v2's rule (area fraction uniform in ``scale``, log aspect ratio uniform in
      ``log(ratio)``, 10 tries, then a centre crop), drawn with one ``torch.rand(4)`` per try
      instead of v2's dozen tensor calls: the same distribution, not v2's boxes for a seed.
    - A lone image skips v2's sample bookkeeping (flatten, decide what to transform, dispatch).

    Other inputs (CHW images, boxes, masks, videos) go through torchvision's kernels unchanged.
    Timings: ``benchmarks/README.md``.
    """

    def forward(self, *inputs: Any) -> Any:
        if _lone_image(inputs):  # v2's sample bookkeeping would decide nothing here
            image = inputs[0]
            return self.transform(image, self.draw_box(*image.shape[-2:]))
        return super().forward(*inputs)

    def make_params(self, flat_inputs: list[Any]) -> dict[str, Any]:
        return self.draw_box(*v2.query_size(flat_inputs))

    def draw_box(self, height: int, width: int) -> dict[str, int]:
        """The crop box for a ``height x width`` image: ``top``, ``left``, ``height``, ``width`` (v2's rule).

        Public so that ``decode="device"`` draws exactly the box this transform would (recipes.core.pixels.device_decode).
        """
        area = height * width
        log_low, log_high = math.log(self.ratio[0]), math.log(self.ratio[1])
        for _ in range(10):
            u_area, u_ratio, u_top, u_left = torch.rand(4, dtype=torch.float64).tolist()
            target_area = area * (self.scale[0] + (self.scale[1] - self.scale[0]) * u_area)
            aspect_ratio = math.exp(log_low + (log_high - log_low) * u_ratio)
            w = int(round(math.sqrt(target_area * aspect_ratio)))
            h = int(round(math.sqrt(target_area / aspect_ratio)))
            if 0 < w <= width and 0 < h <= height:
                top = min(int(u_top * (height - h + 1)), height - h)
                left = min(int(u_left * (width - w + 1)), width - w)
                return {"top": top, "left": left, "height": h, "width": w}
        # ten misses (an extreme aspect ratio): v2's fallback, the central crop within ``ratio``
        in_ratio = width / height
        if in_ratio < min(self.ratio):
            w, h = width, int(round(width / min(self.ratio)))
        elif in_ratio > max(self.ratio):
            w, h = int(round(height * max(self.ratio))), height
        else:
            w, h = width, height
        return {"top": (height - h) // 2, "left": (width - w) // 2, "height": h, "width": w}

    def transform(self, inpt: Any, params: dict[str, Any]) -> Any:
        if not _is_channels_last_image(inpt):
            return super().transform(inpt, params)
        top, left, height, width = params["top"], params["left"], params["height"], params["width"]
        crop = inpt.as_subclass(torch.Tensor)[:, top : top + height, left : left + width]
        # torchvision 0.29 keeps interpolation as a str, 0.26 as the enum
        bilinear = v2.InterpolationMode(self.interpolation) == v2.InterpolationMode.BILINEAR
        if bilinear and self.antialias and (height, width) != tuple(self.size):
            out = resize_uint8(crop, tuple(self.size))  # F.resize_image's kernel, less its ~6 us of checks
        else:
            dense = crop.permute(1, 2, 0).contiguous().permute(2, 0, 1)
            out = F.resize_image(dense, self.size, interpolation=self.interpolation, antialias=self.antialias)
        return tv_tensors.wrap(out, like=inpt) if isinstance(inpt, tv_tensors.Image) else out


class RandomHorizontalFlip(v2.RandomHorizontalFlip):
    """``v2.RandomHorizontalFlip``: the same draw and the same result, less overhead on one image.

    A lone image is flipped directly after drawing ``torch.rand(1)`` exactly as v2 does; v2's
    generic ``forward`` (flatten, decide, dispatch) costs about twice the flip itself. Any
    other sample goes through v2.
    """

    def forward(self, *inputs: Any) -> Any:
        if not _lone_image(inputs):
            return super().forward(*inputs)
        image = inputs[0]
        if torch.rand(1) >= self.p:
            return image
        flipped = F.horizontal_flip_image(image.as_subclass(torch.Tensor))
        return tv_tensors.wrap(flipped, like=image) if isinstance(image, tv_tensors.Image) else flipped


def resize_uint8(image: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
    """Antialiased bilinear resize of a uint8 ``[3,H,W]`` image with torch's uint8 kernel, read from
    dense ``[H,W,3]`` memory, the kernel's fast path; the result keeps that layout."""
    # seen as [1,3,H,W] made from [1,H,W,3], so that its batch stride is not ambiguous, or torch
    # would give CHW output, slower (pytorch #68430)
    hwc = image.permute(1, 2, 0).contiguous()[None].permute(0, 3, 1, 2)
    return torch.nn.functional.interpolate(hwc, size=size, mode="bilinear", align_corners=False, antialias=True)[0]


def _lone_image(inputs: tuple[Any, ...]) -> bool:
    """A sample that is one image tensor, which v2 transforms whole: a ``tv_tensors.Image`` or a plain tensor."""
    return len(inputs) == 1 and (type(inputs[0]) is torch.Tensor or isinstance(inputs[0], tv_tensors.Image))


def _is_channels_last_image(inpt: Any) -> bool:
    """A uint8 ``[C,H,W]`` image (plain tensor or ``tv_tensors.Image``) whose channels are adjacent in memory."""
    if not (type(inpt) is torch.Tensor or isinstance(inpt, tv_tensors.Image)):
        return False
    plain = inpt.as_subclass(torch.Tensor)  # tv_tensors route every attribute through __torch_function__
    return plain.dtype == torch.uint8 and plain.ndim == 3 and plain.shape[0] > 1 and plain.stride(0) == 1


def train_transform(
    size: int = 224, *, scale: tuple[float, float] = (0.08, 1.0), ratio: tuple[float, float] = (3 / 4, 4 / 3)
) -> v2.Compose:
    """``RandomResizedCrop(size)`` + ``RandomHorizontalFlip()`` on a uint8 image -> uint8 [3,size,size].

    The two are this module's drop-in subclasses of the v2 transforms (same distribution, same
    pixels for the same box), faster on a decoded photo.

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
            RandomResizedCrop(size, scale=scale, ratio=ratio, antialias=True),
            RandomHorizontalFlip(),
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
