"""Decoding: pixel parity with PIL for every mode and orientation, and refusal of broken files."""

import io
import os
import re
import struct
import zlib
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import torch
from PIL import ExifTags, Image, ImageOps

from recipes.core.pixels import images
from recipes.core.contracts.errors import DataError
from recipes.core.pixels.images import decode_image, image_size, read_image
from tests.core.hostile import peak_rss_growth_mb, top_byte_chw, write_png16, write_tall_png16
from tests.photos import jpeg_bytes, overwrite_scan_data, photo


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


def _exif(orientation: int | None, **tags) -> bytes:
    """An EXIF block ("Exif\\0\\0" + TIFF) with this orientation (None: no orientation tag)."""
    exif = Image.Exif()
    if orientation is not None:
        exif[0x0112] = orientation
    for tag, value in tags.items():
        exif[getattr(ExifTags.Base, tag)] = value
    return exif.tobytes()


def _exif6() -> bytes:
    return _encode(_photo(), "JPEG", exif=_exif(6))


def _png_chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def _png_with(chunk: bytes, *, after_pixels: bool = False) -> bytes:
    """The photo as PNG with one more chunk, after IHDR or after the pixels (before IEND)."""
    data = _encode(_photo(), "PNG")
    where = len(data) - 12 if after_pixels else 33  # IEND is the last 12 bytes; IHDR ends at 33
    return data[:where] + chunk + data[where:]


def _xmp(orientation: int) -> bytes:
    return (
        b'<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#">'
        b'<rdf:Description xmlns:tiff="http://ns.adobe.com/tiff/1.0/" tiff:Orientation="%d"/></rdf:RDF></x:xmpmeta>'
        % orientation
    )


def _app1_first(jpeg: bytes, payload: bytes) -> bytes:
    """``jpeg`` with an APP1 segment holding ``payload`` before all its other segments."""
    return jpeg[:2] + b"\xff\xe1" + struct.pack(">H", 2 + len(payload)) + payload + jpeg[2:]


def _xmp_app1_first(jpeg: bytes, orientation: int) -> bytes:
    return _app1_first(jpeg, b"http://ns.adobe.com/xap/1.0/\x00" + _xmp(orientation))


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


def _as_pil_shows_it(data: bytes) -> np.ndarray:
    return np.array(ImageOps.exif_transpose(Image.open(io.BytesIO(data))).convert("RGB"))


@pytest.mark.parametrize("orientation", range(1, 9))
@pytest.mark.parametrize("fmt", ["JPEG", "PNG"])
def test_every_exif_orientation_matches_pil(fmt, orientation):
    data = _encode(_photo(), fmt, exif=_exif(orientation))
    np.testing.assert_array_equal(decode_image(data).permute(1, 2, 0).numpy(), _as_pil_shows_it(data))


# Orientation metadata that TorchCodec reads differently from PIL (it reads a JPEG's first APP1
# segment only, and a PNG's eXIf chunk before the pixels only): each must still come out as PIL
# shows it.
ORIENTATION_METADATA = {
    "jpeg-xmp-only": lambda: _xmp_app1_first(_encode(_photo(), "JPEG"), 6),
    "jpeg-xmp-before-exif": lambda: _xmp_app1_first(_encode(_photo(), "JPEG", exif=_exif(8)), 3),
    "jpeg-exif-without-orientation-and-xmp": lambda: _encode(
        _photo(), "JPEG", exif=_exif(None, Make="camera"), xmp=_xmp(5)
    ),
    "jpeg-exif-orientation-wins-over-xmp": lambda: _encode(_photo(), "JPEG", exif=_exif(6), xmp=_xmp(3)),
    "jpeg-two-exif-segments": lambda: _app1_first(_encode(_photo(), "JPEG", exif=_exif(6)), _exif(2)),
    "png-exif-after-pixels": lambda: _png_with(_png_chunk(b"eXIf", _exif(6)[6:]), after_pixels=True),
    "png-exif-with-jpeg-prefix": lambda: _png_with(_png_chunk(b"eXIf", _exif(6))),
    "png-raw-profile-chunk": lambda: _png_with(
        _png_chunk(b"tEXt", b"Raw profile type exif\x00\nexif\n%8d\n%s" % (len(_exif(6)), _exif(6).hex().encode()))
    ),
    "png-xmp-chunk": lambda: _png_with(_png_chunk(b"iTXt", b"XML:com.adobe.xmp\x00\x00\x00\x00\x00" + _xmp(8))),
}


@pytest.mark.parametrize("case", sorted(ORIENTATION_METADATA))
def test_orientation_metadata_torchcodec_reads_differently_still_matches_pil(case):
    data = ORIENTATION_METADATA[case]()
    expected = _as_pil_shows_it(data)
    assert not np.array_equal(expected, np.array(Image.open(io.BytesIO(data)).convert("RGB")))  # PIL turns it
    np.testing.assert_array_equal(decode_image(data).permute(1, 2, 0).numpy(), expected)


