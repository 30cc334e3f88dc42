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


def _native_decode_op():
    """torchvision's registered C++ decode op, when its schema is the one we know.

    ``torchvision.io.decode_image`` is a Python wrapper around it that logs API usage and, since
    0.29, emits a DeprecationWarning on every call: ~25 us, a third of decoding a small JPEG.
    Calling the op directly skips that; any other schema falls back to the public wrapper.
    """
    try:
        op = torch.ops.image.decode_image
        names = [argument.name for argument in op.default._schema.arguments]
    except (AttributeError, RuntimeError):
        return None
    return op if names == ["data", "mode", "apply_exif_orientation"] else None


_DECODE_OP = _native_decode_op() if _TORCHVISION_FORMATS else None

from recipes.core.errors import DataError

# PIL's default Image.MAX_IMAGE_PIXELS (~89.5 MP, a 9459x9459 image): enough for any photo,
# while a 16000x16000 bomb would need 768 MB as RGB before a single check ran.
MAX_PIXELS = 89_478_485

_EXIF_ORIENTATION = 0x0112


def read_image(
    path: str | os.PathLike,
    *,
    max_pixels: int = MAX_PIXELS,
    draft_size: tuple[int, int] | None = None,
    contiguous: bool = True,
) -> torch.Tensor:
    """Read an image file into a ``uint8 [3,H,W]`` RGB tensor; see :func:`decode_image`."""
    try:
        with open(path, "rb") as file:  # plain open: pathlib's parsing costs ~10 us per call
            data = bytearray(file.read())  # writable: torch.frombuffer needs no second copy
    except OSError as error:
        raise DataError(f"{path}: cannot read file ({error.strerror or error})") from None
    except ValueError as error:  # a NUL byte, or a name the file system cannot encode
        raise DataError(f"{path!r}: cannot read file ({error})") from None
    return decode_image(data, source=str(path), max_pixels=max_pixels, draft_size=draft_size, contiguous=contiguous)


def decode_image(
    data: bytes,
    *,
    source: str = "<bytes>",
    max_pixels: int = MAX_PIXELS,
    draft_size: tuple[int, int] | None = None,
    contiguous: bool = True,
) -> torch.Tensor:
    """Decode encoded image bytes into a ``uint8 [3,H,W]`` RGB tensor.

    Args:
        data: the encoded file content (JPEG, PNG, GIF, WebP, BMP, TIFF, ...).
        source: what to call the data in error messages, usually the file path.
        max_pixels: refuse images whose header claims more pixels than this.
        draft_size: ``(width, height)`` the caller will resize to. A JPEG at least twice that
            size in both directions is decoded at 1/2, 1/4 or 1/8 scale, never below it.
        contiguous: False skips the final copy and returns the decoder's own layout, usually
            a ``[3,H,W]`` view of ``[H,W,3]`` memory (channels-last strides). An antialiased
            uint8 resize reads that layout about 2x faster than CHW (it packs pixels as RGBA
            words), so a crop/resize pipeline saves the copy and half the resize time.

    Raises:
        DataError: empty, unreadable, truncated or oversized image; the message names ``source``.
    """
    size = header_size(data)
    if (
        size is not None
        and size[2] in _TORCHVISION_FORMATS
        and 0 < size[0] * size[1] <= max_pixels
        and (draft_size is None or not _may_draft(size, draft_size))
    ):
        # The size is known and safe, and no reduced decode applies: skip PIL's header parse
        # (~60-150 us, as long as decoding a small JPEG) and go straight to the decoder PIL
        # would have led to anyway.
        decoded = _decode_with_torchvision(data, source)
        return decoded.contiguous() if contiguous else decoded
    image = open_image(data, source=source, max_pixels=max_pixels)
    if draft_size is not None and image.format == "JPEG" and _draft(image, draft_size):
        decoded = _decode_with_pil(image, source)
    elif image.format in _TORCHVISION_FORMATS:
        decoded = _decode_with_torchvision(data, source)
    else:
        decoded = _decode_with_pil(image, source)
    return decoded.contiguous() if contiguous else decoded


