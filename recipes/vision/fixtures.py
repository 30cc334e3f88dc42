"""The image fixtures: vision's class folders, detection's COCO file, multimodal's caption manifests.

    write_vision(Path("fixtures/vision"))         # each called by recipes.fixtures.generate
    picture(np.random.default_rng(0), 96, 64)     # a seeded RGB picture: gradient, shapes, noise

Every picture is a smooth gradient with a few filled shapes and a little noise, drawn from a
seeded RNG and saved with fixed encoder settings (:mod:`recipes.fixtures_files`); the COCO masks
and polygons come from :mod:`recipes.fixtures_coco`, the captions from :mod:`recipes.fixtures_text`.
The layout is ``recipes.fixtures.README``.
"""

import csv
import io
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw

from recipes.fixtures_coco import blob_mask, mask_box, polygon, polygon_area, rle_counts, rle_string
from recipes.fixtures_files import FIXTURES_VERSION, save, write, write_json, write_jsonl
from recipes.fixtures_text import sentence


def background(rng: np.random.Generator, w: int, h: int, tint: tuple = (0, 0, 0)) -> Image.Image:
    """Smooth three-colour gradient plus a few filled ellipses and rectangles."""
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float64)
    xx, yy = xx / max(w - 1, 1), yy / max(h - 1, 1)
    c0, c1, c2 = (rng.uniform(30, 225, 3) for _ in range(3))
    arr = c0 + (c1 - c0) * xx[..., None] + (c2 - c0) * yy[..., None] + np.array(tint)
    img = Image.fromarray(np.clip(arr, 0, 255).astype(np.uint8), "RGB")
    draw = ImageDraw.Draw(img)
    for _ in range(int(rng.integers(2, 5))):
        x0, x1 = sorted(rng.integers(0, w, 2).tolist())
        y0, y1 = sorted(rng.integers(0, h, 2).tolist())
        fill = tuple(rng.integers(0, 256, 3).tolist())
        shape = draw.ellipse if rng.random() < 0.5 else draw.rectangle
        shape((x0, y0, x1 + 2, y1 + 2), fill=fill)
    return img


def noisy(rng: np.random.Generator, img: Image.Image, sigma: float = 6.0) -> Image.Image:
    """``img`` with Gaussian noise of ``sigma`` added to each channel, rounded and clipped to uint8."""
    arr = np.asarray(img, dtype=np.float64) + rng.normal(0.0, sigma, (img.height, img.width, 3))
    return Image.fromarray(np.clip(np.rint(arr), 0, 255).astype(np.uint8), "RGB")


def picture(rng: np.random.Generator, w: int, h: int, tint: tuple = (0, 0, 0)) -> Image.Image:
    """A ``w`` x ``h`` RGB picture: a tinted :func:`background` under :func:`noisy`'s noise."""
    return noisy(rng, background(rng, w, h, tint))


CLASS_TINT = {"bird": (-30, -10, 40), "cat": (40, 10, -30), "dog": (-20, 35, -20)}


