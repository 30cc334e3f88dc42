"""``decode="device"``, the worker side: ship JPEG bytes and augmentation parameters, not pixels.

    loader = vision_loader(dataset, 256, device="cuda", seed=0, decode="device")
    for images, labels in DevicePrefetcher(loader, "cuda"):   # decoded, cropped, resized there

Why: libjpeg-turbo costs a loader worker about one core per ~600 images/s, and a GPU node has
8-12 cores per GPU. With ``decode="device"`` a worker reads the file, checks its header and draws
the sample's crop box and flip from the sample's seed, exactly the draws the worker path makes
(the transform's own ``draw_box`` and ``torch.rand``), then ships the bytes and those numbers.
:class:`recipes.core.device.DevicePrefetcher` decodes the batch in one call (nvJPEG on CUDA) and
crops, resizes, flips and normalises it there (:mod:`recipes.core.device_augment`).

Fallback, per sample and in the same batch: a file the device decoder may not take as
:func:`recipes.core.images.decode_image` would (PNG and other formats, progressive, CMYK,
EXIF-turned, cut or oversized JPEGs; see :func:`recipes.core.image_headers.device_decodable`) is decoded
and transformed in the worker exactly as with ``decode="worker"``, and its pixels ride along in
the batch. Errors are therefore the worker path's.

Reduced-scale decoding: a JPEG that the dataset's ``draft_size`` lets the worker path decode at
1/2, 1/4 or 1/8 scale (libjpeg's DCT scaling) has its parameters drawn on that reduced size, as
the worker path draws them, and ships the scale with them. The CPU decodes it at that scale too,
so batches equal ``decode="worker"`` whatever the image size; nvJPEG has no such scaling, so
CUDA decodes it in full and resizes the same region once (see :mod:`recipes.core.device_augment`).

Transforms it understands (anything else is a ``ValueError`` at the loader): ``train_transform``
and ``eval_transform``, or a ``v2.Compose`` of recipes' ``RandomResizedCrop`` (bilinear), or
``v2.Resize`` (bilinear, antialiased) then ``v2.CenterCrop``, then optionally
``v2.RandomHorizontalFlip``. A sample's parameters are 11 ints (a crop box in the decoded image,
the size to resize it to, a crop box in the resized image, a flip) and its decode scale.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset, IterableDataset, get_worker_info
from torchvision.transforms import v2

from recipes.core.batching import stack_images
from recipes.core.errors import check_on_error
from recipes.core.image_headers import MAX_PIXELS, device_decodable
from recipes.core.images import decode_image
from recipes.core.mixing import MixedDataset

DECODE_CHOICES = ("worker", "device")


class ImagePlan:
    """A supported transform read as steps: per sample, :meth:`draw` gives its 11 parameters."""

    def __init__(self, transform: Any) -> None:
        steps = list(transform.transforms) if isinstance(transform, v2.Compose) else [transform]
        self.steps: list[tuple[str, Any]] = []
        for step in steps:
            self.steps.append((_kind(step), step))
        kinds = "".join(kind[0] for kind, _ in self.steps)  # r(andom crop), s(ize), c(entre), f(lip)
        if kinds not in ("r", "rf", "sc", "scf", "rc", "rcf"):
            raise ValueError(
                f"decode='device' supports RandomResizedCrop (recipes'), or Resize then CenterCrop, then "
                f"RandomHorizontalFlip; got {transform!r}: use decode='worker' for other transforms"
            )
        if kinds.startswith("rc") and any(c > r for c, r in zip(self.steps[1][1].size, self.steps[0][1].size)):
            raise ValueError(f"decode='device': CenterCrop larger than the crop before it would pad: {transform!r}")

    def draw(self, height: int, width: int) -> tuple[int, ...] | None:
        """The parameters for a ``height x width`` image, drawing torch's generator as the transform
        does; None (nothing drawn) where the worker path would pad a centre crop."""
        box, resized, crop, flip = (0, 0, height, width), (height, width), None, 0
        for kind, step in self.steps:
            if kind == "random crop":
                drawn = step.draw_box(height, width)
                box, resized = (drawn["top"], drawn["left"], drawn["height"], drawn["width"]), tuple(step.size)
            elif kind == "size":
                resized = resized_size(height, width, step.size, step.max_size)
            elif kind == "centre":
                crop = centre_box(*resized, *step.size)
                if crop is None:
                    return None
            else:
                flip = int(not torch.rand(1) >= step.p)  # v2's draw: rand >= p keeps the image
        return (*box, *resized, *(crop or (0, 0, *resized)), flip)


def _kind(step: Any) -> str:
    """What a transform step is, for :class:`ImagePlan`; ``"other"`` for anything unsupported."""
    mode = getattr(step, "interpolation", None)  # an InterpolationMode, or its value as a str
    bilinear = mode is not None and v2.InterpolationMode(mode) == v2.InterpolationMode.BILINEAR and step.antialias
    if isinstance(step, v2.RandomResizedCrop) and hasattr(step, "draw_box") and bilinear:
        return "random crop"
    if isinstance(step, v2.Resize) and step.size is not None and bilinear:
        return "size"
    if isinstance(step, v2.CenterCrop):
        return "centre"
    if isinstance(step, v2.RandomHorizontalFlip):
        return "flip"
    return "other"


def resized_size(height: int, width: int, size: list[int], max_size: int | None) -> tuple[int, int]:
    """``v2.Resize``'s output ``(height, width)``: torchvision's rule, from the public docs' definition."""
    if len(size) == 2:
        return size[0], size[1]
    short, long = sorted((height, width))
    new_short, new_long = size[0], int(size[0] * long / short)
    if max_size is not None and new_long > max_size:
        new_short, new_long = int(max_size * new_short / new_long), max_size
    return (new_long, new_short) if width <= height else (new_short, new_long)