@pytest.mark.parametrize("case", ["rgb-jpeg", "cmyk-jpeg", "exif-rotated-jpeg", "rgb-png", "palette-png", "la-png"])
def test_common_jpeg_and_png_decode_without_pil(case, monkeypatch):
    data = CASES[case]()
    expected = _as_pil_shows_it(data)

    def no_pil(*args, **kwargs):
        raise AssertionError("PIL was used")

    monkeypatch.setattr(images.Image, "open", no_pil)
    np.testing.assert_array_equal(decode_image(data).permute(1, 2, 0).numpy(), expected)


def test_sixteen_bit_png_keeps_the_top_eight_bits_instead_of_clipping():
    values = np.random.default_rng(1).integers(0, 65536, (20, 30), dtype=np.uint16)
    image = decode_image(_encode(Image.fromarray(values), "PNG"))
    for channel in image:
        np.testing.assert_array_equal(channel.numpy(), values >> 8)


def test_sixteen_bit_rgb_png_keeps_the_top_eight_bits_of_each_channel():
    values = np.random.default_rng(2).integers(0, 65536, (20, 30, 3), dtype=np.uint16)
    rows = b"".join(b"\x00" + row.astype(">u2").tobytes() for row in values)
    header = struct.pack(">IIBBBBB", 30, 20, 16, 2, 0, 0, 0)  # 16-bit truecolour
    data = b"\x89PNG\r\n\x1a\n" + _png_chunk(b"IHDR", header) + _png_chunk(b"IDAT", zlib.compress(rows))
    data += _png_chunk(b"IEND", b"")
    image = decode_image(data, contiguous=False)
    assert image.dtype == torch.uint8 and image.stride()[0] == 1  # still [H,W,3] memory
    np.testing.assert_array_equal(image.permute(1, 2, 0).numpy(), values >> 8)


@pytest.mark.parametrize("contiguous", [True, False], ids=["chw", "channels-last"])
@pytest.mark.parametrize("channels", [1, 2, 3, 4], ids=["gray", "gray-alpha", "rgb", "rgba"])
def test_sixteen_bit_png_of_every_colour_type_keeps_the_top_eight_bits_across_strips(
    tmp_path, monkeypatch, channels, contiguous
):
    monkeypatch.setattr(images, "_STRIP_BYTES", 4 * 53 * 7)  # strips of 7 rows: 37 rows end mid-strip
    values = np.random.default_rng(channels).integers(0, 65536, (37, 53, channels), dtype=np.uint16)
    path = write_png16(tmp_path / "deep.png", values[:, :, 0] if channels == 1 else values)
    image = read_image(path, contiguous=contiguous)
    assert image.dtype == torch.uint8 and image.shape == (3, 37, 53)
    assert image.is_contiguous() if contiguous else image.stride()[0] == 1  # [H,W,3] memory, as other decodes
    np.testing.assert_array_equal(image.numpy(), top_byte_chw(values))


def test_sixteen_bit_png_turned_by_exif_keeps_the_top_eight_bits_upright(tmp_path):
    values = np.random.default_rng(9).integers(0, 65536, (20, 30, 3), dtype=np.uint16)
    path = write_png16(tmp_path / "turned.png", values, exif=_exif(6)[6:])  # eXIf holds the bare TIFF block
    upright = np.rot90(top_byte_chw(values).transpose(1, 2, 0), k=-1)  # 6: turn 90 degrees clockwise
    np.testing.assert_array_equal(read_image(path).permute(1, 2, 0).numpy(), upright)


def test_a_large_sixteen_bit_rgba_png_peaks_near_twice_its_eight_bit_output(tmp_path):
    width, height = 4000, 3000
    x = np.arange(width)
    row = np.stack([x * 7, x * 13 + 999, x * 3, np.full(width, 65535)], axis=-1) % 65536
    path = write_tall_png16(tmp_path / "deep.png", row.astype(np.uint16), height)
    action = f"image = read_image({str(path)!r}); print(tuple(image.shape), int(image[:, -1, -1].sum()))"
    growth, out = peak_rss_growth_mb("from recipes.core.pixels.images import read_image", action)
    assert f"(3, {height}, {width})" in out and str(sum(int(v[-1]) >> 8 for v in row.T[:3])) in out
    output_mb = 3 * width * height / 2**20
    assert growth < 2.5 * output_mb + 16, (growth, output_mb)  # PIL's 8-bit image plus the output


