"""Images beyond ``read_image``: files' bytes and headers, the pixel bound, ``decode="device"``'s
two sides (a worker ships bytes and crop parameters; the device decodes a batch at once), and an
image written again at a bounded size (``prepare``).

``from recipes.core import imaging``, then ``imaging.with_decode(...)``: one name of the facade for these, each
documented on the reference page and loaded on first use.
"""

# ruff: noqa: F401  (the TYPE_CHECKING block below imports each name for static readers)
from __future__ import annotations

from typing import TYPE_CHECKING

from recipes.core.contracts.lazy import lazy_names

# public name -> the module of recipes.core that defines it
HOMES = {
    "MAX_PIXELS": "pixels.images",
    "image_size": "pixels.images",
    "open_image": "pixels.images",
    "read_file": "pixels.images",
    "DeviceView": "pixels.device_decode",
    "EncodedBatch": "pixels.device_decode",
    "ImagePlan": "pixels.device_decode",
    "encode_image": "pixels.device_decode",
    "pack_images": "pixels.device_decode",
    "with_decode": "pixels.device_decode",
    "EXTENSION_OF_FORMAT": "pixels.reencode",
    "psnr": "pixels.reencode",
    "reencode_options": "pixels.reencode",
    "resized_jpeg": "pixels.reencode",
}
__all__ = sorted(HOMES)
__getattr__, __dir__ = lazy_names(__name__, HOMES)

if TYPE_CHECKING:  # where each name lives, for static readers
    from recipes.core.pixels.device_decode import (
        DeviceView,
        EncodedBatch,
        ImagePlan,
        encode_image,
        pack_images,
        with_decode,
    )
    from recipes.core.pixels.images import MAX_PIXELS, image_size, open_image, read_file
    from recipes.core.pixels.reencode import EXTENSION_OF_FORMAT, psnr, reencode_options, resized_jpeg
