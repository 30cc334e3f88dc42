"""Image decoding shared by every domain: file or bytes -> ``uint8 [3,H,W]`` RGB tensor.

    image = read_image("cat.jpg")                       # torch.uint8, CHW, RGB, EXIF applied
    image = decode_image(data, source="shard-0003.tar:cat.jpg")
    width, height = image_size("cat.jpg")               # header only, no pixel decode

What it guarantees, whatever the file:
- EXIF orientation is applied, so a phone photo stored sideways comes out upright.
- Grayscale, palette, RGBA, LA, CMYK and 1-bit images become plain RGB exactly as PIL's
  ``ImageOps.exif_transpose(im).convert("RGB")`` would; 16-bit images are scaled to 8 bits
  (PIL's own ``convert("RGB")`` clips them to white instead).
- A decompression bomb is refused from the header, before any pixel memory is allocated.
- A truncated, empty or non-image file raises :class:`DataError` naming the file; it is never
  filled with grey.

Speed: JPEG and PNG go through ``torchvision.io.decode_image`` (libjpeg-turbo / libpng straight
into a tensor), about 2x faster than PIL plus the numpy copy on a 500x375 JPEG; it matches
PIL's pixels exactly for every mode above. Other formats (GIF, WebP, BMP, TIFF...) go through
PIL. The header is read by PIL's lazy ``Image.open`` (~30 us), which also gives the size for
the bomb check. ``draft_size`` asks libjpeg for a DCT-domain downscale (1/2, 1/4 or 1/8) when
the caller will shrink the image anyway; that decode runs through PIL.
"""

from __future__ import annotations

import io
import os
import warnings
from pathlib import Path

import numpy as np
import torch
from PIL import Image, ImageOps

try:
    from torchvision.io import ImageReadMode
    from torchvision.io import decode_image as _tv_decode_image
    from torchvision.io.image import _has_image_ops

    _TORCHVISION_FORMATS = {"JPEG", "PNG"} if _has_image_ops() else set()
except ImportError:  # a torchvision without image decoders: PIL decodes everything
    _TORCHVISION_FORMATS = set()

from recipes.core.errors import DataError

# PIL's default Image.MAX_IMAGE_PIXELS (~89.5 MP, a 9459x9459 image): enough for any photo,
# while a 16000x16000 bomb would need 768 MB as RGB before a single check ran.
MAX_PIXELS = 89_478_485

_EXIF_ORIENTATION = 0x0112


def read_image(
    path: str | os.PathLike, *, max_pixels: int = MAX_PIXELS, draft_size: tuple[int, int] | None = None
) -> torch.Tensor:
    """Read an image file into a ``uint8 [3,H,W]`` RGB tensor; see :func:`decode_image`."""
    try:
        data = Path(path).read_bytes()
    except OSError as error:
        raise DataError(f"{path}: cannot read file ({error.strerror or error})") from None
    return decode_image(data, source=str(path), max_pixels=max_pixels, draft_size=draft_size)


def decode_image(
    data: bytes,
    *,
    source: str = "<bytes>",
    max_pixels: int = MAX_PIXELS,
    draft_size: tuple[int, int] | None = None,
) -> torch.Tensor:
    """Decode encoded image bytes into a ``uint8 [3,H,W]`` RGB tensor.

    Args:
        data: the encoded file content (JPEG, PNG, GIF, WebP, BMP, TIFF, ...).
        source: what to call the data in error messages, usually the file path.
        max_pixels: refuse images whose header claims more pixels than this.
        draft_size: ``(width, height)`` the caller will resize to. A JPEG at least twice that
            size in both directions is decoded at 1/2, 1/4 or 1/8 scale, never below it.

    Raises:
        DataError: empty, unreadable, truncated or oversized image; the message names ``source``.
    """
    image = open_image(data, source=source, max_pixels=max_pixels)
    if draft_size is not None and image.format == "JPEG" and _draft(image, draft_size):
        return _decode_with_pil(image, source)
    if image.format in _TORCHVISION_FORMATS:
        return _decode_with_torchvision(data, source)
    return _decode_with_pil(image, source)


