"""header_size: the PIL-free size read that lets decode_image skip PIL's header parse.

Also: any cut of any of these files is refused or (a PNG cut inside its end chunk) decodes to
the full picture, never to something else nor with another exception.
"""

import io
import struct

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image, ImageOps

from recipes.core.contracts.errors import DataError
from recipes.core.pixels.image_headers import header_size
from recipes.core.pixels.images import decode_image


def _encode(image: Image.Image, fmt: str, **kwargs) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, fmt, **kwargs)
    return buffer.getvalue()


def _picture(width: int, height: int, mode: str = "RGB") -> Image.Image:
    rng = np.random.default_rng(width * 1000 + height)
    return Image.fromarray(rng.integers(0, 256, (height, width, 3), dtype=np.uint8)).convert(mode)


def _exif(orientation: int) -> bytes:
    exif = Image.Exif()
    exif[0x0112] = orientation
    return exif.tobytes()


CASES = {
    "baseline-jpeg": lambda: _encode(_picture(37, 23), "JPEG"),
    "progressive-jpeg": lambda: _encode(_picture(64, 48), "JPEG", progressive=True),
    "optimized-jpeg": lambda: _encode(_picture(48, 64), "JPEG", optimize=True),
    "restart-markers-jpeg": lambda: _encode(_picture(80, 16), "JPEG", restart_marker_blocks=1),
    "exif-jpeg": lambda: _encode(_picture(96, 64), "JPEG", exif=_exif(6)),
    "gray-jpeg": lambda: _encode(_picture(33, 17, "L"), "JPEG"),
    "cmyk-jpeg": lambda: _encode(_picture(20, 30, "CMYK"), "JPEG"),
    "rgb-png": lambda: _encode(_picture(31, 7), "PNG"),
    "palette-png": lambda: _encode(_picture(9, 40, "P"), "PNG"),
    "gray16-png": lambda: _encode(Image.fromarray(np.full((5, 6), 40000, np.uint16)), "PNG"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_header_size_equals_pil_stored_size(case):
    data = CASES[case]()
    with Image.open(io.BytesIO(data)) as image:
        expected = (*image.size, image.format)
    assert header_size(data) == expected


@pytest.mark.parametrize("data", [b"", b"GIF89a....", b"\xff\xd8", b"\xff\xd8\x00\x00", b"\x89PNG\r\n\x1a\n"])
def test_header_size_is_none_when_unsure(data):
    assert header_size(data) is None


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(sorted(CASES)), st.floats(0, 1))
def test_a_cut_header_gives_the_right_size_or_none(case, fraction):
    data = CASES[case]()
    cut = data[: int(len(data) * fraction)]
    assert header_size(cut) in (None, header_size(data))


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(sorted(CASES)), st.floats(0, 1, exclude_max=True))
def test_any_cut_file_is_refused_or_decodes_the_whole_picture(case, fraction):
    data = CASES[case]()
    cut = data[: int(len(data) * fraction)]
    try:
        image = decode_image(cut, source="cut")
    except DataError as error:
        assert str(error).startswith("cut: ")
    else:
        assert case.endswith("png") and torch.equal(image, decode_image(data))


def _sof(width: int, height: int) -> bytes:
    return b"\xff\xc0" + struct.pack(">HBHHB", 11, 8, height, width, 1) + b"\x01\x11\x00"


def test_a_decoy_frame_inside_an_app_segment_does_not_hide_a_bomb():
    decoy = b"\xff\xe1" + struct.pack(">H", 2 + len(_sof(8, 8))) + _sof(8, 8)
    bomb = b"\xff\xd8" + decoy + _sof(20000, 20000) + b"\xff\xd9"
    assert header_size(bomb) == (20000, 20000, "JPEG")
    with pytest.raises(DataError, match="bomb"):
        decode_image(bomb, source="decoy.jpg")


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_fast_path_decodes_the_same_pixels_as_pil(case):
    data = CASES[case]()
    with Image.open(io.BytesIO(data)) as image:
        upright = ImageOps.exif_transpose(image)
        if upright.mode.startswith("I"):  # 16-bit: decode_image keeps the top 8 bits
            expected = np.repeat((np.asarray(upright, np.int64) >> 8).astype(np.uint8)[:, :, None], 3, 2)
        else:
            expected = np.asarray(upright.convert("RGB"))
    assert np.array_equal(decode_image(data).permute(1, 2, 0).numpy(), expected)
