"""The hostile fixtures: files each broken in exactly one way, and the README that lists them.

    files = hostile_files(good_jpeg)        # {"images/truncated.jpg": b"...", ..., "README.md": "# Hostile..."}
    instances = hostile_coco("escape")      # a COCO instances dict, wrong in that one way only

Only the contents are made here, with the standard library; :func:`recipes.fixtures.generate`
writes them into ``hostile/`` next to the valid images they need, and the cached copy of the
fixtures (:func:`recipes.fixtures.fixtures_dir`) is keyed by this file as well as that one.
"""

import struct
import zlib

COCO_CASES = ("escape", "unknown_category", "negative_box")  # coco/<case>.json, see hostile_coco
MISSING_FIELD_ROWS = [{"text": "row one is fine", "label": 0}, {"label": 1}, {"text": "row three is fine", "label": 2}]


def hostile_files(good_jpeg: bytes) -> dict[str, bytes | str]:
    """The broken files by their path under ``hostile/``, README included; ``good_jpeg`` is cut short."""
    return {
        "images/truncated.jpg": good_jpeg[: len(good_jpeg) * 6 // 10],
        "images/empty.jpg": b"",
        "images/not_an_image.jpg": "This is plain text with a .jpg name.\n",
        "images/bomb.png": _bomb_png(),
        "text/bad_utf8.txt": "first line is fine\nsecond line is fine\n".encode()
        + b"third line \xff\xfe is not UTF-8\nfourth line is fine\n",
        "README.md": HOSTILE_README,
    }


def _png_chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def _bomb_png(side: int = 16000) -> bytes:
    """IHDR claims side x side 8-bit gray (256 MP); one compressed row follows. ~100 bytes."""
    ihdr = struct.pack(">IIBBBBB", side, side, 8, 0, 0, 0, 0)
    idat = zlib.compress(b"\x00" * (side + 1), 9)
    return (b"\x89PNG\r\n\x1a\n" + _png_chunk(b"IHDR", ihdr) + _png_chunk(b"IDAT", idat)
            + _png_chunk(b"IEND", b""))


def hostile_coco(case: str) -> dict:
    """A two-image COCO instances file, wrong in the one way ``case`` (one of COCO_CASES) names."""
    images = [{"id": 1, "file_name": "a.jpg", "width": 64, "height": 48},
              {"id": 2, "file_name": "b.jpg", "width": 48, "height": 64}]
    boxes = [(1, 1, 1, [4.0, 6.0, 20.0, 16.0]), (2, 1, 3, [10.0, 10.0, 12.0, 8.0]),
             (3, 2, 1, [5.0, 20.0, 30.0, 25.0])]
    if case == "escape":
        images[1]["file_name"] = "../escape.jpg"
    if case == "unknown_category":
        boxes[1] = (2, 1, 99, boxes[1][3])
    if case == "negative_box":
        boxes[2] = (3, 2, 1, [35.0, 20.0, -30.0, 25.0])
    anns = []
    for ann_id, image_id, cat, (x, y, bw, bh) in boxes:
        poly = [x, y, x + bw, y, x + bw, y + bh, x, y + bh]
        anns.append({"id": ann_id, "image_id": image_id, "category_id": cat, "bbox": [x, y, bw, bh],
                     "area": abs(bw * bh), "iscrowd": 0, "segmentation": [poly]})
    cats = [{"id": 1, "name": "person", "supercategory": "person"},
            {"id": 3, "name": "car", "supercategory": "vehicle"}]
    return {"info": {"description": f"hostile case: {case}"}, "licenses": [],
            "images": images, "annotations": anns, "categories": cats}


HOSTILE_README = """# Hostile fixtures

Each file is bad in exactly one way. With `on_error="raise"` a loader raises an error naming the
file (and line / annotation id) and the problem; with `on_error="skip"` it drops the sample with a
warning naming file and reason. It never substitutes another sample.

| file | problem | loader must |
|---|---|---|
| images/truncated.jpg | JPEG cut to 60% of its bytes | raise/skip, never a half-grey image |
| images/empty.jpg | zero bytes | raise/skip |
| images/not_an_image.jpg | a text file with an image name | raise/skip |
| images/bomb.png | ~100 bytes; IHDR claims 16000x16000 (256 MP) | refuse from the header |
| coco/escape.json | image 2 file_name "../escape.jpg" (exists!) | refuse the path, never load it |
| coco/unknown_category.json | annotation 2 has category_id 99 | raise naming annotation 2 |
| coco/negative_box.json | annotation 3 bbox width is -30 | raise/skip naming annotation 3 |
| text/bad_utf8.txt | line 3 holds bytes ff fe (invalid UTF-8) | raise naming line 3 |
| text/missing_field.jsonl | row 2 has no "text" key | raise naming line 2 and the key |

The coco cases use image_root `coco/images/`; `a.jpg` and `b.jpg` there are valid.
"""
