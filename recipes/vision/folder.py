"""Image classification from a folder per class: ``torchvision.datasets.ImageFolder``, made fast.

    dataset = ImageFolderDataset("imagenet/train", train_transform(224))
    loader = vision_loader(dataset, batch_size=256, device="cuda", seed=0, stateful=True)
    for images, labels in DevicePrefetcher(loader, "cuda"):   # normalised float32 on the GPU
        loss = criterion(model(images), labels)

``root/<class>/**/<file>`` gives exactly ImageFolder's ``classes``, ``class_to_idx``, ``samples``
and ``targets``: same walk, same order, same extensions (case-insensitive), nested folders
included, other files ignored, and the same ``FileNotFoundError`` for an empty class folder.

Why it is faster than ImageFolder's PIL pipeline (figures in ``benchmarks/README.md``):

- Images are decoded straight into a tensor and keep the decoder's ``[H,W,3]`` memory all the
  way to the batch: no CHW transpose, and torch's antialiased uint8 resize is fastest on it.
- Augmentation runs on uint8 tensors (``train_transform``), and batches stay uint8, a quarter
  of float32's bytes, until ``DevicePrefetcher`` normalises each batch once, on the device.

Items and batches are therefore channels-last in memory (shape still ``[3,H,W]`` /
``[B,3,H,W]``), which GPU convolutions prefer; ``.contiguous()`` gives CHW memory.

A JPEG much larger than the transform's output is decoded at reduced scale (libjpeg's DCT
scaling, through PIL's ``draft``), never below ``draft_size``: the presets set it so that every
crop and resize is still a downscale (see ``transforms``). Other formats decode in full.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch.utils.data import DataLoader, Dataset, IterableDataset
from torchvision import tv_tensors
from torchvision.datasets.folder import IMG_EXTENSIONS

from recipes.core import (
    ClassFolderDataset,
    DataError,
    ReadOptions,
    UserCode,
    build_loader,
    check_on_error,
    checks,
    drop_skipped,
    hooks,
    imaging,
    read_image,
    skip_or_raise,
)


class ImageFolderDataset(ClassFolderDataset):
    """``root/<class>/**/<image>`` -> ``(tv_tensors.Image uint8 [3,H,W], label int)``.

    Args:
        root: the folder holding one sub-folder per class (``~`` is expanded).
        transform: applied to the uint8 image, e.g. :func:`train_transform` / :func:`eval_transform`.
            An exception it raises is a :class:`recipes.core.SampleError` naming the index
            and file (a bug, not bad data: ``on_error="skip"`` does not drop it).
        extensions: file endings to include, case-insensitive; default ImageFolder's
            (``.jpg .jpeg .png .ppm .bmp .pgm .tif .tiff .webp``).
        on_error: ``"raise"`` (a :class:`DataError` naming the file) or ``"skip"`` (warn, drop).
        allow_empty: accept class folders without any image, as ImageFolder's ``allow_empty``.
        draft_size: a JPEG may be decoded at 1/2, 1/4 or 1/8 scale while it stays at least
            this ``(width, height)``; ``"auto"`` takes ``transform.draft_size`` (set by the
            presets), None always decodes in full. The module docstring says when it is safe.
            ``decode="device"`` plans and, on the CPU, decodes each JPEG at the same scale.
        read_options: a :class:`recipes.core.ReadOptions`; this reads its
            ``strict_decode`` (raise or skip, per ``on_error``, a JPEG libjpeg reports as corrupt: a
            second, full decode where ``draft_size`` drafts; with ``decode="device"`` every image is
            then decoded, and checked, in the worker).

    The index is :class:`recipes.core.ClassFolderDataset`'s, ImageFolder's: ``classes``,
    ``class_to_idx``, ``samples``, ``targets``, and :meth:`find_samples` to list the files another
    way. Its arrays (paths in a :class:`StringArray`, labels as int64) are shared by forked workers.
    """

    kind, example = "image", "cat/001.jpg"  # for the messages of an empty or missing folder

    def __init__(
        self,
        root: str | os.PathLike,
        transform: Callable[[Any], Any] | None = None,
        *,
        extensions: str | Sequence[str] | None = None,
        on_error: str = "raise",
        allow_empty: bool = False,
        draft_size: tuple[int, int] | str | None = "auto",
        read_options: ReadOptions | None = None,
    ) -> None:
        options = checks.read_options_or_default(read_options, "ImageFolderDataset", ("strict_decode",))
        self.transform = transform
        self.on_error = check_on_error(on_error)
        if draft_size == "auto":
            draft_size = transform.draft_size if isinstance(transform, hooks.SetsDraftSize) else None
        elif isinstance(draft_size, str):
            raise ValueError(f"draft_size must be 'auto', None or (width, height), got {draft_size!r}")
        self.draft_size = draft_size
        self.strict_decode = options.strict_decode
        super().__init__(root, IMG_EXTENSIONS if extensions is None else extensions, allow_empty=allow_empty)

    def batch_contract(self) -> dict[str, Any]:
        """What a mixed dataset must share with this one (recipes.core.loading.mixing)."""
        return {"collate": "image_collate", "classes": self.classes, "class_to_idx": self.class_to_idx}

    def load_image(self, index: int) -> torch.Tensor:
        """Sample ``index``'s image as uint8 [3,H,W] RGB, before the transform: its file, decoded.
        Override it to read images another way (an archive, a database); a :class:`DataError` it
        raises follows ``on_error``. ``decode="device"`` then decodes this subclass in the workers
        (:class:`DeviceImages`)."""
        # contiguous=False: the decoder's HWC memory is what the uint8 resize reads fastest
        return read_image(self.path(index), draft_size=self.draft_size, contiguous=False, strict=self.strict_decode)

    def load_target(self, index: int) -> Any:
        """Sample ``index``'s target: its class index. Override it for another target (a value
        read from a table, a set of labels); the collate must then batch what it returns."""
        return int(self.labels[index])

    def __getitem__(self, index: int) -> tuple[torch.Tensor, Any] | None:
        """``(image, target)`` of :meth:`load_image` (through the transform) and :meth:`load_target`."""
        try:
            image = self.load_image(index)
            target = self.load_target(index)
        except DataError as error:
            return skip_or_raise(error, self.on_error)
        image = image.as_subclass(tv_tensors.Image)  # what tv_tensors.Image() does, minus its checks
        if self.transform is not None:
            with UserCode.for_sample(self, index):  # a failing transform names the file
                image = self.transform(image)
        if isinstance(image, torch.Tensor):
            # dense memory, channels-last kept (no copy after a resize or flip; a crop view would
            # pin its whole source): image_collate then copies each image in one run
            image = tv_tensors.Image(dense_image(image.as_subclass(torch.Tensor)))
        return image, target

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({self.root!r}, {len(self)} images, {len(self.classes)} classes, "
            f"transform={self.transform!r}, draft_size={self.draft_size})"
        )


class DeviceImages(imaging.DeviceView):
    """``decode="device"``'s view of an :class:`ImageFolderDataset`: item ``i`` holds an ``EncodedImage``,
    the file's bytes and the crop/flip parameters drawn as ``dataset[i]`` would draw them, or, for a
    file the device cannot decode, ``dataset[i]``'s pixels. Under ``strict_decode``, or with
    ``load_image`` overridden, it is ``dataset[i]`` itself: only libjpeg on the CPU reports corrupt
    data, and only a worker runs an overridden ``load_image``.

    Raises:
        ValueError: ``dataset`` is not an ImageFolderDataset, or its transform is one no plan reads.
    """

    reads = ImageFolderDataset

    def __init__(self, dataset: ImageFolderDataset) -> None:
        super().__init__(dataset)
        self.plan = imaging.ImagePlan(dataset.transform)
        self.in_worker = dataset.strict_decode or type(dataset).load_image is not ImageFolderDataset.load_image

    def __getitem__(self, index: int) -> tuple[Any, Any] | None:
        dataset = self.dataset
        if self.in_worker:
            return dataset[index]
        try:
            with UserCode.for_sample(dataset, index):  # the transform runs here on the files the device cannot decode
                image = imaging.encode_image(dataset.path(index), None, self.plan, dataset.transform,
                                     on_error=dataset.on_error, draft_size=dataset.draft_size)
            target = dataset.load_target(index)
        except DataError as error:
            return skip_or_raise(error, dataset.on_error)
        return image, target


def device_view(dataset: Dataset) -> Dataset:
    """``decode="device"``'s view of a vision dataset: :class:`DeviceImages` of a folder (or of any
    map-style dataset it reads); tar shards ship their own (:meth:`recipes.vision.ImageShards.encoded`)."""
    if isinstance(dataset, IterableDataset):
        from recipes.vision.shards import ImageShards  # a stream, so its machinery is loaded already

        if isinstance(dataset, ImageShards):
            return dataset.encoded()
    return DeviceImages(dataset)


def dense_image(image: torch.Tensor) -> torch.Tensor:
    """``image`` in dense memory, in its own channel order: ``[H,W,C]`` memory stays channels-last."""
    if image.ndim == 3 and image.shape[0] > 1 and image.stride(0) == 1:
        return image.permute(1, 2, 0).contiguous().permute(2, 0, 1)
    return image.contiguous()


def image_collate(
    batch: Sequence[tuple[torch.Tensor, int] | None],
) -> tuple[torch.Tensor | imaging.EncodedBatch, torch.Tensor]:
    """Stack ``(image, label)`` samples: ``(uint8 [B,3,H,W], int64 [B])``.

    Images are copied once into a batch tensor allocated up front (timm's ``fast_collate``); in a
    worker, the batch then moves into shared memory in one more copy, as DataLoader's own transfer
    makes, and reaches the main process without another.
    Skipped samples (``None``) are dropped; if all were, the batch is empty (B = 0).
    With ``decode="device"`` the images are an :class:`EncodedBatch` for ``DevicePrefetcher``.

    Raises:
        ValueError: images of different sizes or dtypes; the message says which and the fix.
    """
    samples = drop_skipped(batch)
    images = imaging.pack_images(
        [image for image, _ in samples],
        caller="image_collate",
        fix="add a resize/crop transform to the dataset (train_transform(224) or eval_transform(224))",
    )
    labels = torch.tensor([label for _, label in samples], dtype=torch.int64)
    return images, labels


def vision_loader(
    dataset: Dataset,
    batch_size: int,
    *,
    train: bool = True,
    device: str | torch.device | None = None,
    seed: int | None = None,
    stateful: bool = False,
    decode: str = "worker",
    collate_fn: Callable[[list[Any]], Any] | None = None,
    **overrides: Any,
) -> DataLoader:
    """The DataLoader preset for :class:`ImageFolderDataset`, with :func:`image_collate`.

    ``decode="device"`` (``train_transform``/``eval_transform`` datasets): workers ship each JPEG's
    bytes and its crop box and flip, drawn from the sample's seed as the worker path draws them;
    ``DevicePrefetcher(loader, device)`` decodes (nvJPEG on CUDA), crops, resizes, flips and
    normalises the batch there, and on the CPU comes within a grey level of ``decode="worker"``.
    Files it cannot take (PNG, CMYK, progressive, EXIF-turned) are decoded in the worker, in the
    same batch; :class:`recipes.vision.ImageShards` ship their images the same way. Iterate it
    through the prefetcher: the raw batches hold encoded bytes (recipes.core.pixels.device_decode).
    Which to pick: a worker decodes ~460 images/s a core, so ``decode="worker"`` feeds a GPU that
    steps through N images/s with about N / 460 cores (an H200: ~11 for ResNet-50, ~28 for
    ResNet-18); with fewer cores a GPU, ``decode="device"`` and 2 workers (docs/tuning.md,
    "Decoding on the GPU or in the workers").

    Training shuffles every epoch and drops the last incomplete batch; evaluation keeps dataset
    order and every sample. Batches are split across the ranks of an initialised process group,
    and each sample's augmentation is seeded by ``(seed, epoch, index)``, so ``seed`` reproduces
    batches whatever the worker count. ``stateful=True`` returns a ``StatefulDataLoader`` that
    resumes mid-epoch. ``overrides`` are DataLoader keyword arguments (``num_workers=0``, ...;
    :func:`recipes.core.preset_kwargs`). Normalise on the device: ``DevicePrefetcher(loader, device)``.
    ``collate_fn`` is used as given; by default the collate the dataset asks for
    (its ``batch_contract()``'s ``"collate"``, :func:`recipes.core.hooks.collate_of`), else :func:`image_collate`.
    """
    collate = hooks.UsualCollate.of(image_collate) if collate_fn is None else collate_fn
    return build_loader(imaging.with_decode(dataset, decode, device_view), collate, batch_size=batch_size,
                        train=train, device=device, seed=seed, stateful=stateful, **overrides)