def test_truncated_jpeg_is_an_error_not_a_grey_image():
    data = _encode(_photo(200, 150), "JPEG", quality=95)
    with pytest.raises(DataError, match="cut.jpg"):
        decode_image(data[: len(data) * 6 // 10], source="cut.jpg")


@pytest.mark.parametrize("progressive", [False, True], ids=["baseline", "progressive"])
@pytest.mark.parametrize("keep", [0.1, 0.5, 0.9, 0.999, -1], ids=["10%", "50%", "90%", "99.9%", "all-but-end-marker"])
def test_every_cut_of_a_jpeg_is_an_error(progressive, keep):
    data = _encode(_photo(200, 150), "JPEG", quality=95, progressive=progressive)
    cut = data[:-1] if keep == -1 else data[: int(len(data) * keep)]
    with pytest.raises(DataError, match=r"cut\.jpg: cannot decode image \(Image is incomplete or truncated\.\)"):
        decode_image(cut, source="cut.jpg")  # the reason without TorchCodec's C++ file and line


@pytest.mark.parametrize("draft_size", [None, (100, 100)], ids=["full", "draft"])
def test_a_partial_download_padded_with_zeros_is_an_error(draft_size):
    data = _encode(_photo(640, 480), "JPEG", quality=90)
    padded = data[: len(data) // 2] + bytes(len(data) - len(data) // 2)
    with pytest.raises(DataError, match="padded.jpg: .*truncated"):
        decode_image(padded, source="padded.jpg", draft_size=draft_size)


def test_a_cut_jpeg_is_an_error_in_the_draft_decode_too():
    data = _encode(_photo(640, 480), "JPEG", quality=90)
    with pytest.raises(DataError, match="cut.jpg"):
        decode_image(data[: len(data) * 6 // 10], source="cut.jpg", draft_size=(100, 100))


# PIL encoder settings whose damaged scan data libjpeg always reports (with optimized Huffman
# tables, every bit string is a code, so ~1 in 10 damaged files parses cleanly: none is named)
DAMAGED_SETTINGS = {
    "baseline-420": {"quality": 90},
    "progressive": {"quality": 90, "progressive": True},
    "restart-intervals": {"quality": 90, "restart_marker_blocks": 4},
    "subsampling-444": {"quality": 95, "subsampling": 0},
}
CORRUPT_REASON = r"(Corrupt JPEG data|Premature end of JPEG file|Inconsistent progression sequence|Invalid SOS)"


@pytest.mark.parametrize("draft_size", [None, (150, 100)], ids=["full", "draft"])
@pytest.mark.parametrize("setting", sorted(DAMAGED_SETTINGS))
def test_strict_decode_names_every_jpeg_with_overwritten_scan_data_with_libjpeg_reason(setting, draft_size, capfd):
    for seed in range(3):
        data = jpeg_bytes(photo(640, 480, seed), **DAMAGED_SETTINGS[setting])
        for fraction in (0.02, 0.15, 0.3, 0.45, 0.6, 0.75, 0.9, 1.0):
            name = f"photo{seed}-at-{fraction}.jpg"
            damaged = overwrite_scan_data(data, fraction, seed=seed * 100 + int(fraction * 100))
            with pytest.raises(DataError, match=rf"^{re.escape(name)}: cannot decode image \({CORRUPT_REASON}"):
                decode_image(damaged, source=name, strict=True, draft_size=draft_size)
    assert capfd.readouterr().err == ""  # libjpeg's lines went into the errors, not to stderr


def test_without_strict_overwritten_scan_data_still_decodes_as_before():
    data = overwrite_scan_data(jpeg_bytes(photo(640, 480, 0), quality=90), 0.3, seed=30)
    with pytest.raises(DataError, match="Corrupt JPEG data"):
        decode_image(data, strict=True)
    assert decode_image(data).shape == (3, 480, 640)  # damaged blocks and all: the default stays lenient


CLEAN_SETTINGS = {
    "baseline-420": ("RGB", {"quality": 90}),
    "quality-75": ("RGB", {}),
    "subsampling-422": ("RGB", {"quality": 90, "subsampling": 1}),
    "subsampling-444": ("RGB", {"quality": 95, "subsampling": 0}),
    "progressive": ("RGB", {"quality": 90, "progressive": True}),
    "optimize": ("RGB", {"quality": 85, "optimize": True}),
    "progressive-optimize": ("RGB", {"quality": 85, "progressive": True, "optimize": True}),
    "restart-blocks": ("RGB", {"quality": 90, "restart_marker_blocks": 1}),
    "restart-rows": ("RGB", {"quality": 90, "restart_marker_rows": 2}),
    "grayscale": ("L", {"quality": 90}),
    "grayscale-progressive": ("L", {"quality": 90, "progressive": True}),
    "cmyk": ("CMYK", {"quality": 95}),
    "exif-rotated": ("RGB", {"quality": 90, "exif": _exif(6)}),
    "odd-size": ("RGB", {"quality": 90}),
}


@pytest.mark.parametrize("setting", sorted(CLEAN_SETTINGS))
def test_strict_decode_never_flags_a_clean_jpeg_from_any_encoder_setting(setting, capfd):
    mode, options = CLEAN_SETTINGS[setting]
    for seed in range(3):
        size = (333, 251) if setting == "odd-size" else (640, 480)
        data = jpeg_bytes(photo(*size, seed).convert(mode), **options)
        for draft_size in (None, (150, 100)):
            strict = decode_image(data, strict=True, draft_size=draft_size)
            assert torch.equal(strict, decode_image(data, draft_size=draft_size))
    assert capfd.readouterr().err == ""


def test_strict_decode_never_flags_a_clean_fixture_jpeg(fixtures, capfd):
    paths = [path for path in sorted(fixtures.rglob("*")) if path.suffix.lower() in (".jpg", ".jpeg")
             and "hostile" not in path.parts]
    assert len(paths) >= 20
    for path in paths:
        assert torch.equal(read_image(path, strict=True), read_image(path))
    assert capfd.readouterr().err == ""


def test_strict_decodes_in_threads_each_name_their_own_file_and_stderr_comes_back(capfd):
    clean = jpeg_bytes(photo(320, 240, 5), quality=90)
    damaged = overwrite_scan_data(clean, 0.5, seed=7)

    def decode(index: int) -> str:
        try:
            decode_image(damaged if index % 2 else clean, source=f"{index}.jpg", strict=True)
            return "ok"
        except DataError as error:
            return str(error)

    with ThreadPoolExecutor(4) as pool:
        outcomes = list(pool.map(decode, range(40)))
    for index, outcome in enumerate(outcomes):
        expected = "ok" if index % 2 == 0 else f"{index}.jpg: cannot decode image (Corrupt JPEG"
        assert outcome.startswith(expected), outcome
    os.write(2, b"still stderr\n")
    assert capfd.readouterr().err == "still stderr\n"


def test_other_lines_printed_during_a_strict_decode_still_reach_stderr(capfd):
    with images._libjpeg_messages() as lines:
        os.write(2, b"Corrupt JPEG data: 3 extraneous bytes before marker 0xd9\nan unrelated line\n")
    assert lines == ["Corrupt JPEG data: 3 extraneous bytes before marker 0xd9", "an unrelated line"]
    assert capfd.readouterr().err == "an unrelated line\n"


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
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\x00" * 64)) + chunk(b"IEND", b"")
    )


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


@pytest.mark.parametrize(
    "case",
    ["rgb-jpeg", "cmyk-jpeg", "gray-jpeg", "rgb-png", "gray-png", "palette-png", "exif-rotated-jpeg", "rgb-webp"],
)
def test_non_contiguous_decode_has_the_same_pixels_in_channels_last_memory(case):
    data = CASES[case]()
    loose = decode_image(data, contiguous=False)
    assert torch.equal(loose, decode_image(data))
    if case != "exif-rotated-jpeg":  # a rotation is a transposed view, not plain HWC memory
        assert not loose.is_contiguous() and loose.stride()[0] == 1  # channels innermost: no copy made


def test_non_contiguous_draft_decode_has_the_same_pixels():
    data = _encode(_photo(640, 480), "JPEG", quality=90)
    assert torch.equal(
        decode_image(data, draft_size=(150, 100), contiguous=False), decode_image(data, draft_size=(150, 100))
    )


def test_the_decoder_takes_a_device_and_decodes_on_the_cpu_by_default():
    data = CASES["rgb-jpeg"]()
    on_cpu = images._decode_with_torchcodec(data, "JPEG", "a.jpg", device="cpu")
    assert on_cpu.device.type == "cpu" and torch.equal(on_cpu, images._decode_with_torchcodec(data, "JPEG", "a.jpg"))


@pytest.mark.gpu
@pytest.mark.parametrize("case", ["rgb-jpeg", "exif-rotated-jpeg", "rgb-png"])
def test_the_decoder_decodes_on_cuda_close_to_the_cpu(case):
    data = CASES[case]()
    kind = "PNG" if case.endswith("png") else "JPEG"
    on_cpu = images._decode_with_torchcodec(data, kind, case)
    on_gpu = images._decode_with_torchcodec(data, kind, case, device="cuda")
    assert on_gpu.device.type == "cuda" and on_gpu.dtype == torch.uint8 and on_gpu.shape == on_cpu.shape
    # nvJPEG's IDCT and chroma upsampling are not libjpeg-turbo's: close, not bit-exact
    assert (on_gpu.cpu().float() - on_cpu.float()).abs().mean() < 2