def write_vision(root: Path) -> None:
    """The vision fixtures under ``root``: an image folder of 3 classes (the layout: ``README``)."""
    rng = np.random.default_rng(1)

    def pic(cls: str, w: int, h: int) -> Image.Image:
        return picture(rng, w, h, CLASS_TINT[cls])

    save(pic("bird", 96, 64), root / "bird/rgb.jpg")
    save(pic("bird", 56, 88), root / "bird/rgb_portrait.png")
    save(pic("bird", 40, 40).convert("L"), root / "bird/gray.png")
    save(pic("bird", 72, 48).quantize(16, dither=Image.Dither.NONE), root / "bird/palette.png",
          transparency=0)
    ramp = np.linspace(0, 65535, 64 * 48).reshape(48, 64)
    ramp[1:-1, 1:-1] += rng.normal(0, 900, (46, 62))  # noisy inside; corners stay 0 and 65535
    gray16 = np.clip(np.rint(ramp), 0, 65535).astype(np.uint16)
    save(Image.fromarray(gray16), root / "bird/gray16.png")

    save(pic("cat", 64, 64), root / "cat/rgb.jpg")
    rgba = pic("cat", 80, 60)
    rgba.putalpha(Image.fromarray(np.tile(np.linspace(255, 40, 80).astype(np.uint8), (60, 1))))
    save(rgba, root / "cat/rgba.png")
    save(pic("cat", 60, 90).convert("CMYK"), root / "cat/cmyk.jpg")
    save(pic("cat", 100, 70).convert("L"), root / "cat/gray.jpg")
    save(pic("cat", 48, 72), root / "cat/X.JPG")
    write(root / "cat/notes.txt", "Not an image: ImageFolder must skip this file.\n")

    save(pic("dog", 120, 80), root / "dog/rgb.jpg")
    save(pic("dog", 32, 48), root / "dog/rgb.png")
    save(pic("dog", 64, 80), root / "dog/puppies/p0.jpg")
    upright = pic("dog", 64, 96)  # portrait as displayed; asymmetric markers reveal a missing turn
    ImageDraw.Draw(upright).rectangle((0, 0, 23, 15), fill=(255, 0, 0))
    ImageDraw.Draw(upright).rectangle((52, 88, 63, 95), fill=(0, 0, 255))
    exif = Image.Exif()
    exif[0x0112] = 6  # orientation 6: viewer rotates 90 degrees clockwise
    save(upright.transpose(Image.Transpose.ROTATE_90), root / "dog/exif_rot6.jpg",
          exif=exif.tobytes())


CATEGORIES = [(1, "person", "person", (220, 40, 40)), (3, "car", "vehicle", (40, 80, 230)),
              (7, "dog", "animal", (240, 200, 30)), (12, "cup", "kitchen", (30, 190, 80)),
              (18, "kite", "sports", (200, 50, 220))]
DET_IMAGES = [(3, 96, 64), (7, 64, 96), (8, 96, 64), (15, 80, 80), (42, 64, 96), (100, 96, 64),
              (101, 64, 96), (256, 96, 64), (999, 64, 96), (1000, 96, 64)]
EMPTY_IMAGE, CROWD_IMAGES, RLE_IMAGE = 42, (8, 256), 15


def write_detection(root: Path) -> None:
    """The detection fixtures under ``root``: a COCO instances file and its images (the layout: ``README``)."""
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


MM_SIZES = [(64, 48), (48, 64), (80, 80), (120, 72), (40, 100), (96, 64), (56, 56), (72, 96)]
MM_IDS = [2, 5, 11, 17, 23, 31, 47, 64]
MULTI_CAPTION_ROW = 3


def write_multimodal(root: Path) -> None:
    """The multimodal fixtures under ``root``: caption manifests over images (the layout: ``README``)."""
    rng = np.random.default_rng(4)
    names = [f"images/img_{i}.jpg" for i in range(len(MM_SIZES))]
    for name, (w, h) in zip(names, MM_SIZES):
        save(picture(rng, w, h), root / name)
    captions = [[sentence(rng, int(rng.integers(3, 16))) for _ in range(rng.integers(2, 6))]
                for _ in names]
    captions[MULTI_CAPTION_ROW] = [sentence(rng, n) for n in (4, 9, 14)]
    rows = [{"image": n, "caption": c[0]} for n, c in zip(names, captions)]
    k = MULTI_CAPTION_ROW
    rows[k] = {"image": names[k], "captions": captions[k]}
    write_jsonl(root / "manifest.jsonl", rows)
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerows([["image", "caption"]] + [[n, c[0]] for n, c in zip(names, captions)])
    write(root / "manifest.csv", buf.getvalue())
    anns = [{"image_id": i, "caption": c} for i, caps in zip(MM_IDS, captions) for c in caps]
    for k, ann in enumerate(anns):
        ann["id"] = 500 + 3 * k
    write_json(root / "captions.json", {
        "info": {"description": "recipes caption fixture", "version": FIXTURES_VERSION},
        "licenses": [{"id": 1, "name": "CC0-1.0", "url": ""}],
        "images": [{"id": i, "file_name": n, "width": w, "height": h, "license": 1}
                   for i, n, (w, h) in zip(MM_IDS, names, MM_SIZES)],
        "annotations": anns})
