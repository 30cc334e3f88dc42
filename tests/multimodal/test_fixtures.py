"""The caption fixtures (recipes/multimodal/fixtures.py): three manifests of the same images."""

import csv
import json


def test_caption_files_describe_the_same_images(fixtures) -> None:
    root = fixtures / "multimodal"
    rows = [json.loads(line) for line in (root / "manifest.jsonl").read_text(encoding="utf-8").splitlines()]
    assert sum("captions" in r for r in rows) == 1 and sum("caption" in r for r in rows) == 7
    with (root / "manifest.csv").open(encoding="utf-8", newline="") as f:
        table = list(csv.DictReader(f))
    coco = json.loads((root / "captions.json").read_text(encoding="utf-8"))
    files = [i["file_name"] for i in coco["images"]]
    assert [r["image"] for r in rows] == [r["image"] for r in table] == files
    assert all((root / name).is_file() for name in files)  # relative to the json's folder
    per_image = [sum(a["image_id"] == i["id"] for a in coco["annotations"]) for i in coco["images"]]
    assert min(per_image) >= 2 and max(per_image) <= 5
