"""Images and labels streamed from WebDataset tar shards (the ImageNet layout), split across ranks and workers.

    shards = ImageShards("s3://bucket/imagenet/train-{000000..001023}.tar", transform=train_transform(224),
                         order=StreamOrder(shuffle_buffer=5000, seed=0))
    loader = vision_loader(shards, batch_size=256, device="cuda", stateful=True)

A sample is the consecutive members that share a key: ``000042.jpg`` (or ``.jpeg``, ``.png``,
``.webp``, ...; one image a key) and its label, ``000042.cls`` (an integer in ASCII) or
``000042.json`` (``label="json"`` reads its ``"label"``, ``label="json:<key>"`` another key). A label
may be a class name, numbered by its place in ``classes`` (a list, or a file of one name a line);
a number must then be below ``len(classes)``. Images decode as :class:`ImageFolderDataset` decodes
the same file (EXIF, CMYK, palette, 16-bit PNG, the pixel limit, reduced-scale JPEG for the
transform's ``draft_size``). Shards are read, shared out and resumed as every shard stream of the
library is (:class:`recipes.core.streams.ShardStream`): local paths or fsspec URLs, plain or
compressed, one sequential read each, never extracted; each epoch the samples are cut into
``world_size x num_workers`` runs equal by count; a state holds positions, never data. A sample's
augmentation is seeded by ``(seed, epoch, key)``, so batches do not depend on the worker count.
"""

from __future__ import annotations

import copy
import functools
import json
import os
import zlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch
from torchvision import tv_tensors

from recipes.core import (
    DataError,
    ReadOptions,
    StreamOrder,
    UserCode,
    caches,
    check_on_error,
    checks,
    decode_image,
    hooks,
    imaging,
    ranks,
    sample_seed,
    seeded,
    skip_or_raise,
    storage,
    streams,
)
from recipes.vision.folder import dense_image

IMAGE_MEMBERS = ("jpg", "jpeg", "png", "webp", "bmp", "gif", "tif", "tiff")  # a sample's image, as extensions
LABEL_RULES = ("cls", "json", "json:<key>")
# A member is read whole, and refused before a byte of it is read above this: more than any image
# under the pixel limit needs.
MAX_MEMBER_BYTES = 512 * 2**20
SHARDS_READ_OPTIONS = ("strict_decode", "cache_limit_bytes", "verify_cache", "verify_shards")


