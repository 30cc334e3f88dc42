"""What an image's header says, read from its bytes in microseconds, without PIL.

    width, height, kind = header_size(data)          # as stored, before EXIF; None if unsure
    orientation_needs_pil(data, kind)                # could TorchCodec orient it differently?
    size, needs_pil = read_header(data)              # both, from one walk of the header
    device_decodable(data)                           # (width, height) if a batched device decode may take it

:mod:`recipes.core.pixels.images` uses these to check a bomb's size before any pixel memory exists,
to route the rare file whose orientation metadata TorchCodec reads differently from PIL, and to
tell a worker which JPEGs ``decode="device"`` can ship undecoded. Every reader here walks the
JPEG segments or PNG chunks the way libjpeg and libpng do, and answers "not sure" (None, or the
cautious answer) for anything odd, so callers fall back to PIL.
"""

from __future__ import annotations

# PIL's default Image.MAX_IMAGE_PIXELS (~89.5 MP, a 9459x9459 image): enough for any photo,
# while a 16000x16000 bomb would need 768 MB as RGB before a single check ran.
MAX_PIXELS = 89_478_485

EXIF_ORIENTATION = 0x0112  # the EXIF tag


# JPEG start-of-frame markers (C4 DHT, C8 JPG and CC DAC are not frames); D0-D7 (RSTn) and 01
# (TEM) stand alone, without a length.
_JPEG_FRAMES = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}
_JPEG_STANDALONE = frozenset(range(0xD0, 0xD8)) | {0x01}
_JPEG_APP1, _JPEG_SCAN = 0xE1, 0xDA


def _jpeg_segments(data: bytes) -> list[tuple[int, int, int]] | None:
    """``(marker, start, end)`` of each JPEG header segment's payload, up to the first scan.

    Walks the segments the way libjpeg does, and stops at anything it is not sure of (garbage
    between segments, a second start, a cut header), where the list ends early. None: not a JPEG.
    One walk serves every question below (a list, not a generator: ~1 us a segment saved).
    """
    if data[:2] != b"\xff\xd8":
        return None
    segments, position, end = [], 2, len(data)
    while position + 4 <= end:
        if data[position] != 0xFF:
            break  # libjpeg would skip garbage here; leave such files to PIL
        marker = data[position + 1]
        if marker == 0xFF:  # fill byte
            position += 1
        elif marker in _JPEG_STANDALONE:
            position += 2
        elif marker in (0xD8, 0xD9):  # a second start, or the end before any scan
            break
        else:
            length = data[position + 2] << 8 | data[position + 3]
            if length < 2:
                break
            segments.append((marker, position + 4, position + 2 + length))
            if marker == _JPEG_SCAN:
                break
            position += 2 + length
    return segments


def _jpeg_size(data: bytes, segments: list[tuple[int, int, int]] | None) -> tuple[int, int, str] | None:
    if segments is None:  # not a JPEG
        return None
    for marker, start, _ in segments:
        if marker in _JPEG_FRAMES:
            if start + 5 > len(data):
                return None
            height = int.from_bytes(data[start + 1 : start + 3], "big")
            return int.from_bytes(data[start + 3 : start + 5], "big"), height, "JPEG"
    return None


def header_size(data: bytes) -> tuple[int, int, str] | None:
    """``(width, height, "JPEG" | "PNG")`` as stored (before EXIF), read from the bytes' header.

    A few microseconds, no PIL. It returns None for anything it is not sure of (other formats,
    odd markers, a cut header), so callers fall back to :func:`open_image`.
    """
    if data[:8] == b"\x89PNG\r\n\x1a\n":
        return _png_size(data)
    return _jpeg_size(data, _jpeg_segments(data))


def read_header(data: bytes) -> tuple[tuple[int, int, str] | None, bool]:
    """:func:`header_size` and :func:`orientation_needs_pil` from one walk of the header:
    ``(size or None, needs PIL)``; the second is True where the size is None."""
    if data[:8] == b"\x89PNG\r\n\x1a\n":
        size = _png_size(data)
        return size, size is None or _png_orientation_needs_pil(data)
    segments = _jpeg_segments(data)
    size = _jpeg_size(data, segments)
    return size, size is None or _jpeg_orientation_needs_pil(data, segments)


