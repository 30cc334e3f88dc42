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
from recipes.core.storage import is_url, read_bytes, shown

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
        raise DataError(f"{shown(path)}: cannot read file ({error.strerror or error})") from None
    except ValueError as error:  # a NUL byte, or a name the file system cannot encode
        raise DataError(f"{path!r}: cannot read file ({error})") from None


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
    native = size is not None and not _orientation_needs_pil(data, size[2])
    if native and 0 < size[0] * size[1] <= max_pixels and (draft_size is None or not _may_draft(size, draft_size)):
        decoded = _decode_with_torchcodec(data, size[2], source)
        return decoded.contiguous() if contiguous else decoded
    image = open_image(data, source=source, max_pixels=max_pixels)  # refuses bombs, empty, unknown
    if draft_size is not None and image.format == "JPEG" and _draft(image, draft_size):
        if not _jpeg_has_end(data):
            # PIL stops once it has every row, so a partial download padded with zeros would
            # come out as garbage; libjpeg (the path above) refuses a JPEG with no end marker.
            raise DataError(f"{source}: cannot decode image (truncated: no end-of-image marker)")
        decoded = _decode_with_pil(image, source)
    elif native:
        decoded = _decode_with_torchcodec(data, size[2], source)
    else:
        decoded = _decode_with_pil(image, source)
    return decoded.contiguous() if contiguous else decoded


# JPEG start-of-frame markers (C4 DHT, C8 JPG and CC DAC are not frames); D0-D7 (RSTn) and 01
# (TEM) stand alone, without a length.
_JPEG_FRAMES = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}
_JPEG_STANDALONE = frozenset(range(0xD0, 0xD8)) | {0x01}
_JPEG_APP1, _JPEG_SCAN = 0xE1, 0xDA


def _jpeg_segments(data: bytes):
    """Yield ``(marker, start, end)`` of each JPEG header segment's payload, up to the first scan.

    Walks the segments the way libjpeg does, and stops at anything it is not sure of (garbage
    between segments, a second start, a cut header).
    """
    position, end = 2, len(data)
    while position + 4 <= end:
        if data[position] != 0xFF:
            return  # libjpeg would skip garbage here; leave such files to PIL
        marker = data[position + 1]
        if marker == 0xFF:  # fill byte
            position += 1
        elif marker in _JPEG_STANDALONE:
            position += 2
        elif marker in (0xD8, 0xD9):  # a second start, or the end before any scan
            return
        else:
            length = data[position + 2] << 8 | data[position + 3]
            if length < 2:
                return
            yield marker, position + 4, position + 2 + length
            if marker == _JPEG_SCAN:
                return
            position += 2 + length


def header_size(data: bytes) -> tuple[int, int, str] | None:
    """``(width, height, "JPEG" | "PNG")`` as stored (before EXIF), read from the bytes' header.

    A few microseconds, no PIL. It returns None for anything it is not sure of (other formats,
    odd markers, a cut header), so callers fall back to :func:`open_image`.
    """
    if data[:8] == b"\x89PNG\r\n\x1a\n":
        if data[8:16] != b"\x00\x00\x00\rIHDR" or len(data) < 24:
            return None
        return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big"), "PNG"
    if data[:2] != b"\xff\xd8":
        return None
    for marker, start, _ in _jpeg_segments(data):
        if marker in _JPEG_FRAMES:
            if start + 5 > len(data):
                return None
            height = int.from_bytes(data[start + 1 : start + 3], "big")
            return int.from_bytes(data[start + 3 : start + 5], "big"), height, "JPEG"
    return None


def _ifd_orientation(tiff: bytes) -> int | None:
    """The Orientation tag in the first directory of a TIFF (EXIF) block; None if absent."""
    order = {b"II": "little", b"MM": "big"}.get(bytes(tiff[:2]))
    if order is None or int.from_bytes(tiff[2:4], order) != 42:
        return None
    offset = int.from_bytes(tiff[4:8], order)
    count = int.from_bytes(tiff[offset : offset + 2], order)
    for entry in range(offset + 2, offset + 2 + 12 * count, 12):
        if entry + 10 > len(tiff):
            return None
        if int.from_bytes(tiff[entry : entry + 2], order) == _EXIF_ORIENTATION:
            return int.from_bytes(tiff[entry + 8 : entry + 10], order)
    return None


def _turn(orientation: int | None) -> int:
    """An orientation as a transform: 2-8 turn or flip, anything else leaves the image as is."""
    return orientation if orientation in range(2, 9) else 1


