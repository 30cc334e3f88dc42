"""COCO geometry for the detection fixtures: run-length masks as COCO writes them, polygons and blobs.

    counts = rle_counts(mask)        # uncompressed RLE, column-major, starting with a zero run
    rle_string(counts)               # the compressed string, the bytes pycocotools' rleToString writes

Part of the fixture generator (:mod:`recipes.fixtures`, whose cache key hashes this file too).
"""

import numpy as np
from PIL import Image, ImageDraw


def rle_counts(mask: np.ndarray) -> list[int]:
    """Uncompressed COCO RLE: run lengths of the column-major mask, starting with zeros."""
    flat = np.asarray(mask, dtype=np.uint8).ravel(order="F")
    edges = np.concatenate([[0], np.flatnonzero(np.diff(flat)) + 1, [flat.size]])
    runs = np.diff(edges).tolist()
    return [0] + runs if flat[0] else runs


def rle_string(counts: list[int]) -> str:
    """Compressed COCO RLE string, the same bytes as pycocotools' rleToString."""
    out = []
    for i, count in enumerate(counts):
        x = count - counts[i - 2] if i > 2 else count
        more = True
        while more:
            c = x & 0x1F
            x >>= 5
            more = x != -1 if c & 0x10 else x != 0
            out.append(chr((c | 0x20 if more else c) + 48))
    return "".join(out)


def polygon(rng: np.random.Generator, w: int, h: int) -> list[float]:
    """A jittered k-gon (triangle .. 12-gon) that lies inside the image."""
    rx, ry = rng.uniform(0.12, 0.28) * w, rng.uniform(0.12, 0.28) * h
    cx, cy = rng.uniform(rx + 1, w - rx - 1), rng.uniform(ry + 1, h - ry - 1)
    k = int(rng.choice([3, 4, 5, 6, 8, 12]))
    angles = rng.uniform(0, 2 * np.pi) + np.linspace(0, 2 * np.pi, k, endpoint=False)
    radius = rng.uniform(0.7, 1.0, k)
    xs, ys = cx + rx * radius * np.cos(angles), cy + ry * radius * np.sin(angles)
    return np.round(np.stack([xs, ys], 1).ravel(), 2).tolist()


def polygon_area(poly: list[float]) -> float:
    x, y = np.array(poly[0::2]), np.array(poly[1::2])
    return round(float(abs(np.dot(x, np.roll(y, 1)) - np.dot(y, np.roll(x, 1))) / 2), 2)


def mask_box(mask: np.ndarray) -> list[float]:
    ys, xs = np.nonzero(mask)
    return [float(xs.min()), float(ys.min()), float(xs.max() - xs.min() + 1),
            float(ys.max() - ys.min() + 1)]


def blob_mask(rng: np.random.Generator, w: int, h: int, crowd: bool) -> np.ndarray:
    """One ellipse, or a crowd of 5-8 small dots in one region."""
    canvas = Image.new("L", (w, h))
    draw = ImageDraw.Draw(canvas)
    x0, y0 = int(rng.integers(2, w // 3)), int(rng.integers(2, h // 3))
    if not crowd:
        x1, y1 = x0 + int(rng.integers(15, w // 2)), y0 + int(rng.integers(15, h // 2))
        draw.ellipse((x0, y0, x1, y1), fill=1)
    for _ in range(int(rng.integers(5, 9)) if crowd else 0):
        cx, cy, r = x0 + rng.integers(0, w // 2), y0 + rng.integers(0, h // 2), rng.integers(2, 5)
        draw.ellipse((int(cx - r), int(cy - r), int(cx + r), int(cy + r)), fill=1)
    return np.array(canvas, dtype=np.uint8)