class ImageShards(streams.ShardStream):
    """Iterate ``(image tv_tensors.Image uint8 [3,H,W], label int)``, as :class:`ImageFolderDataset` indexes.

    Args:
        paths: the shards: a list, a folder (its ``*.tar``), a ``{000..099}`` range or a glob, local
            or fsspec URLs (``s3://``, ``gs://``, ``https://``); ``.tar``, ``.tar.gz``, ``.tgz``.
        transform: applied to the uint8 image (v2 transforms, ``train_transform``), seeded per sample.
        label: where a sample's label is: ``"cls"``, ``"json"`` (its ``"label"``) or ``"json:<key>"``.
        classes: the class names, a list or a file of one name a line; labels that are names are
            numbered by it, numbers checked against it. None: labels must be numbers.
        order: a :class:`recipes.core.StreamOrder`: the shuffle buffer, its seed, and a rank and
            world size to use instead of ``torch.distributed``'s.
        on_error: ``"raise"`` a DataError naming the shard and member, or ``"skip"`` the sample with a warning.
        storage_options: passed to fsspec for URL shards; never shown.
        cache_dir: keep remote shards here once read whole, so that later epochs read local disk.
        read_options: a :class:`recipes.core.ReadOptions`; this reads its ``strict_decode``,
            ``cache_limit_bytes``, ``verify_cache`` and ``verify_shards`` (a prepared folder's sha256s).
    """

    max_member_bytes = MAX_MEMBER_BYTES

    def __init__(
        self,
        paths: str | os.PathLike | Sequence[str | os.PathLike],
        *,
        transform: Callable[[Any], Any] | None = None,
        label: str = "cls",
        classes: Sequence[str] | str | os.PathLike | None = None,
        order: StreamOrder | None = None,
        on_error: str = "raise",
        storage_options: dict[str, Any] | None = None,
        cache_dir: str | os.PathLike | None = None,
        read_options: ReadOptions | None = None,
    ) -> None:
        order = streams.order_or_default(order, "ImageShards")
        options = checks.read_options_or_default(read_options, "ImageShards", SHARDS_READ_OPTIONS)
        self.label_key = _label_key(label)
        self.classes = _class_names(classes)
        self.class_to_idx = None if self.classes is None else {name: k for k, name in enumerate(self.classes)}
        # listed and indexed once per job: on rank 0, sent to the others; workers get them with the dataset
        listed = functools.partial(streams.listed_shards, paths, storage_options, max_member_bytes=MAX_MEMBER_BYTES,
                                   cache_dir=cache_dir, verify=options.verify_shards)
        self.shards, self.index = ranks.shared_result(listed, order.rank, order.world_size)
        self.storage_options, self.on_error = storage_options, check_on_error(on_error)
        self.cache = None if cache_dir is None else caches.DiskCache(cache_dir, options.cache_limit_bytes,
                                                                     verify=options.verify_cache)
        self.transform, self.strict_decode, self.shuffle_buffer = transform, options.strict_decode, order.shuffle_buffer
        self.draft_size = transform.draft_size if isinstance(transform, hooks.SetsDraftSize) else None
        names = zlib.crc32(chr(10).join(map(storage.basename, self.shards)).encode())  # what a state names as its data
        super().__init__(order.seed, order.rank, order.world_size, source=f"{len(self.shards)} shards {names:08x}")
        self.epochs = streams.ShardEpochs(self.index, order.shuffle_buffer, type(self).__name__)
        self.plan = None  # decode="device": an ImagePlan (encoded)

    def batch_contract(self) -> dict[str, Any]:
        """What a mixed dataset must share with this one (recipes.core.loading.mixing)."""
        return {"collate": "image_collate", "classes": self.classes, "class_to_idx": self.class_to_idx}

    def encoded(self) -> ImageShards:
        """``decode="device"``'s view of these shards (:func:`recipes.vision.vision_loader` takes it):
        the same stream, its state included, whose images are ``EncodedImage`` s, each JPEG's bytes
        with the crop and flip drawn as the transform draws them (from the sample's seed). An image
        the device cannot decode (PNG, CMYK, progressive, EXIF-turned), and every image under
        ``strict_decode`` (only libjpeg on the CPU reports corrupt data), is decoded here as before.

        Raises:
            ValueError: the transform is one no plan reads (``train_transform``/``eval_transform`` are).
        """
        plan = imaging.ImagePlan(self.transform)
        view = copy.copy(self)  # its cursor is this stream's: a state saved through the view resumes either
        view.plan = None if self.strict_decode else plan
        return view

    def _items(self, shard: str, key: str, files: dict[str, bytes], epoch: int) -> Iterator[tuple[Any, int]]:
        where = f"{storage.shown(shard)}:{key}"
        # a seed per sample: the augmentation does not depend on the worker
        seed = sample_seed(self.cursor.seed, epoch, zlib.crc32(f"{storage.basename(shard)}/{key}".encode()))
        try:
            extension = image_member(files, where)
            target = sample_label(files, where, self.label_key, self.class_to_idx)
            image = self._image(files[extension], f"{where}.{extension}", seed)
        except DataError as error:
            skip_or_raise(error, self.on_error)
            return
        yield image, target

    def _image(self, data: bytes, source: str, seed: int) -> Any:
        """A sample's image as the loader ships it: decoded and transformed, or, with a plan
        (:meth:`encoded`), its bytes and draws (the pixels, for an image the device cannot decode)."""
        if self.plan is not None:
            with seeded(seed), UserCode(f"shard {source}"):
                return imaging.encode_image(data, source, self.plan, self.transform, on_error=self.on_error,
                                            draft_size=self.draft_size)
        image = decode_image(data, source=source, draft_size=self.draft_size, contiguous=False,
                             strict=self.strict_decode).as_subclass(tv_tensors.Image)
        if self.transform is not None:
            with seeded(seed), UserCode(f"shard {source}"):
                image = self.transform(image)
        if not isinstance(image, torch.Tensor):  # a transform that returns something else: as it returns it
            return image
        return tv_tensors.Image(dense_image(image.as_subclass(torch.Tensor)))

