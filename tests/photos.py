"""Small generated image folders for the tests (module level, so worker processes can import it)."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
from PIL import Image


def photo(width: int, height: int, seed: int) -> Image.Image:
    """Gradients, a seed-dependent pattern and noise: every seed gives a different picture."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width]
    phase = rng.uniform(0, 6.3, 3)
    rgb = 127 + 100 * np.sin(np.stack([x / 17 + phase[0], y / 11 + phase[1], (x + y) / 23 + phase[2]], axis=-1))
    rgb += rng.normal(0, 8, rgb.shape)
    return Image.fromarray(np.clip(rgb, 0, 255).astype(np.uint8))


def image_folder(root: Path, classes: int, per_class: int, size: tuple[int, int] = (40, 30)) -> Path:
    """``root/class_k/img_j.jpg``, each image distinct; returns ``root``."""
    for k in range(classes):
        (root / f"class_{k}").mkdir(parents=True, exist_ok=True)
        for j in range(per_class):
            photo(*size, seed=k * 1000 + j).save(root / f"class_{k}" / f"img_{j}.jpg", quality=90)
    return root


def jpeg_bytes(image: Image.Image, **options) -> bytes:
    """``image`` encoded by PIL's JPEG encoder with these save options."""
    buffer = io.BytesIO()
    image.save(buffer, "JPEG", **options)
    return buffer.getvalue()


def overwrite_scan_data(data: bytes, fraction: float, seed: int, length: int = 200) -> bytes:
    """``data`` with ``length`` random bytes written over its entropy-coded data, ``fraction`` of
    the way from the end of the first scan header to the end-of-image marker."""
    position = 2  # after SOI: walk the header segments up to the first scan (SOS, 0xDA)
    while data[position + 1] != 0xDA:
        position += 2 + int.from_bytes(data[position + 2 : position + 4], "big")
    start = position + 2 + int.from_bytes(data[position + 2 : position + 4], "big")
    at = start + int((len(data) - 2 - length - start) * fraction)
    noise = np.random.default_rng(seed).integers(0, 256, length, dtype=np.uint8).tobytes()
    return data[:at] + noise + data[at + length :]
