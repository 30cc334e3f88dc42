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

How: JPEG and PNG go through TorchCodec's public decoders (libjpeg-turbo / libpng straight
into a tensor, EXIF applied), after a few-microsecond header read here gives the size for the
bomb check. PIL decodes everything else (GIF, WebP, BMP, TIFF...), the reduced-scale JPEG
decode that ``draft_size`` asks for, and the rare JPEG/PNG whose orientation metadata TorchCodec
reads differently from PIL. Speed and pixel parity with torchvision: see benchmarks/decode.py.
"""

from __future__ import annotations

import io
import os
import re
import warnings
from typing import Any

import numpy as np
import torch
from PIL import Image, ImageOps
from torchcodec import decoders

from recipes.core.errors import DataError
from recipes.core.image_headers import EXIF_ORIENTATION, MAX_PIXELS, header_size, jpeg_has_end, orientation_needs_pil
from recipes.core.storage import cleaned, is_url, read_bytes, shown


def read_image(
    path: str | os.PathLike,
    *,
    max_pixels: int = MAX_PIXELS,
    draft_size: tuple[int, int] | None = None,
    contiguous: bool = True,
    storage_options: dict[str, Any] | None = None,
) -> torch.Tensor:
    """Read an image file or URL into a ``uint8 [3,H,W]`` RGB tensor; see :func:`decode_image`.

    A URL (``s3://``, ``https://``...) is fetched through :mod:`recipes.core.storage`, with
    ``storage_options`` for fsspec.
    """
    data = read_file(path, storage_options)
    return decode_image(
        data, source=shown(path), max_pixels=max_pixels, draft_size=draft_size, contiguous=contiguous
    )


def read_file(path: str | os.PathLike, storage_options: dict[str, Any] | None = None) -> bytearray:
    """The bytes of a file or URL, undecoded; a :class:`DataError` naming it if it cannot be read."""
    try:
        if is_url(path):
            return bytearray(read_bytes(path, storage_options))
        with open(path, "rb") as file:  # plain open: pathlib's parsing costs ~10 us per call
            return bytearray(file.read())  # writable: torch.frombuffer needs no second copy
    except OSError as error:
        raise DataError(f"{shown(path)}: cannot read file ({error.strerror or cleaned(str(error))})") from None
    except DataError:  # from the storage layer, which names the URL already
        raise
    except ValueError as error:  # a NUL byte, or a name the file system cannot encode
        raise DataError(f"{shown(path)!r}: cannot read file ({cleaned(str(error))})") from None


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
            a ``[3,H,W]`` view of ``[H,W,3]`` memory (channels-last strides), which an
            antialiased uint8 resize reads faster than CHW.

    Raises:
        DataError: empty, unreadable, truncated or oversized image; the message names ``source``.
    """
    # A JPEG or PNG that TorchCodec will orient as PIL would: no PIL needed at all. (TorchCodec
    # also decodes GIF and WebP, but every frame of an animation at once, which the header's
    # one-frame size would not bound; PIL decodes the first frame only.)
    size = header_size(data)
    native = size is not None and not orientation_needs_pil(data, size[2])
    if native and 0 < size[0] * size[1] <= max_pixels and (draft_size is None or not _may_draft(size, draft_size)):
        decoded = _decode_with_torchcodec(data, size[2], source)
        return decoded.contiguous() if contiguous else decoded
    image = open_image(data, source=source, max_pixels=max_pixels)  # refuses bombs, empty, unknown
    if draft_size is not None and image.format == "JPEG" and _draft(image, draft_size):
        if not jpeg_has_end(data):
            # PIL stops once it has every row, so a partial download padded with zeros would
            # come out as garbage; libjpeg (the path above) refuses a JPEG with no end marker.
            raise DataError(f"{source}: cannot decode image (truncated: no end-of-image marker)")
        decoded = _decode_with_pil(image, source)
    elif native:
        decoded = _decode_with_torchcodec(data, size[2], source)
    else:
        decoded = _decode_with_pil(image, source)
    return decoded.contiguous() if contiguous else decoded


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
            if image.getexif().get(EXIF_ORIENTATION) in (5, 6, 7, 8):
                width, height = height, width
    except (OSError, ValueError, SyntaxError) as error:
        raise DataError(f"{shown(path)}: cannot read image header ({cleaned(str(error))})") from None
    return width, height


def _may_draft(stored: tuple[int, int, str], size: tuple[int, int]) -> bool:
    """Could :func:`_draft` reduce this JPEG, whatever its EXIF orientation says? (no PIL)"""
    width, height, kind = stored
    smallest = min(size)
    return kind == "JPEG" and width >= 2 * smallest and height >= 2 * smallest


def _draft(image: Image.Image, size: tuple[int, int]) -> bool:
    """Ask libjpeg for a DCT-domain downscale to no less than ``size``; True if it will."""
    width, height = size
    if image.getexif().get(EXIF_ORIENTATION) in (5, 6, 7, 8):
        width, height = height, width  # the file stores the image sideways
    if image.width < 2 * width or image.height < 2 * height:
        return False
    return image.draft("RGB", (width, height)) is not None


def _decode_with_torchcodec(data: bytes, kind: str, source: str, device: str | torch.device = "cpu") -> torch.Tensor:
    """Decode a JPEG or PNG with TorchCodec on ``device``: the call site of the PNG decoder; JPEGs go
    through :func:`decode_jpegs`, the call site of the JPEG decoder, single or batched.

    TorchCodec applies EXIF orientation, converts CMYK, palette, gray and alpha to RGB as PIL
    does, and refuses a cut file. On the CPU the result is a ``[3,H,W]`` view of ``[H,W,3]``
    memory (a turned view for EXIF 5-8). ``device="cuda"`` decodes a JPEG with nvJPEG.
    """
    encoded = torch.frombuffer(data if isinstance(data, bytearray) else bytearray(data), dtype=torch.uint8)
    if kind == "JPEG":
        return decode_jpegs([encoded], device, [source])[0]
    try:  # "auto" keeps 16 bits: libpng's own 8-bit scaling rounds instead of truncating
        image = decoders.decode_png(encoded, mode="RGB", output_dtype="auto").to(device)  # CPU only
    except (RuntimeError, ValueError) as error:
        raise DataError(f"{source}: cannot decode image ({_reason(error)})") from None
    if image.dtype == torch.uint16:
        # 16-bit PNG: keep the top 8 bits, the faithful 8-bit rendering of the same picture.
        image = (image.to(torch.int32) >> 8).to(torch.uint8)
    return image


def decode_jpegs(encoded: list[torch.Tensor], device: str | torch.device, sources: list[str]) -> list[torch.Tensor]:
    """Decode JPEGs (1-D uint8 CPU tensors) into ``uint8 [3,H,W]`` RGB on ``device``, in one call.

    On CUDA that is one batched nvJPEG call. For files
    :func:`recipes.core.image_headers.device_decodable` accepts, the CPU
    result equals :func:`decode_image`'s. A failure raises :class:`DataError` naming ``sources``.
    """
    try:
        return decoders.decode_jpeg(encoded, mode="RGB", device=device)
    except (RuntimeError, ValueError) as error:
        raise DataError(f"{', '.join(sources)}: cannot decode image ({_reason(error)})") from None


def _reason(error: Exception) -> str:
    """"decode_rows, /path/DecodeJpeg.cpp:287, Image is incomplete or truncated." -> the reason."""
    return re.sub(r"^\w+, \S+:\d+, ", "", str(error).strip().splitlines()[-1])


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