def image_member(files: dict[str, bytes], where: str) -> str:
    """The extension of a sample's one image among its ``files``; a :class:`DataError` starting
    with ``where`` if it has none or two."""
    found = [extension for extension in IMAGE_MEMBERS if extension in files]
    if not found:
        raise DataError(f"{where}: no image ({'/'.join(IMAGE_MEMBERS)}) among {sorted(files)}")
    if len(found) > 1:
        raise DataError(f"{where}: two images under one key ({', '.join(found)}); give each its own key")
    return found[0]

def sample_label(files: dict[str, bytes], where: str, key: tuple[str, str | None],
                 class_to_idx: dict[str, int] | None) -> int:
    """A sample's label from its ``files`` (extension -> bytes): ``key`` is ``("cls", None)`` or
    ``("json", field)``; a name is looked up in ``class_to_idx``, a number checked against it. A
    :class:`DataError` starting with ``where`` says what is missing or wrong."""
    member, field = key
    if member not in files:
        raise DataError(f"{where}: no label ({member}) among {sorted(files)}")
    try:
        text = files[member].decode("utf-8").strip()
        value = text if field is None else json.loads(text)[field]
    except (UnicodeDecodeError, ValueError, TypeError, KeyError) as error:
        what = f"{field!r} of its .json" if field else "its .cls"
        raise DataError(f"{where}: cannot read the label from {what} ({type(error).__name__}: {error})") from None
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        value = int(value)
    if isinstance(value, str):
        if class_to_idx is None:
            raise DataError(f"{where}: the label {value!r} is a class name; pass classes=[...] (or a file of names)")
        if value not in class_to_idx:
            raise DataError(f"{where}: the label {value!r} is not one of the {len(class_to_idx)} classes")
        return class_to_idx[value]
    if not isinstance(value, int) or isinstance(value, bool):
        raise DataError(f"{where}: the label {value!r} is neither a class index nor a class name")
    if value < 0 or (class_to_idx is not None and value >= len(class_to_idx)):
        bound = "0 or more" if class_to_idx is None else f"in 0..{len(class_to_idx) - 1}"
        raise DataError(f"{where}: the label {value} is out of range (a class index is {bound})")
    return value


def _label_key(label: str) -> tuple[str, str | None]:
    """``label`` (``"cls"``, ``"json"``, ``"json:<key>"``) as ``(member, field)``."""
    if label == "cls":
        return "cls", None
    if label == "json":
        return "json", "label"
    if isinstance(label, str) and label.startswith("json:") and len(label) > 5:
        return "json", label[5:]
    raise ValueError(f"label must be one of {LABEL_RULES}, got {label!r}")


def _class_names(classes: Sequence[str] | str | os.PathLike | None) -> list[str] | None:
    """The class names of a list, or of a file holding one a line (blank lines passed over)."""
    if classes is None:
        return None
    if isinstance(classes, (str, os.PathLike)):
        lines = storage.read_bytes(classes).decode("utf-8").splitlines()
        classes = [line.strip() for line in lines if line.strip()]
    names = list(classes)
    if not names or not all(isinstance(name, str) and name for name in names) or len(set(names)) < len(names):
        shown = f"{names[:5]!r}" + ("..." if len(names) > 5 else "")
        raise ValueError(f"classes must be distinct, non-empty names, got {shown}")
    return names