def open_image(data: bytes, *, source: str = "<bytes>", max_pixels: int = MAX_PIXELS) -> Image.Image:
    """Parse only the header of ``data`` with PIL; refuse empty, unknown and oversized images."""
    if not data:
        raise DataError(f"{source}: empty file (0 bytes)")
    try:
        with warnings.catch_warnings():
            # We apply our own limit below; PIL's warning would only be noise next to it.
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            image = Image.open(io.BytesIO(data))
    except Image.DecompressionBombError as error:
        raise DataError(f"{source}: refused as a decompression bomb ({error})") from None
    except Image.UnidentifiedImageError:
        raise DataError(f"{source}: not an image file (unknown format, {len(data)} bytes)") from None
    except (OSError, ValueError, SyntaxError) as error:
        raise DataError(f"{source}: corrupt image header ({error})") from None
    width, height = image.size
    if width * height > max_pixels:
        raise DataError(
            f"{source}: refused as a decompression bomb: header claims {width}x{height} = "
            f"{width * height:,} pixels, over the limit of {max_pixels:,}"
        )
    if width == 0 or height == 0:
        raise DataError(f"{source}: image has zero size ({width}x{height})")
    return image


def image_size(path: str | os.PathLike) -> tuple[int, int]:
    """Return ``(width, height)`` as displayed (EXIF orientation applied), from the header only."""
    try:
        with Image.open(path) as image:
            width, height = image.size
            if image.getexif().get(_EXIF_ORIENTATION) in (5, 6, 7, 8):
                width, height = height, width
    except (OSError, ValueError, SyntaxError) as error:
        raise DataError(f"{path}: cannot read image header ({error})") from None
    return width, height


def _draft(image: Image.Image, size: tuple[int, int]) -> bool:
    """Ask libjpeg for a DCT-domain downscale to no less than ``size``; True if it will."""
    width, height = size
    if image.getexif().get(_EXIF_ORIENTATION) in (5, 6, 7, 8):
        width, height = height, width  # the file stores the image sideways
    if image.width < 2 * width or image.height < 2 * height:
        return False
    return image.draft("RGB", (width, height)) is not None


def _decode_with_torchvision(data: bytes, source: str) -> torch.Tensor:
    encoded = torch.frombuffer(bytearray(data), dtype=torch.uint8)
    try:
        with warnings.catch_warnings():
            # torchvision 0.29 deprecates its decoders in favour of TorchCodec; they still work
            # and win on speed. read_image falls back to PIL if a release drops them.
            warnings.simplefilter("ignore", DeprecationWarning)
            image = _tv_decode_image(encoded, mode=ImageReadMode.RGB, apply_exif_orientation=True)
    except RuntimeError as error:
        reason = str(error).strip().splitlines()[-1]
        raise DataError(f"{source}: cannot decode image ({reason})") from None
    if image.dtype == torch.uint16:
        # 16-bit PNG: keep the top 8 bits, the faithful 8-bit rendering of the same picture.
        image = (image.to(torch.int32) >> 8).to(torch.uint8)
    return image.contiguous()


def _decode_with_pil(image: Image.Image, source: str) -> torch.Tensor:
    try:
        image.load()
        image = ImageOps.exif_transpose(image)
        if image.mode in ("I;16", "I;16B", "I;16L", "I;16N", "I"):
            gray = (np.asarray(image, dtype=np.int64) >> 8).clip(0, 255).astype(np.uint8)
            array = np.repeat(gray[:, :, None], 3, axis=2)
        else:
            array = np.array(image.convert("RGB"))
    except (OSError, ValueError, SyntaxError) as error:
        raise DataError(f"{source}: cannot decode image ({error})") from None
    return torch.from_numpy(array).permute(2, 0, 1).contiguous()
