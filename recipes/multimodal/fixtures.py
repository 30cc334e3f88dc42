"""The multimodal fixtures: eight images and their captions as JSONL, CSV and a COCO captions file.

    write_multimodal(Path("fixtures/multimodal"))   # called by recipes.fixtures.generate (recipes/domains.py names it)

Pictures are :func:`recipes.fixtures_files.picture`s, captions the text fixtures' sentences
(:func:`recipes.text.fixtures.sentence`); ``LAYOUT`` is what ``fixtures/README.md`` says of them.
"""

import csv
import io
from pathlib import Path

import numpy as np

from recipes.fixtures_files import FIXTURES_VERSION, picture, save, write, write_json, write_jsonl
from recipes.text.fixtures import sentence

LAYOUT = """\
    multimodal/        paths below are relative to multimodal/ (the default image_root)
      images/img_0.jpg .. img_7.jpg   varied sizes
      manifest.jsonl   {"image": "images/img_i.jpg", "caption": ...}; row 3 has "captions" [3]
      manifest.csv     image,caption; the same 8 images
      captions.json    COCO captions, file_name "images/img_i.jpg", ids 2 5 11 17 23 31 47 64,
                       2-5 captions per image
"""
MM_SIZES = [(64, 48), (48, 64), (80, 80), (120, 72), (40, 100), (96, 64), (56, 56), (72, 96)]
MM_IDS = [2, 5, 11, 17, 23, 31, 47, 64]
MULTI_CAPTION_ROW = 3


def write_multimodal(root: Path) -> str:
    """The multimodal fixtures under ``root``: caption manifests over images; returns ``LAYOUT``."""
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
    return LAYOUT