def _png_size(data: bytes) -> tuple[int, int, str] | None:
    if data[8:16] != b"\x00\x00\x00\rIHDR" or len(data) < 24:
        return None
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big"), "PNG"


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
        if int.from_bytes(tiff[entry : entry + 2], order) == EXIF_ORIENTATION:
            return int.from_bytes(tiff[entry + 8 : entry + 10], order)
    return None


def _turn(orientation: int | None) -> int:
    """An orientation as a transform: 2-8 turn or flip, anything else leaves the image as is."""
    return orientation if orientation in range(2, 9) else 1


_PNG_ORIENTATION_TEXT = (b"Raw profile type exif\x00", b"XML:com.adobe.xmp\x00")


def orientation_needs_pil(data: bytes, kind: str) -> bool:
    """Could TorchCodec orient this image differently from PIL's ``exif_transpose``?

    TorchCodec reads the EXIF of a JPEG's first APP1 segment and of a PNG's eXIf chunk before
    the pixels, if it holds a bare TIFF block. PIL reads the first APP1 that is EXIF, falls back on an XMP ``tiff:Orientation``,
    and also reads PNG eXIf after the pixels and EXIF or XMP stored as PNG text. Files where that
    can matter are rare; they go to PIL, which is right by definition.
    """
    if kind == "PNG":
        return _png_orientation_needs_pil(data)
    segments = _jpeg_segments(data)
    return segments is None or _jpeg_orientation_needs_pil(data, segments)


def _png_orientation_needs_pil(data: bytes) -> bool:
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


def _jpeg_orientation_needs_pil(data: bytes, segments: list[tuple[int, int, int]]) -> bool:
    app1 = [data[start:end] for marker, start, end in segments if marker == _JPEG_APP1]
    if not app1:
        return False  # no EXIF, no XMP: nothing to read differently
    exif = [payload for payload in app1 if payload[:6] == b"Exif\x00\x00"]
    torchcodec = _ifd_orientation(app1[0][6:])  # the first APP1, whatever it holds
    pil = _ifd_orientation(exif[0][6:]) if exif else None
    xmp = any(b"tiff:Orientation" in payload for payload in app1 if payload[:6] != b"Exif\x00\x00")
    return _turn(torchcodec) != _turn(pil) or (pil is None and xmp)


def jpeg_has_end(data: bytes, segments: list[tuple[int, int, int]] | None = None) -> bool:
    """Does an end-of-image marker follow the first scan? (True when the header is unclear.)"""
    for marker, _, end in _jpeg_segments(data) if segments is None else segments:
        if marker == _JPEG_SCAN:
            # searched from the end, where a whole file has it: entropy-coded data is slow to scan
            return data.rfind(b"\xff\xd9", end) != -1
    return True


# What a batched device decode (nvJPEG) is given: 8-bit baseline or extended Huffman JPEGs, gray
# or YCbCr. Progressive (C2), arithmetic-coded, 12-bit and CMYK/Adobe files decode in the worker.
_DEVICE_FRAMES = (0xC0, 0xC1)
_JPEG_ADOBE = 0xEE


def device_decodable(data: bytes, max_pixels: int = MAX_PIXELS) -> tuple[int, int] | None:
    """``(width, height)`` if :func:`recipes.core.pixels.images.decode_jpegs` on any device gives exactly
    what :func:`recipes.core.pixels.images.decode_image` gives for these bytes, else None (the worker
    decodes them).

    From the header alone (a few microseconds): a whole 8-bit baseline JPEG with 1 or 3
    components, no Adobe colour transform, no EXIF turn (nor metadata TorchCodec and PIL read
    differently), within ``max_pixels``. Everything else, including every file that
    :func:`decode_image` would refuse, goes back to it, so errors stay the worker's.
    """
    segments = _jpeg_segments(data)
    size = _jpeg_size(data, segments)
    if size is None or not 0 < size[0] * size[1] <= max_pixels:
        return None
    for marker, start, end in segments:
        if marker == _JPEG_ADOBE or (marker == _JPEG_APP1 and data[start : start + 6] == b"Exif\x00\x00"):
            if marker == _JPEG_ADOBE or _turn(_ifd_orientation(data[start + 6 : end])) != 1:
                return None
        elif marker in _JPEG_FRAMES:
            if marker not in _DEVICE_FRAMES or data[start] != 8 or data[start + 5] not in (1, 3):
                return None
    if _jpeg_orientation_needs_pil(data, segments) or not jpeg_has_end(data, segments):
        return None
    return size[0], size[1]
