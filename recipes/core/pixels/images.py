"""Image decoding shared by every domain: file or bytes -> ``uint8 [3,H,W]`` RGB tensor.

    image = read_image("cat.jpg")                       # torch.uint8, CHW, RGB, EXIF applied
    image = decode_image(data, source="shard-0003.tar:cat.jpg")
    width, height = image_size("cat.jpg")               # header only, no pixel decode

What it guarantees, whatever the file:
- EXIF orientation is applied, so a phone photo stored sideways comes out upright.
- Grayscale, palette, RGBA, LA, CMYK and 1-bit images become plain RGB exactly as PIL's
  ``ImageOps.exif_transpose(im).convert("RGB")`` would; 16-bit images are scaled to 8 bits
  (PIL's ``convert("RGB")`` clips them to white), in about twice the 8-bit output's memory.
- A decompression bomb is refused from the header, before any pixel memory is allocated.
- A truncated, empty or non-image file raises :class:`DataError` naming the file; it is never
  filled with grey.
- ``strict=True`` also refuses a JPEG whose entropy-coded data libjpeg reports as corrupt (it
  decodes such a file with grey or smeared blocks and only prints ``Corrupt JPEG data: ...`` on
  stderr): the message names the file and carries libjpeg's line, which is kept off stderr.

How: JPEG and PNG go through TorchCodec's public decoders (libjpeg-turbo / libpng straight
into a tensor, EXIF applied), after a few-microsecond header read here gives the size for the
bomb check. PIL decodes everything else (GIF, WebP, BMP, TIFF...), 16-bit PNGs (straight to
8 bits, in strips), the reduced-scale JPEG decode that ``draft_size`` asks for, and the rare
JPEG/PNG whose orientation metadata TorchCodec reads differently from PIL. Speed and pixel
parity with torchvision: see benchmarks/decode.py.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import sys
import tempfile
import threading
import warnings
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch
from PIL import Image, ImageOps
from torchcodec import decoders

from recipes.core.contracts.errors import DataError
from recipes.core.pixels.image_headers import EXIF_ORIENTATION, MAX_PIXELS, jpeg_has_end, read_header
from recipes.core.sources.storage import cleaned, is_url, read_bytes, shown

# The warnings libjpeg prints (jerror.h JWRN_*) when entropy-coded data or a marker is damaged;
# it decodes on regardless, so these lines are the only sign.
LIBJPEG_CORRUPT = (
    "Corrupt JPEG data",
    "Premature end of JPEG file",
    "Invalid SOS parameters",
    "Inconsistent progression sequence",
)


def read_image(
    path: str | os.PathLike,
    *,
    max_pixels: int = MAX_PIXELS,
    draft_size: tuple[int, int] | None = None,
    contiguous: bool = True,
    storage_options: dict[str, Any] | None = None,
    strict: bool = False,
) -> torch.Tensor:
    """Read an image file or URL into a ``uint8 [3,H,W]`` RGB tensor; see :func:`decode_image`.

    A URL (``s3://``, ``https://``...) is fetched through :mod:`recipes.core.sources.storage`, with
    ``storage_options`` for fsspec.
    """
    data = read_file(path, storage_options)
    return decode_image(
        data, source=shown(path), max_pixels=max_pixels, draft_size=draft_size, contiguous=contiguous, strict=strict
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
    strict: bool = False,
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
        strict: also refuse a JPEG that libjpeg decodes while reporting corrupt data: its
            ``Corrupt JPEG data: ...`` line becomes the error's reason instead of going to
            stderr. A JPEG that PIL decodes (``draft_size``, rare EXIF) is then decoded by
            libjpeg once more to check it.

    Raises:
        DataError: empty, unreadable, truncated or oversized image; the message names ``source``.
    """
    # A JPEG or PNG that TorchCodec will orient as PIL would: no PIL needed at all. (TorchCodec
    # also decodes GIF and WebP, but every frame of an animation at once, which the header's
    # one-frame size would not bound; PIL decodes the first frame only.)
    size, needs_pil = read_header(data)
    deep = size is not None and size[2] == "PNG" and data[24:25] == b"\x10"  # IHDR bit depth 16
    if size is not None:
        check_pixels(size[0], size[1], source, max_pixels)  # before PIL, which may not read a crafted header
    native = size is not None and not deep and not needs_pil
    if native and 0 < size[0] * size[1] <= max_pixels and (draft_size is None or not _may_draft(size, draft_size)):
        decoded = _decode_with_torchcodec(data, size[2], source, strict=strict)
        return decoded.contiguous() if contiguous else decoded
    image = open_image(data, source=source, max_pixels=max_pixels)  # refuses bombs, empty, unknown
    if draft_size is not None and image.format == "JPEG" and _draft(image, draft_size):
        if not jpeg_has_end(data):
            # PIL stops once it has every row, so a partial download padded with zeros would
            # come out as garbage; libjpeg (the path above) refuses a JPEG with no end marker.
            raise DataError(f"{source}: cannot decode image (truncated: no end-of-image marker)")
        if strict:
            _check_jpeg(data, source)
        decoded = _decode_with_pil(image, source)
    elif native:
        decoded = _decode_with_torchcodec(data, size[2], source, strict=strict)
    elif deep:
        decoded = _decode_sixteen_bit_png(image, source, contiguous)
    else:
        if strict and data[:2] == b"\xff\xd8":
            _check_jpeg(data, source)
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
    check_pixels(*image.size, source, max_pixels)
    if 0 in image.size:
        raise DataError(f"{source}: image has zero size ({image.size[0]}x{image.size[1]})")
    return image


def check_pixels(width: int, height: int, source: str, max_pixels: int = MAX_PIXELS) -> None:
    """Refuse a header that claims more than ``max_pixels``: a decompression bomb."""
    if width * height > max_pixels:
        raise DataError(
            f"{source}: refused as a decompression bomb: header claims {width}x{height} = "
            f"{width * height:,} pixels, over the limit of {max_pixels:,}"
        )


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


def _decode_with_torchcodec(
    data: bytes, kind: str, source: str, device: str | torch.device = "cpu", *, strict: bool = False
) -> torch.Tensor:
    """Decode a JPEG or PNG with TorchCodec on ``device``: the call site of the PNG decoder; JPEGs go
    through :func:`decode_jpegs`, the call site of the JPEG decoder, single or batched.

    TorchCodec applies EXIF orientation, converts CMYK, palette, gray and alpha to RGB as PIL
    does, and refuses a cut file. On the CPU the result is a ``[3,H,W]`` view of ``[H,W,3]``
    memory (a turned view for EXIF 5-8). ``device="cuda"`` decodes a JPEG with nvJPEG;
    ``strict`` (CPU only) refuses a JPEG libjpeg reports as corrupt.
    """
    encoded = torch.frombuffer(_writable(data), dtype=torch.uint8)
    if kind == "JPEG":
        if strict:
            return _decode_jpeg_strict(encoded, source)
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
    :func:`recipes.core.pixels.image_headers.device_decodable` accepts, the CPU
    result equals :func:`decode_image`'s. A failure raises :class:`DataError` naming ``sources``.
    """
    try:
        return decoders.decode_jpeg(encoded, mode="RGB", device=device)
    except (RuntimeError, ValueError) as error:
        raise DataError(f"{', '.join(sources)}: cannot decode image ({_reason(error)})") from None


def _decode_jpeg_strict(encoded: torch.Tensor, source: str) -> torch.Tensor:
    """Decode one JPEG (a 1-D uint8 CPU tensor) on the CPU as :func:`decode_jpegs` does, and refuse it
    if libjpeg reports corrupt data on the way.

    libjpeg decodes damaged entropy-coded data without failing (grey or smeared blocks, shifted
    colours) and says so only in a line on stderr; TorchCodec offers no other channel, so that
    line is caught here (:func:`_libjpeg_messages`) and becomes the :class:`DataError`'s reason.
    Damage that still parses as valid JPEG (bytes that happen to decode to the same block count)
    leaves no trace for any decoder to report.

    Raises:
        DataError: naming ``source`` with libjpeg's message, e.g. ``Corrupt JPEG data: 232
            extraneous bytes before marker 0xd9``, or the decoder's error.
    """
    failure = None
    with _libjpeg_messages() as complaints:
        try:
            image = decoders.decode_jpeg(encoded, mode="RGB")
        except (RuntimeError, ValueError) as error:
            failure = _reason(error)
    reasons = [line for line in complaints if line.startswith(LIBJPEG_CORRUPT)] + ([failure] if failure else [])
    if reasons:
        raise DataError(f"{source}: cannot decode image ({'; '.join(reasons)})")
    return image


def _check_jpeg(data: bytes, source: str) -> None:
    """Refuse a JPEG libjpeg reports as corrupt (for files PIL decodes: it hides those reports)."""
    _decode_jpeg_strict(torch.frombuffer(_writable(data), dtype=torch.uint8), source)


def _writable(data: bytes) -> bytearray:
    return data if isinstance(data, bytearray) else bytearray(data)  # torch.frombuffer warns on bytes


class _Stderr:
    """This process's private file that file descriptor 2 points to while libjpeg decodes."""

    lock = threading.Lock()  # fd 2 belongs to the process: one capture at a time
    file: Any = None

    @classmethod
    def after_fork(cls) -> None:
        # a forked child shares the parent's file offset, and may inherit the lock held
        cls.lock, cls.file = threading.Lock(), None


if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(after_in_child=_Stderr.after_fork)


@contextlib.contextmanager
def _libjpeg_messages() -> Iterator[list[str]]:
    """Collect the lines C code prints on stderr (file descriptor 2) inside the block.

    The list is filled when the block ends. Lines that are not libjpeg's corruption warnings
    (:data:`LIBJPEG_CORRUPT`) go on to stderr unchanged. Captures in threads of one process take
    turns, since the descriptor is the process's. About 10 us a call (benchmarks/README.md).
    """
    lines: list[str] = []
    with _Stderr.lock:
        if _Stderr.file is None:
            _Stderr.file = tempfile.TemporaryFile()
        fd = _Stderr.file.fileno()
        with contextlib.suppress(AttributeError, OSError, ValueError):
            sys.stderr.flush()  # Python's own buffered text goes out before the swap, not into the file
        try:
            saved = os.dup(2)
        except OSError:  # no stderr at all: libjpeg's lines land in the file, then fd 2 closes again
            saved = None
        os.dup2(fd, 2)
        try:
            yield lines
        finally:
            if saved is None:
                os.close(2)
            else:
                os.dup2(saved, 2)
                os.close(saved)
            size = os.lseek(fd, 0, os.SEEK_CUR)
            if size:
                os.lseek(fd, 0, os.SEEK_SET)
                text = os.read(fd, size).decode(errors="replace")
                os.lseek(fd, 0, os.SEEK_SET)
                os.ftruncate(fd, 0)
                lines.extend(text.splitlines())
                others = [line for line in lines if not line.startswith(LIBJPEG_CORRUPT)]
                if others and saved is not None:
                    os.write(2, ("\n".join(others) + "\n").encode())


def _reason(error: Exception) -> str:
    """"decode_rows, /path/DecodeJpeg.cpp:287, Image is incomplete or truncated." -> the reason."""
    return re.sub(r"^\w+, \S+:\d+, ", "", str(error).strip().splitlines()[-1])


# Rows a 16-bit PNG is converted by at a time: a few MB of temporaries, whatever the image's size.
_STRIP_BYTES = 4 << 20


def _decode_sixteen_bit_png(image: Image.Image, source: str, contiguous: bool) -> torch.Tensor:
    """A 16-bit PNG, decoded by PIL and written into the uint8 output a strip of rows at a time.

    PIL's PNG unpackers keep the top 8 bits of each colour sample as they decode (16-bit gray stays
    16-bit, shifted here), so the peak is PIL's 8-bit image plus the output: ~2.3x the output for
    RGB(A), ~1.7x for gray. TorchCodec's uint16 decode and its conversion peak at ~12x (3.3 GB
    for a 9400x9400 RGBA PNG; benchmarks/README.md). ``contiguous`` picks CHW memory,
    else a ``[3,H,W]`` view of ``[H,W,3]`` as the other decoders give.
    """
    try:
        image.load()
        ImageOps.exif_transpose(image, in_place=True)  # no copy unless the image turns
        width, height = image.size
        out = np.empty((3, height, width) if contiguous else (height, width, 3), dtype=np.uint8)
        step = max(1, _STRIP_BYTES // (4 * width))
        for top in range(0, height, step):
            bottom = min(top + step, height)
            strip = image.crop((0, top, width, bottom))
            if strip.mode.startswith("I"):
                gray = (np.asarray(strip, dtype=np.int64) >> 8).clip(0, 255).astype(np.uint8)
                if contiguous:
                    out[:, top:bottom] = gray
                else:
                    out[top:bottom] = gray[:, :, None]
            else:
                rgb = np.asarray(strip if strip.mode == "RGB" else strip.convert("RGB"))
                if contiguous:
                    out[:, top:bottom] = rgb.transpose(2, 0, 1)
                else:
                    out[top:bottom] = rgb
    except (OSError, ValueError, SyntaxError) as error:
        raise DataError(f"{source}: cannot decode image ({error})") from None
    tensor = torch.from_numpy(out)
    return tensor if contiguous else tensor.permute(2, 0, 1)


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