_PNG_ORIENTATION_TEXT = (b"Raw profile type exif\x00", b"XML:com.adobe.xmp\x00")


def _orientation_needs_pil(data: bytes, kind: str) -> bool:
    """Could TorchCodec orient this image differently from PIL's ``exif_transpose``?

    TorchCodec reads the EXIF of a JPEG's first APP1 segment and of a PNG's eXIf chunk before
    the pixels, if it holds a bare TIFF block. PIL reads the first APP1 that is EXIF, falls back on an XMP ``tiff:Orientation``,
    and also reads PNG eXIf after the pixels and EXIF or XMP stored as PNG text. Files where that
    can matter are rare; they go to PIL, which is right by definition.
    """
    if kind == "PNG":
        position, end, pixels_seen = 8, len(data), False
        while position + 8 <= end:
            chunk = bytes(data[position + 4 : position + 8])
            if chunk == b"IDAT":
                pixels_seen = True
            elif chunk == b"IEND":
                break
            late_exif = chunk == b"eXIf" and (pixels_seen or data[position + 8 : position + 12] == b"Exif")
            text_exif = chunk in (b"tEXt", b"zTXt", b"iTXt") and data.startswith(_PNG_ORIENTATION_TEXT, position + 8)
            if late_exif or text_exif:
                return True
            position += 12 + int.from_bytes(data[position : position + 4], "big")
        return False
    app1 = [data[start:end] for marker, start, end in _jpeg_segments(data) if marker == _JPEG_APP1]
    exif = [payload for payload in app1 if payload[:6] == b"Exif\x00\x00"]
    torchcodec = _ifd_orientation(app1[0][6:]) if app1 else None  # the first APP1, whatever it holds
    pil = _ifd_orientation(exif[0][6:]) if exif else None
    xmp = any(b"tiff:Orientation" in payload for payload in app1 if payload[:6] != b"Exif\x00\x00")
    return _turn(torchcodec) != _turn(pil) or (pil is None and xmp)


def _jpeg_has_end(data: bytes) -> bool:
    """Does an end-of-image marker follow the first scan? (True when the header is unclear.)"""
    for marker, _, end in _jpeg_segments(data):
        if marker == _JPEG_SCAN:
            # searched from the end, where a whole file has it: entropy-coded data is slow to scan
            return data.rfind(b"\xff\xd9", end) != -1
    return True


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


# What a batched device decode (nvJPEG) is given: 8-bit baseline or extended Huffman JPEGs, gray
# or YCbCr. Progressive (C2), arithmetic-coded, 12-bit and CMYK/Adobe files decode in the worker.
_DEVICE_FRAMES = (0xC0, 0xC1)
_JPEG_ADOBE = 0xEE


def device_decodable(data: bytes, max_pixels: int = MAX_PIXELS) -> tuple[int, int] | None:
    """``(width, height)`` if :func:`decode_jpegs` on any device gives exactly what
    :func:`decode_image` gives for these bytes, else None (the worker decodes them).

    From the header alone (a few microseconds): a whole 8-bit baseline JPEG with 1 or 3
    components, no Adobe colour transform, no EXIF turn (nor metadata TorchCodec and PIL read
    differently), within ``max_pixels``. Everything else, including every file that
    :func:`decode_image` would refuse, goes back to it, so errors stay the worker's.
    """
    size = header_size(data)
    if size is None or size[2] != "JPEG" or not 0 < size[0] * size[1] <= max_pixels:
        return None
    for marker, start, end in _jpeg_segments(data):
        if marker == _JPEG_ADOBE or (marker == _JPEG_APP1 and data[start : start + 6] == b"Exif\x00\x00"):
            if marker == _JPEG_ADOBE or _turn(_ifd_orientation(data[start + 6 : end])) != 1:
                return None
        elif marker in _JPEG_FRAMES:
            if marker not in _DEVICE_FRAMES or data[start] != 8 or data[start + 5] not in (1, 3):
                return None
    if _orientation_needs_pil(data, "JPEG") or not _jpeg_has_end(data):
        return None
    return size[0], size[1]


def decode_jpegs(encoded: list[torch.Tensor], device: str | torch.device, sources: list[str]) -> list[torch.Tensor]:
    """Decode JPEGs (1-D uint8 CPU tensors) into ``uint8 [3,H,W]`` RGB on ``device``, in one call.

    On CUDA that is one batched nvJPEG call. For files :func:`device_decodable` accepts, the CPU
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
