"""The detection fixtures: a COCO instances file over ten images, and the COCO geometry it is drawn with.

    write_detection(Path("fixtures/detection"))   # called by recipes.fixtures.generate (recipes/domains.py names it)
    counts = rle_counts(mask)        # uncompressed RLE, column-major, starting with a zero run
    rle_string(counts)               # the compressed string, the bytes pycocotools' rleToString writes

Objects are polygons, crowd blobs and run-length masks in their category's colour over a washed-out
:func:`recipes.fixtures_files.background`; ``LAYOUT`` is what ``fixtures/README.md`` says of them.
"""

from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw

from recipes.fixtures_files import FIXTURES_VERSION, background, noisy, save, write_json

LAYOUT = """\
    detection/
      instances.json   COCO instances; file_name relative to detection/images/ (image_root)
      images/*.jpg     10 images, ids 3 7 8 15 42 100 101 256 999 1000 (96x64, 64x96, 80x80);
                       image 42 has no annotations; categories 1 person, 3 car, 7 dog, 12 cup,
                       18 kite; polygons drawn in the category colour; images 8 and 256 hold a
                       crowd annotation (iscrowd 1, uncompressed RLE); image 15 holds one
                       non-crowd annotation with a compressed RLE (counts is a string)
"""


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


CATEGORIES = [(1, "person", "person", (220, 40, 40)), (3, "car", "vehicle", (40, 80, 230)),
              (7, "dog", "animal", (240, 200, 30)), (12, "cup", "kitchen", (30, 190, 80)),
              (18, "kite", "sports", (200, 50, 220))]
DET_IMAGES = [(3, 96, 64), (7, 64, 96), (8, 96, 64), (15, 80, 80), (42, 64, 96), (100, 96, 64),
              (101, 64, 96), (256, 96, 64), (999, 64, 96), (1000, 96, 64)]
EMPTY_IMAGE, CROWD_IMAGES, RLE_IMAGE = 42, (8, 256), 15


def write_detection(root: Path) -> str:
    """The detection fixtures under ``root``: a COCO instances file and its images; returns ``LAYOUT``."""
    rng = np.random.default_rng(3)
    images, annotations, ann_id = [], [], 1000
    for image_id, w, h in DET_IMAGES:
        img = background(rng, w, h)
        img = Image.blend(img, Image.new("RGB", (w, h), (128, 128, 128)), 0.6)  # objects stand out
        draw = ImageDraw.Draw(img)
        kinds = [] if image_id == EMPTY_IMAGE else ["polygon"] * int(rng.integers(2, 5))
        if image_id in CROWD_IMAGES:
            kinds[-1] = "crowd"
        if image_id == RLE_IMAGE:
            kinds[-1] = "rle"
        for kind in kinds:
            cat_id, _, _, colour = CATEGORIES[int(rng.integers(len(CATEGORIES)))]
            ann_id += int(rng.integers(1, 8))  # unique, non-contiguous
            ann = {"id": ann_id, "image_id": image_id, "category_id": cat_id, "iscrowd": 0}
            if kind == "polygon":
                poly = polygon(rng, w, h)
                draw.polygon(list(zip(poly[0::2], poly[1::2])), fill=colour)
                xs, ys = poly[0::2], poly[1::2]
                box = [min(xs), min(ys), max(xs) - min(xs), max(ys) - min(ys)]
                ann.update(segmentation=[poly], area=polygon_area(poly))
            else:
                mask = blob_mask(rng, w, h, crowd=kind == "crowd")
                img.paste(colour, mask=Image.fromarray(mask * 255))
                counts = rle_counts(mask)
                seg = counts if kind == "crowd" else rle_string(counts)
                box = mask_box(mask)
                ann.update(segmentation={"counts": seg, "size": [h, w]}, area=float(mask.sum()),
                           iscrowd=int(kind == "crowd"))
            ann["bbox"] = [round(v, 2) for v in box]
            annotations.append(ann)
        name = f"{image_id:012d}.jpg"
        save(noisy(rng, img, sigma=4.0), root / "images" / name)
        images.append({"id": image_id, "file_name": name, "width": w, "height": h, "license": 1})
    write_json(root / "instances.json", {
        "info": {"description": "recipes detection fixture", "version": FIXTURES_VERSION,
                 "year": 2024},
        "licenses": [{"id": 1, "name": "CC0-1.0", "url": ""}],
        "images": images, "annotations": annotations,
        "categories": [{"id": i, "name": n, "supercategory": s} for i, n, s, _ in CATEGORIES]})
    return LAYOUT
