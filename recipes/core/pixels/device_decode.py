"""``decode="device"``, the worker side: ship JPEG bytes and augmentation parameters, not pixels.

    loader = vision_loader(dataset, 256, device="cuda", seed=0, decode="device")
    for images, labels in DevicePrefetcher(loader, "cuda"):   # decoded, cropped, resized there

Why: libjpeg-turbo costs a loader worker about one core per ~600 images/s, and a GPU node has
8-12 cores per GPU. A domain's :class:`DeviceView` of its dataset makes an :class:`ImagePlan` of the
dataset's transform; per sample, a worker reads the file, checks its header and draws the crop box
and flip from the sample's seed, exactly as the worker path does (the transform's ``draw_box``
and ``torch.rand``), then ships the bytes and those numbers, an :class:`ImageParams`.
:class:`recipes.core.loading.device.DevicePrefetcher` decodes the batch in one call (nvJPEG on CUDA) and
crops, resizes, flips and normalises it there (:mod:`recipes.core.pixels.device_augment`).

Fallback, per sample and in the same batch: a file the device decoder may not take as
:func:`recipes.core.pixels.images.decode_image` would (PNG and other formats, progressive, CMYK,
EXIF-turned, cut or oversized JPEGs; see :func:`recipes.core.pixels.image_headers.device_decodable`) is
decoded and transformed in the worker as with ``decode="worker"``; its pixels ride along in the
batch, so errors are the worker path's. A JPEG that the dataset's ``draft_size`` lets the worker
path decode at 1/2, 1/4 or 1/8 scale has its parameters drawn on that reduced size and ships the
scale too (nvJPEG has no such scaling: see :mod:`recipes.core.pixels.device_augment`).

Transforms it reads, anything else being a ``ValueError`` at the loader: ``train_transform``,
``eval_transform``, or a ``v2.Compose`` of recipes' ``RandomResizedCrop`` (bilinear) or
``v2.Resize`` (bilinear, antialiased) then ``v2.CenterCrop``, then maybe ``v2.RandomHorizontalFlip``.
"""

from __future__ import annotations

import enum
import os
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

import numpy as np
import torch
from torch.utils.data import Dataset, IterableDataset, get_worker_info
from torchvision.transforms import v2

from recipes.core.contracts.batching import stack_images
from recipes.core.contracts.errors import check_on_error
from recipes.core.pixels.image_headers import MAX_PIXELS, device_decodable
from recipes.core.pixels.images import decode_image, read_file
from recipes.core.sources.storage import shown
from recipes.core.contracts.protocols import Described, DrawsCropBoxes, Viewable
from recipes.core.contracts.states import source_of



class ImageParams(NamedTuple):
    """One sample's parameters, in the order the worker path applies them: a box in the decoded
    image, the size that box is resized to, a box in the resized image, and a flip (1: mirror).
    An :class:`EncodedBatch` carries them as int64 rows, in this field order."""

    box_top: int
    box_left: int
    box_height: int
    box_width: int
    resized_height: int
    resized_width: int
    crop_top: int
    crop_left: int
    crop_height: int
    crop_width: int
    flip: int

    @property
    def box(self) -> tuple[int, int, int, int]:
        """``(top, left, height, width)`` of the first crop, in the decoded image."""
        return self.box_top, self.box_left, self.box_height, self.box_width

    @property
    def resized(self) -> tuple[int, int]:
        """``(height, width)`` the first crop is resized to."""
        return self.resized_height, self.resized_width

    @property
    def crop(self) -> tuple[int, int, int, int]:
        """``(top, left, height, width)`` of the second crop, in the resized image."""
        return self.crop_top, self.crop_left, self.crop_height, self.crop_width

    @property
    def output_size(self) -> tuple[int, int]:
        """``(height, width)`` of the image these parameters give: the second crop's."""
        return self.crop_height, self.crop_width


class Step(enum.Enum):
    """What one transform step is to an :class:`ImagePlan`."""

    RANDOM_CROP = "recipes' RandomResizedCrop, bilinear"
    RESIZE = "v2.Resize, bilinear, antialiased"
    CENTRE_CROP = "v2.CenterCrop"
    FLIP = "v2.RandomHorizontalFlip"
    OTHER = "anything else"


