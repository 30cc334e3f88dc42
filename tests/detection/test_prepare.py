"""recipes.detection.prepare and `recipes prepare detection`: a COCO file's images re-encoded at a
bounded size with their boxes, areas and polygon or RLE masks scaled alike, checked against
CocoDataset's items resized by torchvision's v2.Resize (boxes within a pixel, masks but for their
edges); the same bytes whatever the workers; read back by CocoShards."""

import json

import pytest
import torch
from torchvision.transforms import v2

from recipes.detection import CocoDataset, CocoShards, prepare

PYCOCOTOOLS_ON_NUMPY2 = r"ignore:__array__ implementation doesn't accept a copy keyword:DeprecationWarning"


@pytest.fixture(scope="module")
def coco(fixtures):
    return fixtures / "detection" / "images", fixtures / "detection" / "instances.json"


@pytest.mark.filterwarnings(PYCOCOTOOLS_ON_NUMPY2)
def test_boxes_areas_and_masks_are_scaled_with_the_image_as_v2_resize_scales_them(coco, tmp_path):
    summary = prepare(*coco, tmp_path / "one", max_side=48, samples_per_shard=4, workers=1, progress=False)
    again = prepare(*coco, tmp_path / "two", max_side=48, samples_per_shard=4, workers=2, progress=False)
    assert [path.read_bytes() for path in summary.shards] == [path.read_bytes() for path in again.shards]
    assert summary.samples == 10 and summary.reencoded == 10 and len(summary.shards) == 3
    dataset = CocoDataset(*coco, masks=True)
    streamed = list(CocoShards(summary.shards, masks=True, categories=tmp_path / "one" / "categories.json"))
    assert len(streamed) == len(dataset)
    for k, (image, target) in enumerate(streamed):
        original, expected = dataset[k]
        height, width = image.shape[-2:]
        assert max(height, width) == 48 and target["image_id"] == expected["image_id"]
        assert target["boxes"].canvas_size == (height, width)
        resized, oracle = v2.Resize((height, width), antialias=True)(original, expected)  # torchvision's scaling
        assert torch.equal(target["labels"], oracle["labels"]) and torch.equal(target["iscrowd"], oracle["iscrowd"])
        assert torch.allclose(target["boxes"], oracle["boxes"], atol=1.0), target["image_id"]
        scale = height * width / (original.shape[-2] * original.shape[-1])
        assert torch.allclose(target["area"], expected["area"] * scale, rtol=1e-4)
        # a polygon drawn at the new size against the old mask resized: they differ on edge pixels only
        for mask, reference in zip(target["masks"], oracle["masks"]):
            differ = (mask != reference).sum().item()
            assert differ <= 2 * (height + width) + 0.2 * max(reference.sum().item(), 1), target["image_id"]
        assert (image.float() - resized.float()).abs().mean() < 8  # the same picture, through one JPEG encode
    categories = json.loads((tmp_path / "one" / "categories.json").read_text())["categories"]
    assert categories == json.loads(coco[1].read_text())["categories"]


def test_recipes_prepare_detection_needs_the_image_root_and_writes_what_cocoshards_reads(coco, tmp_path, capsys):
    from recipes.__main__ import main

    with pytest.raises(SystemExit):
        main(["prepare", "detection", str(coco[1]), str(tmp_path / "out")])
    assert "detection reads its images from --image-root DIR" in capsys.readouterr().err
    assert main(["prepare", "detection", str(coco[1]), str(tmp_path / "out"), "--image-root", str(coco[0]),
                 "--workers", "1"]) == 0
    out = capsys.readouterr().out
    # no --max-side: every image keeps its bytes, and the summary says none was re-encoded by saying nothing of it
    assert "10 samples in 1 shards (0 already written)\n" in out and "re-encoded" not in out and "CocoShards(" in out
    assert main(["check", "detection", str(tmp_path / "out")]) == 0
    assert "1 of 1 shards as manifest.json lists them (sha256)" in capsys.readouterr().out


def test_an_annotation_is_scaled_along_each_axis_by_its_own_factor():
    from pycocotools import mask as coco_mask

    from recipes.detection.prepare_shards import scaled_annotation

    plane = torch.zeros(100, 200, dtype=torch.uint8)
    plane[20:60, 10:40] = 1
    rle = coco_mask.encode(plane.numpy().copy(order="F"))
    annotation = {"id": 1, "bbox": [10, 20, 30, 40], "area": 1200, "segmentation": [[10, 20, 40, 20, 40, 60]]}
    scaled = scaled_annotation(annotation, (100, 200), (50, 40), "a.json")  # x by 0.2, y by 0.5
    assert scaled["bbox"] == pytest.approx([2, 10, 6, 20]) and scaled["area"] == pytest.approx(120)
    assert scaled["segmentation"] == [pytest.approx([2, 10, 8, 10, 8, 30])]
    masked = scaled_annotation({**annotation, "segmentation": {"size": [100, 200], "counts": rle["counts"].decode()}},
                               (100, 200), (50, 40), "a.json")["segmentation"]
    expected = v2.functional.resize(plane[None], [50, 40], interpolation=v2.InterpolationMode.NEAREST)[0]
    assert masked["size"] == [50, 40] and torch.equal(torch.from_numpy(coco_mask.decode(masked)), expected)