def centre_box(height: int, width: int, crop_height: int, crop_width: int) -> tuple[int, int, int, int] | None:
    """``v2.CenterCrop``'s box in a ``height x width`` image; None where it would pad instead."""
    if crop_height > height or crop_width > width:
        return None
    return int(round((height - crop_height) / 2.0)), int(round((width - crop_width) / 2.0)), crop_height, crop_width


def draft_scale(width: int, height: int, draft_size: tuple[int, int] | None) -> int:
    """The scale, 1, 2, 4 or 8, at which :func:`recipes.core.images.decode_image` decodes an upright
    ``width x height`` JPEG for ``draft_size``: PIL's ``draft`` rule, from the header's size alone."""
    if draft_size is None or width < 2 * draft_size[0] or height < 2 * draft_size[1]:
        return 1  # decode_image decodes in full unless the JPEG is twice draft_size both ways
    most = min(width // draft_size[0], height // draft_size[1])
    return next(scale for scale in (8, 4, 2) if most >= scale)


@dataclass(frozen=True)
class EncodedImage:
    """One sample's image as a worker ships it: the file's bytes and its 11 parameters, drawn on the
    image decoded at ``1 / scale`` (the size the worker path's reduced-scale decode gives)."""

    data: bytes | bytearray
    params: tuple[int, ...]
    source: str
    on_error: str = "raise"
    scale: int = 1


def encode_image(
    data: bytearray, source: str, plan: ImagePlan, transform: Any, *, on_error: str = "raise",
    draft_size: tuple[int, int] | None = None, max_pixels: int = MAX_PIXELS,
) -> EncodedImage | torch.Tensor:
    """An :class:`EncodedImage` if the device can decode ``data``, else the worker path's pixels:
    ``transform(decode_image(data))``, dense, channels-last (a :class:`DataError` if it is bad).

    ``draft_size`` is the dataset's, as the worker path passes it to ``decode_image``: the
    parameters are drawn on the size that decode would give, which may be reduced.
    """
    size = device_decodable(data, max_pixels)
    params, scale = None, 1
    if size is not None:
        scale = draft_scale(size[0], size[1], draft_size)
        params = plan.draw(-(-size[1] // scale), -(-size[0] // scale))  # libjpeg rounds scaled sides up
    if params is not None:
        return EncodedImage(data, params, source, on_error, scale)  # the caller's fresh bytes, not a copy
    image = transform(decode_image(data, source=source, max_pixels=max_pixels, draft_size=draft_size, contiguous=False))
    image = image.as_subclass(torch.Tensor)
    return image.permute(1, 2, 0).contiguous().permute(2, 0, 1) if image.stride(0) == 1 else image.contiguous()


class DeviceDecodeDataset(Dataset):
    """``dataset`` whose items ship :class:`EncodedImage` s: ``self[i]`` is ``dataset.encoded_item(i, plan)``.

    A :class:`recipes.core.mixing.MixedDataset` is planned source by source (each has its own
    transform), and its ``epoch_indices`` go on drawing the loader's epochs.
    """

    def __init__(self, dataset: Dataset) -> None:
        mixed = isinstance(dataset, MixedDataset)
        sources = dataset.datasets if mixed else [dataset]
        for source in sources:
            if isinstance(source, IterableDataset) or not hasattr(source, "encoded_item"):
                raise ValueError(
                    f"decode='device' needs a map-style dataset with encoded_item (ImageFolderDataset, "
                    f"ImageTextDataset, or a MixedDataset of them); {type(source).__name__} has none: use decode='worker'"
                )
        plans = [ImagePlan(getattr(source, "transform", None)) for source in sources]
        self.dataset, self.plan = dataset, plans if mixed else plans[0]
        self.epoch_indices = getattr(dataset, "epoch_indices", None)  # what build_loader's sampler reads

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, index: int) -> Any:
        return self.dataset.encoded_item(index, self.plan)

    def describe(self, index: int) -> str:
        """The wrapped dataset's description of sample ``index``: its file (or line)."""
        return self.dataset.describe(index)


def with_decode(dataset: Dataset, decode: str) -> Dataset:
    """``dataset`` for ``decode="worker"``, a :class:`DeviceDecodeDataset` for ``"device"``."""
    if decode not in DECODE_CHOICES:
        raise ValueError(f"decode must be one of {DECODE_CHOICES}, got {decode!r}")
    return dataset if decode == "worker" else DeviceDecodeDataset(dataset)


@dataclass(frozen=True)
class EncodedBatch:
    """A batch of images still to decode on the device (see :func:`pack_images`).

    ``data`` uint8 [N] holds the encoded files back to back, file j at ``offsets[j]:offsets[j+1]``
    (int64 [J+1]), with ``params`` int64 [J,11] and ``scales`` int64 [J] (None: all 1, full decodes);
    ``decoded`` uint8 [F,3,H,W] holds the worker-decoded samples. ``on_device`` bool [B] says which
    kind each sample is, in batch order.
    """

    data: torch.Tensor
    offsets: torch.Tensor
    params: torch.Tensor
    decoded: torch.Tensor
    on_device: torch.Tensor
    sources: tuple[str, ...]
    on_error: str = "raise"
    scales: torch.Tensor | None = None

    def __len__(self) -> int:
        return len(self.on_device)

    def pin_memory(self) -> EncodedBatch:
        """What DataLoader's ``pin_memory=True`` calls: the pixels that are copied to the device, pinned."""
        return replace(self, decoded=self.decoded.pin_memory())


def pack_images(images: list[Any], *, caller: str, fix: str) -> torch.Tensor | EncodedBatch:
    """Batch images: uint8 tensors alone are stacked (:func:`stack_images`), any
    :class:`EncodedImage` among them gives an :class:`EncodedBatch` of both kinds.

    Raises:
        ValueError: output sizes that differ; the message names ``caller`` and ``fix``.
    """
    encoded = [image for image in images if isinstance(image, EncodedImage)]
    if not encoded:
        return stack_images(images, caller=caller, fix=fix)
    decoded = stack_images([image for image in images if not isinstance(image, EncodedImage)], caller=caller, fix=fix)
    sizes = {image.params[8:10] for image in encoded} | ({tuple(decoded.shape[-2:])} if len(decoded) else set())
    if len(sizes) > 1:
        raise ValueError(f"{caller}: images of sizes {sorted(sizes)} in one batch; {fix}")
    lengths = np.array([len(image.data) for image in encoded], dtype=np.int64)
    offsets = torch.from_numpy(np.concatenate([[0], np.cumsum(lengths)]))
    data = torch.empty(int(offsets[-1]), dtype=torch.uint8)
    if get_worker_info() is not None:
        data.share_memory_()  # still unwritten: the files are copied once, straight into what crosses to the main process
    view = data.numpy()
    for image, start, stop in zip(encoded, offsets[:-1].tolist(), offsets[1:].tolist()):
        view[start:stop] = np.frombuffer(image.data, dtype=np.uint8)
    return EncodedBatch(
        data=data,
        offsets=offsets,
        params=torch.tensor([image.params for image in encoded], dtype=torch.int64),
        decoded=decoded,
        on_device=torch.tensor([isinstance(image, EncodedImage) for image in images]),
        sources=tuple(image.source for image in encoded),
        on_error=check_on_error(encoded[0].on_error),
        scales=torch.tensor([image.scale for image in encoded], dtype=torch.int64),
    )