# the steps a plan reads: a random crop, or a resize then a centre crop, or a random crop then a
# centre crop; each maybe followed by a flip
ACCEPTED_STEPS = (
    (Step.RANDOM_CROP,),
    (Step.RANDOM_CROP, Step.FLIP),
    (Step.RESIZE, Step.CENTRE_CROP),
    (Step.RESIZE, Step.CENTRE_CROP, Step.FLIP),
    (Step.RANDOM_CROP, Step.CENTRE_CROP),
    (Step.RANDOM_CROP, Step.CENTRE_CROP, Step.FLIP),
)


class PlanStep(NamedTuple):
    """One step of an :class:`ImagePlan`: what it is, and the transform that does it."""

    kind: Step
    transform: Any


class ImagePlan:
    """A supported transform read as steps: per sample, :meth:`draw` gives its :class:`ImageParams`."""

    def __init__(self, transform: Any) -> None:
        steps = list(transform.transforms) if isinstance(transform, v2.Compose) else [transform]
        self.steps = [PlanStep(step_kind(step), step) for step in steps]
        kinds = tuple(step.kind for step in self.steps)
        if kinds not in ACCEPTED_STEPS:
            raise ValueError(
                f"decode='device' supports RandomResizedCrop (recipes'), or Resize then CenterCrop, then "
                f"RandomHorizontalFlip; got {transform!r}: use decode='worker' for other transforms"
            )
        if kinds[:2] == (Step.RANDOM_CROP, Step.CENTRE_CROP):
            crop, centre = self.steps[0].transform.size, self.steps[1].transform.size
            if any(c > r for c, r in zip(centre, crop)):
                raise ValueError(f"decode='device': CenterCrop larger than the crop before it would pad: {transform!r}")

    def draw(self, height: int, width: int) -> ImageParams | None:
        """The parameters for a ``height x width`` image, drawing torch's generator as the transform
        does; None (nothing drawn) where the worker path would pad a centre crop."""
        box, resized, crop, flip = (0, 0, height, width), (height, width), None, 0
        for kind, step in self.steps:
            if kind is Step.RANDOM_CROP:
                drawn = step.draw_box(height, width)
                box, resized = (drawn["top"], drawn["left"], drawn["height"], drawn["width"]), tuple(step.size)
            elif kind is Step.RESIZE:
                resized = resized_size(height, width, step.size, step.max_size)
            elif kind is Step.CENTRE_CROP:
                crop = centre_box(*resized, *step.size)
                if crop is None:
                    return None
            else:
                flip = int(not torch.rand(1) >= step.p)  # v2's draw: rand >= p keeps the image
        return ImageParams(*box, *resized, *(crop or (0, 0, *resized)), flip=flip)


