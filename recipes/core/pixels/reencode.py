"""An image written again at a bounded size: what ``prepare`` does to each image of every domain.

    data, extension, psnr, (height, width) = resized_jpeg(original, "a.png", max_side=320, quality=90)

An image whose longer side is over ``max_side``, or that is not a JPEG, is decoded as the loaders
decode it (:func:`recipes.core.pixels.images.decode_image`: EXIF turns, CMYK, palette and 16-bit
PNG, the bomb limit), its longer side resized to ``max_side`` (antialiased, never enlarged) and
encoded by PIL as a JPEG of ``quality``; its PSNR against the resized image says what the encode
lost. A JPEG within the bound keeps its bytes, and so does every image when ``max_side`` is 0.
"""

from __future__ import annotations

import io
import math

import torch
from PIL import Image
from torchvision.transforms.v2 import functional as F

from recipes.core.contracts.errors import DataError
from recipes.core.pixels.images import decode_image, open_image

# PIL's format name -> the extension a shard member gets, whatever the source file was called
EXTENSION_OF_FORMAT = {"JPEG": "jpg", "PNG": "png", "WEBP": "webp", "BMP": "bmp", "GIF": "gif", "TIFF": "tif"}


def reencode_options(max_side: int, quality: int) -> dict[str, int]:
    """``{"max_side": ..., "quality": ...}`` for :func:`resized_jpeg`, checked: what every image
    domain's ``prepare`` records in its manifest. A ValueError names the bad value."""
    if isinstance(max_side, bool) or not isinstance(max_side, int) or max_side < 0:
        raise ValueError(f"max_side must be an int >= 0 (0 keeps the files' bytes), got {max_side!r}")
    if isinstance(quality, bool) or not isinstance(quality, int) or not 1 <= quality <= 95:
        raise ValueError(f"quality must be an int in [1, 95] (PIL's JPEG range), got {quality!r}")
    return {"max_side": max_side, "quality": quality}


def resized_jpeg(data: bytes, where: str, max_side: int, quality: int) -> tuple[bytes, str, float | None,
                                                                                 tuple[int, int] | None]:
    """``(bytes, extension, PSNR, (height, width))`` of the image ``data`` as the module docstring
    says: the re-encoded JPEG's PSNR and the size it decodes to, or None and None where ``data`` is
    kept. A DataError names ``where``."""
    header = open_image(data, source=where)
    if max_side == 0 or (header.format == "JPEG" and max(header.size) <= max_side):
        if header.format not in EXTENSION_OF_FORMAT:
            raise DataError(f"{where}: a {header.format} image, which a shard does not hold; prepare it with "
                            "max_side > 0")
        return data, EXTENSION_OF_FORMAT[header.format], None, None
    image = decode_image(data, source=where)
    height, width = image.shape[-2:]
    if max(height, width) > max_side:
        scale = max_side / max(height, width)
        image = F.resize(image, [max(1, round(height * scale)), max(1, round(width * scale))], antialias=True)
    buffer = io.BytesIO()
    Image.fromarray(image.permute(1, 2, 0).contiguous().numpy()).save(buffer, "JPEG", quality=quality)
    encoded = buffer.getvalue()
    return encoded, "jpg", psnr(decode_image(encoded, source=where), image), (image.shape[-2], image.shape[-1])


def psnr(a: torch.Tensor, b: torch.Tensor) -> float:
    """The peak signal-to-noise ratio of two uint8 images of one shape, in dB (inf when equal)."""
    mse = torch.mean((a.double() - b.double()) ** 2).item()
    return math.inf if mse == 0 else 10 * math.log10(255**2 / mse)
