"""The image folder fixture (recipes/vision/fixtures.py): every mode and format the decoder meets."""

from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageOps


def test_exif_orientation_six_turns_landscape_into_portrait(fixtures) -> None:
    root = fixtures / "vision"
    with Image.open(root / "dog/exif_rot6.jpg") as img:
        assert img.getexif()[0x0112] == 6 and img.size == (96, 64)
        upright = ImageOps.exif_transpose(img)
    assert upright.size == (64, 96)
    red, _, blue = upright.getpixel((4, 4))
    assert red > 200 and blue < 60  # the red marker is top-left only once rotated


def test_special_image_modes(fixtures) -> None:
    root = fixtures / "vision"
    modes = {"cat/cmyk.jpg": {"CMYK"}, "bird/gray16.png": {"I;16", "I"}, "bird/gray.png": {"L"},
             "cat/gray.jpg": {"L"}, "bird/palette.png": {"P"}, "cat/rgba.png": {"RGBA"}}
    for name, allowed in modes.items():
        with Image.open(root / name) as img:
            assert img.mode in allowed, name
    with Image.open(root / "bird/gray16.png") as img:
        values = np.asarray(img)
        assert (values.min(), values.max()) == (0, 65535)
    with Image.open(root / "bird/palette.png") as img:
        assert "transparency" in img.info


def test_image_folder_matches_reference_loader(fixtures) -> None:
    root = fixtures / "vision"
    folder = pytest.importorskip("torchvision.datasets").ImageFolder(str(root))
    assert folder.classes == ["bird", "cat", "dog"]
    names = [Path(p).relative_to(root).as_posix() for p, _ in folder.samples]
    assert "cat/X.JPG" in names and "dog/puppies/p0.jpg" in names
    assert "cat/notes.txt" not in names and (root / "cat/notes.txt").exists()
    assert all(4 <= folder.targets.count(c) <= 6 for c in range(3))