def step_kind(step: Any) -> Step:
    """What a transform step is, for :class:`ImagePlan`; ``Step.OTHER`` for anything unsupported."""
    mode = getattr(step, "interpolation", None)  # an InterpolationMode, or its value as a str
    bilinear = mode is not None and v2.InterpolationMode(mode) == v2.InterpolationMode.BILINEAR and step.antialias
    if isinstance(step, v2.RandomResizedCrop) and isinstance(step, DrawsCropBoxes) and bilinear:
        return Step.RANDOM_CROP
    if isinstance(step, v2.Resize) and step.size is not None and bilinear:
        return Step.RESIZE
    if isinstance(step, v2.CenterCrop):
        return Step.CENTRE_CROP
    if isinstance(step, v2.RandomHorizontalFlip):
        return Step.FLIP
    return Step.OTHER


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
    """The scale, 1, 2, 4 or 8, at which :func:`recipes.core.pixels.images.decode_image` decodes an upright
    ``width x height`` JPEG for ``draft_size``: PIL's ``draft`` rule, from the header's size alone."""
    if draft_size is None or width < 2 * draft_size[0] or height < 2 * draft_size[1]:
        return 1  # decode_image decodes in full unless the JPEG is twice draft_size both ways
    most = min(width // draft_size[0], height // draft_size[1])
    return next(scale for scale in (8, 4, 2) if most >= scale)


@dataclass(frozen=True)
class EncodedImage:
    """One sample's image as a ``decode="device"`` worker ships it (what :func:`encode_image` gives).

    Either the file's ``data`` and its ``params``, drawn on the image decoded at ``1 / scale``
    (the size the worker path's reduced-scale decode gives), for the device to decode; or, for a
    file the device cannot take, ``pixels``: the worker path's uint8 [3,H,W] image, dense.
    ``params`` may be given as 11 ints in :class:`ImageParams`' field order.
    """

    data: bytes | bytearray | None
    params: ImageParams | None
    source: str
    on_error: str = "raise"
    scale: int = 1
    pixels: torch.Tensor | None = None

    def __post_init__(self) -> None:
        if self.params is not None and not isinstance(self.params, ImageParams):
            object.__setattr__(self, "params", ImageParams(*self.params))  # frozen: the dataclass way to set it

    @property
    def on_device(self) -> bool:
        """Whether the device decodes this image (else the worker did: ``pixels``)."""
        return self.pixels is None


def encode_image(
    data: bytearray | str | os.PathLike, source: str | None, plan: ImagePlan, transform: Any, *, on_error: str = "raise",
    draft_size: tuple[int, int] | None = None, max_pixels: int = MAX_PIXELS,
) -> EncodedImage:
    """``data`` as a worker ships it: its bytes and parameters if the device can decode it, else
    ``pixels``, the worker path's ``transform(decode_image(data))``, dense and channels-last (a
    :class:`DataError` if the file is bad). ``data`` may be a file's path, read here (``source``
    None: the path names it in messages).

    ``draft_size`` is the dataset's, as the worker path passes it to ``decode_image``: the
    parameters are drawn on the size that decode would give, which may be reduced.
    """
    if not isinstance(data, (bytes, bytearray)):
        data, source = read_file(data), shown(data) if source is None else source
    size = device_decodable(data, max_pixels)
    if size is not None:
        scale = draft_scale(size[0], size[1], draft_size)
        params = plan.draw(-(-size[1] // scale), -(-size[0] // scale))  # libjpeg rounds scaled sides up
        if params is not None:
            return EncodedImage(data, params, source, on_error, scale)  # the caller's fresh bytes, not a copy
    image = transform(decode_image(data, source=source, max_pixels=max_pixels, draft_size=draft_size, contiguous=False))
    image = image.as_subclass(torch.Tensor)
    dense = image.permute(1, 2, 0).contiguous().permute(2, 0, 1) if image.stride(0) == 1 else image.contiguous()
    return EncodedImage(None, None, source, on_error, pixels=dense)


class DeviceView(Dataset):
    """``decode="device"``'s view of a domain's map-style dataset: item ``i`` is ``dataset[i]`` as a
    worker ships it for the device to decode, its images :class:`EncodedImage` s. A domain subclasses
    it with the ``__getitem__`` that ships its items (the vision domain's ``DeviceImages``); the
    view answers for the dataset where the loader asks (its length, a sample's description, the data
    a state names), so a state saved through the view resumes without it, and the reverse.

        class DeviceImages(DeviceView):
            reads = ImageFolderDataset                     # another dataset is refused, named

            def __init__(self, dataset):
                super().__init__(dataset)
                self.plan = ImagePlan(dataset.transform)   # a ValueError for a transform it cannot read

            def __getitem__(self, index):
                return encode_image(self.dataset.path(index), None, self.plan, self.dataset.transform), ...

    Raises:
        ValueError: ``dataset`` is iterable (the device path reads items by index), or not an
            instance of ``reads``, the class whose samples the view knows how to ship.
    """

    reads: type = Dataset  # a subclass names its domain's dataset class

    def __init__(self, dataset: Dataset) -> None:
        name = type(dataset).__name__
        if isinstance(dataset, IterableDataset):
            raise ValueError(f"decode='device' needs a map-style dataset; {name} is iterable: use decode='worker'")
        if not isinstance(dataset, self.reads):
            raise ValueError(f"decode='device' reads a {self.reads.__name__}'s samples; {name} is not one: "
                             "use decode='worker'")
        self.dataset = dataset

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, index: int) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must implement __getitem__: the item decode='device' ships")

    def describe(self, index: int) -> str:
        """The wrapped dataset's description of sample ``index`` (its file or line), else its type and index."""
        if isinstance(self.dataset, Described):
            return self.dataset.describe(index)
        return f"{type(self.dataset).__name__} index {index}"

    def state_source(self) -> str:
        """The wrapped dataset's data, for loader states (:func:`recipes.core.contracts.states.source_of`)."""
        return source_of(self.dataset)


DECODE_CHOICES = ("worker", "device")


def with_decode(dataset: Dataset, decode: str, view: Callable[[Dataset], Dataset] | None) -> Dataset:
    """``dataset`` for ``decode="worker"``; for ``"device"``, ``view(dataset)``, the domain's
    :class:`DeviceView` (a mixture, :class:`recipes.core.contracts.protocols.Viewable`: each source
    through it, nested mixtures too). ``view`` None: the preset has no device path, and ``"device"``
    is a ValueError."""
    if decode not in DECODE_CHOICES:
        raise ValueError(f"decode must be one of {DECODE_CHOICES}, got {decode!r}")
    if decode == "worker":
        return dataset
    if view is None:
        raise ValueError(f"decode='device' has no device path for {type(dataset).__name__}: use decode='worker'")

    def through(source: Dataset) -> Dataset:
        return source.viewed(through) if isinstance(source, Viewable) else view(source)

    return through(dataset)


@dataclass(frozen=True)
class EncodedBatch:
    """A batch of images still to decode on the device (see :func:`pack_images`).

    ``data`` uint8 [N] holds the encoded files back to back, file j at ``offsets[j]:offsets[j+1]``
    (int64 [J+1]), with ``params`` int64 [J,11] (a row per file, :class:`ImageParams`' fields in
    order: read them with :meth:`image_params`) and ``scales`` int64 [J] (None: all 1, full
    decodes); ``decoded`` uint8 [F,3,H,W] holds the worker-decoded samples. ``on_device`` bool [B]
    says which kind each sample is, in batch order.
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

    def image_params(self) -> list[ImageParams]:
        """Each encoded file's parameters, read from the host tensor (nothing waits on a device)."""
        return [ImageParams(*row) for row in self.params.tolist()]

    def pin_memory(self) -> EncodedBatch:
        """What DataLoader's ``pin_memory=True`` calls: the bytes the device decoder reads and the
        pixels copied to the device, each in one pinned buffer (the parameters are read on the host)."""
        return replace(self, data=self.data.pin_memory(), decoded=self.decoded.pin_memory())


def pack_images(images: list[EncodedImage | torch.Tensor], *, caller: str, fix: str) -> torch.Tensor | EncodedBatch:
    """Batch images, each an :class:`EncodedImage` or a uint8 tensor (the worker path's): with no
    file for the device to decode, the pixels are stacked (:func:`stack_images`); else they give an
    :class:`EncodedBatch` of both kinds.

    Raises:
        ValueError: output sizes that differ; the message names ``caller`` and ``fix``.
    """
    on_device = [isinstance(image, EncodedImage) and image.on_device for image in images]
    worker = [image for image, flag in zip(images, on_device) if not flag]
    decoded = stack_images([_pixels(image) for image in worker], caller=caller, fix=fix)
    encoded = [image for image, flag in zip(images, on_device) if flag]
    if not encoded:
        return decoded
    sizes = {image.params.output_size for image in encoded} | ({tuple(decoded.shape[-2:])} if len(decoded) else set())
    if len(sizes) > 1:
        raise ValueError(f"{caller}: images of sizes {sorted(sizes)} in one batch; {fix}")
    lengths = np.array([len(image.data) for image in encoded], dtype=np.int64)
    offsets = torch.from_numpy(np.concatenate([[0], np.cumsum(lengths)]))
    data = torch.empty(int(offsets[-1]), dtype=torch.uint8)
    if get_worker_info() is not None:
        data.share_memory_()  # unwritten yet: each file is copied once, into what crosses to the main process
    view = data.numpy()
    for image, start, stop in zip(encoded, offsets[:-1].tolist(), offsets[1:].tolist()):
        view[start:stop] = np.frombuffer(image.data, dtype=np.uint8)
    return EncodedBatch(
        data=data,
        offsets=offsets,
        params=torch.tensor([image.params for image in encoded], dtype=torch.int64),
        decoded=decoded,
        on_device=torch.tensor(on_device),
        sources=tuple(image.source for image in encoded),
        on_error=check_on_error(encoded[0].on_error),
        scales=torch.tensor([image.scale for image in encoded], dtype=torch.int64),
    )


def _pixels(image: EncodedImage | torch.Tensor) -> torch.Tensor:
    """The worker-decoded pixels of a batch entry the device does not decode."""
    return image.pixels if isinstance(image, EncodedImage) else image
