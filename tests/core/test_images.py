"""Decoding: pixel parity with PIL for every mode, and refusal of broken files."""

import io
import struct
import zlib

import numpy as np
import pytest
import torch
from PIL import Image, ImageOps

from recipes.core.errors import DataError
from recipes.core.images import decode_image, image_size, read_image


def _photo(width=64, height=48, seed=0) -> Image.Image:
    """Smooth gradients with noise: realistic for JPEG, asymmetric so a rotation shows."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width]
    rgb = np.stack([x * 255 / width, y * 255 / height, (x + y) % 97 * 2.5], axis=-1)
    rgb = rgb + rng.normal(0, 6, rgb.shape)
    return Image.fromarray(np.clip(rgb, 0, 255).astype(np.uint8))


def _encode(image: Image.Image, fmt: str, **params) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, fmt, **params)
    return buffer.getvalue()


def _exif6() -> bytes:
    image = _photo()
    exif = image.getexif()
    exif[0x0112] = 6
    return _encode(image, "JPEG", exif=exif.tobytes())


CASES = {
    "rgb-jpeg": lambda: _encode(_photo(), "JPEG", quality=90),
    "rgb-png": lambda: _encode(_photo(), "PNG"),
    "gray-png": lambda: _encode(_photo().convert("L"), "PNG"),
    "gray-jpeg": lambda: _encode(_photo().convert("L"), "JPEG"),
    "palette-png": lambda: _encode(_photo().convert("P"), "PNG"),
    "palette-transparency-png": lambda: _encode(_photo().convert("P"), "PNG", transparency=5),
    "rgba-png": lambda: _encode(_photo().convert("RGBA"), "PNG"),
    "la-png": lambda: _encode(_photo().convert("LA"), "PNG"),
    "bilevel-png": lambda: _encode(_photo().convert("1"), "PNG"),
    "cmyk-jpeg": lambda: _encode(_photo().convert("CMYK"), "JPEG", quality=95),
    "exif-rotated-jpeg": _exif6,
    "rgb-webp": lambda: _encode(_photo(), "WEBP", lossless=True),
    "rgb-bmp": lambda: _encode(_photo(), "BMP"),
    "palette-gif": lambda: _encode(_photo().convert("P"), "GIF"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_pixels_equal_pil_exif_transpose_convert_rgb(case):
    data = CASES[case]()
    expected = np.array(ImageOps.exif_transpose(Image.open(io.BytesIO(data))).convert("RGB"))
    image = decode_image(data, source=case)
    assert image.dtype == torch.uint8 and image.shape[0] == 3 and image.is_contiguous()
    np.testing.assert_array_equal(image.permute(1, 2, 0).numpy(), expected)


def test_exif_orientation_six_turns_the_image_upright():
    image = decode_image(_exif6())
    assert tuple(image.shape[1:]) == (64, 48)  # stored 64 wide x 48 high, displayed rotated


def test_sixteen_bit_png_keeps_the_top_eight_bits_instead_of_clipping():
    values = np.random.default_rng(1).integers(0, 65536, (20, 30), dtype=np.uint16)
    image = decode_image(_encode(Image.fromarray(values), "PNG"))
    for channel in image:
        np.testing.assert_array_equal(channel.numpy(), values >> 8)


def test_truncated_jpeg_is_an_error_not_a_grey_image():
    data = _encode(_photo(200, 150), "JPEG", quality=95)
    with pytest.raises(DataError, match="cut.jpg"):
        decode_image(data[: len(data) * 6 // 10], source="cut.jpg")


def test_truncated_png_is_an_error():
    data = _encode(_photo(200, 150), "PNG")
    with pytest.raises(DataError, match="cut.png"):
        decode_image(data[: len(data) // 2], source="cut.png")


@pytest.mark.parametrize(
    "data, reason",
    [(b"", "empty"), (b"just some words\n", "not an image"), (b"\x89PNG\r\n\x1a\n\x00", "not an image|corrupt")],
    ids=["zero-bytes", "words", "bare-signature"],
)
def test_unusable_bytes_raise_a_data_error_naming_the_source(data, reason):
    with pytest.raises(DataError, match=f"thing.jpg: .*({reason})"):
        decode_image(data, source="thing.jpg")


def _png_header_only(width: int, height: int) -> bytes:
    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\x00" * 64)) + chunk(b"IEND", b"")


@pytest.mark.parametrize("side", [10_000, 16_000], ids=["over-our-limit", "over-pil-hard-limit"])
def test_decompression_bomb_is_refused_from_the_header(side):
    with pytest.raises(DataError, match="bomb"):
        decode_image(_png_header_only(side, side), source="bomb.png")


def test_max_pixels_is_adjustable():
    data = _encode(_photo(64, 48), "PNG")
    with pytest.raises(DataError, match="3,072 pixels"):
        decode_image(data, max_pixels=1000)


def test_draft_decodes_large_jpegs_at_reduced_scale_close_to_a_full_decode():
    data = _encode(_photo(640, 480), "JPEG", quality=90)
    small = decode_image(data, draft_size=(150, 100))
    assert tuple(small.shape) == (3, 120, 160)  # 1/4 scale: the smallest not below 150x100
    full = decode_image(data)
    reference = torch.nn.functional.avg_pool2d(full.float()[None], 4)[0]
    assert (small.float() - reference).abs().mean() < 4


def test_draft_is_not_used_when_the_image_is_not_much_larger():
    data = _encode(_photo(160, 120), "JPEG")
    assert tuple(decode_image(data, draft_size=(100, 100)).shape) == (3, 120, 160)


def test_draft_respects_exif_rotation():
    image = _photo(640, 320)
    exif = image.getexif()
    exif[0x0112] = 6
    data = _encode(image, "JPEG", exif=exif.tobytes())
    # displayed 320 wide x 640 high; ask for 150x300 displayed -> stored needs >= 300x150
    out = decode_image(data, draft_size=(150, 300))
    assert tuple(out.shape) == (3, 320, 160)


def test_read_image_and_image_size_agree_with_the_file(tmp_path):
    path = tmp_path / "rotated.jpg"
    path.write_bytes(_exif6())
    image = read_image(path)
    assert image_size(path) == (image.shape[2], image.shape[1]) == (48, 64)


def test_read_image_names_a_missing_file(tmp_path):
    with pytest.raises(DataError, match="nope.jpg"):
        read_image(tmp_path / "nope.jpg")


@pytest.mark.parametrize("case", ["rgb-jpeg", "rgb-png", "gray-png", "exif-rotated-jpeg", "rgb-webp"])
def test_non_contiguous_decode_has_the_same_pixels_in_channels_last_memory(case):
    data = CASES[case]()
    loose = decode_image(data, contiguous=False)
    assert torch.equal(loose, decode_image(data))
    if case != "exif-rotated-jpeg":  # a rotation is a transposed view, not plain HWC memory
        assert not loose.is_contiguous() and loose.stride()[0] == 1  # channels innermost: no copy made


def test_non_contiguous_draft_decode_has_the_same_pixels():
    data = _encode(_photo(640, 480), "JPEG", quality=90)
    assert torch.equal(decode_image(data, draft_size=(150, 100), contiguous=False), decode_image(data, draft_size=(150, 100)))