# JPEG start-of-frame markers (C4 DHT, C8 JPG and CC DAC are not frames); D0-D7 (RSTn) and 01
# (TEM) stand alone, without a length.
_JPEG_FRAMES = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}
_JPEG_STANDALONE = frozenset(range(0xD0, 0xD8)) | {0x01}


def header_size(data: bytes) -> tuple[int, int, str] | None:
    """``(width, height, "JPEG" | "PNG")`` as stored (before EXIF), read from the bytes' header.

    A few microseconds, no PIL. It walks the JPEG segments the way libjpeg does and returns
    None for anything it is not sure of (other formats, odd markers, a cut header), so callers
    fall back to :func:`open_image`.
    """
    if data[:8] == b"\x89PNG\r\n\x1a\n":
        if data[8:16] != b"\x00\x00\x00\rIHDR" or len(data) < 24:
            return None
        return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big"), "PNG"
    if data[:2] != b"\xff\xd8":
        return None
    position, end = 2, len(data)
    while position + 4 <= end:
        if data[position] != 0xFF:
            return None  # libjpeg would skip garbage here; leave such files to PIL
        marker = data[position + 1]
        if marker == 0xFF:  # fill byte
            position += 1
        elif marker in _JPEG_STANDALONE:
            position += 2
        elif marker in _JPEG_FRAMES:
            if position + 9 > end:
                return None
            height = int.from_bytes(data[position + 5 : position + 7], "big")
            return int.from_bytes(data[position + 7 : position + 9], "big"), height, "JPEG"
        elif marker in (0xD8, 0xD9, 0xDA):  # a second start, the end or the scan before a frame
            return None
        else:
            length = int.from_bytes(data[position + 2 : position + 4], "big")
            if length < 2:
                return None
            position += 2 + length
    return None


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


def _may_draft(stored: tuple[int, int, str], size: tuple[int, int]) -> bool:
    """Could :func:`_draft` reduce this JPEG, whatever its EXIF orientation says? (no PIL)"""
    width, height, kind = stored
    smallest = min(size)
    return kind == "JPEG" and width >= 2 * smallest and height >= 2 * smallest


def _draft(image: Image.Image, size: tuple[int, int]) -> bool:
    """Ask libjpeg for a DCT-domain downscale to no less than ``size``; True if it will."""
    width, height = size
    if image.getexif().get(_EXIF_ORIENTATION) in (5, 6, 7, 8):
        width, height = height, width  # the file stores the image sideways
    if image.width < 2 * width or image.height < 2 * height:
        return False
    return image.draft("RGB", (width, height)) is not None


def _decode_with_torchvision(data: bytes, source: str) -> torch.Tensor:
    encoded = torch.frombuffer(data if isinstance(data, bytearray) else bytearray(data), dtype=torch.uint8)
    try:
        if _DECODE_OP is not None:
            image = _DECODE_OP(encoded, ImageReadMode.RGB.value, True)
        else:
            with warnings.catch_warnings():
                # torchvision 0.29 deprecates its decoders in favour of TorchCodec; they still
                # work and win on speed. read_image falls back to PIL if a release drops them.
                warnings.simplefilter("ignore", DeprecationWarning)
                image = _tv_decode_image(encoded, mode=ImageReadMode.RGB, apply_exif_orientation=True)
    except RuntimeError as error:
        reason = str(error).strip().splitlines()[-1]
        raise DataError(f"{source}: cannot decode image ({reason})") from None
    if image.dtype == torch.uint16:
        # 16-bit PNG: keep the top 8 bits, the faithful 8-bit rendering of the same picture.
        image = (image.to(torch.int32) >> 8).to(torch.uint8)
    return image  # [3,H,W] view of [H,W,3] memory; decode_image makes it contiguous if asked


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
    return torch.from_numpy(array).permute(2, 0, 1)  # a view; decode_image copies if asked
