"""The COCO fixture (recipes/detection/fixtures.py): its edge cases, and masks that agree with pycocotools."""

import json

import numpy as np
import pytest

from recipes.detection.fixtures import rle_counts, rle_string


def test_coco_instances_cover_edge_cases(fixtures) -> None:
    root = fixtures / "detection"
    coco = json.loads((root / "instances.json").read_text(encoding="utf-8"))
    cat_ids = [c["id"] for c in coco["categories"]]
    assert cat_ids != list(range(1, len(cat_ids) + 1))
    assert all(c["supercategory"] for c in coco["categories"])
    image_ids = [i["id"] for i in coco["images"]]
    assert image_ids != list(range(1, len(image_ids) + 1))
    shapes = {(i["width"], i["height"]) for i in coco["images"]}
    assert {(96, 64), (64, 96), (80, 80)} <= shapes
    anns = coco["annotations"]
    assert len({a["id"] for a in anns}) == len(anns)
    per_image = {i: sum(a["image_id"] == i for a in anns) for i in image_ids}
    assert sorted(per_image.values())[0] == 0 and sorted(per_image.values())[1] >= 2
    assert max(per_image.values()) <= 4 and list(per_image.values()).count(0) == 1
    sizes = {i["id"]: (i["width"], i["height"]) for i in coco["images"]}
    for a in anns:
        x, y, w, h = a["bbox"]
        width, height = sizes[a["image_id"]]
        assert w > 0 and h > 0 and x >= 0 and y >= 0 and x + w <= width and y + h <= height
        assert a["category_id"] in cat_ids and (root / "images" / coco["images"][
            image_ids.index(a["image_id"])]["file_name"]).is_file()
    crowd = [a for a in anns if a["iscrowd"]]
    assert len(crowd) >= 2 and all(isinstance(a["segmentation"]["counts"], list) for a in crowd)
    compressed = [a for a in anns if isinstance(a["segmentation"], dict)
                  and isinstance(a["segmentation"]["counts"], str)]
    assert len(compressed) == 1 and compressed[0]["iscrowd"] == 0


def test_rle_masks_agree_with_pycocotools(fixtures) -> None:
    root = fixtures / "detection"
    mask_utils = pytest.importorskip("pycocotools.mask")
    coco = json.loads((root / "instances.json").read_text(encoding="utf-8"))
    for a in coco["annotations"]:
        seg = a["segmentation"]
        if not isinstance(seg, dict):
            continue
        rle = mask_utils.frPyObjects(seg, *seg["size"]) if a["iscrowd"] else seg
        assert float(mask_utils.area(rle)) == a["area"]
        assert mask_utils.toBbox(rle).tolist() == a["bbox"]
        mask = mask_utils.decode(rle)
        encoded = mask_utils.encode(np.asfortranarray(mask))["counts"].decode()
        assert rle_string(rle_counts(mask)) == encoded
        if a["iscrowd"]:
            assert rle_counts(mask) == seg["counts"]
        else:
            assert seg["counts"] == encoded
