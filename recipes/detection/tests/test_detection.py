"""What a copy of the detection recipe must keep doing, checked against torchvision's CocoDetection and pycocotools.

    python -m pytest detection/tests          # in the folder you copied the recipe into

Each test builds the fixture folder from the recipe's own ``fixtures.py`` (ten images, polygons,
crowd and compressed RLE masks, an image without boxes), so they run wherever the recipe does,
with or without ``dataloader-recipes`` installed.
"""

import contextlib
import io
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from pycocotools.coco import COCO
from pycocotools.cocoeval import COCOeval
from torchvision.datasets import CocoDetection, wrap_dataset_for_transforms_v2
from torchvision.transforms import v2
from torchvision.transforms.v2 import functional as F

from recipes.core import DataError, SkippedSampleWarning
from recipes.detection import (
    STAT_NAMES,
    CocoDataset,
    detection_loader,
    evaluate,
    padded_detection_collate,
    to_coco_results,
)
from recipes.detection.fixtures import write_detection

# pycocotools warns on numpy 2 about its own __array__; the recipe silences it where it decodes masks
PYCOCOTOOLS_ON_NUMPY2 = r"ignore:__array__ implementation doesn't accept a copy keyword:DeprecationWarning"


@pytest.fixture(scope="module")
def coco(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("fixtures") / "detection"
    write_detection(folder)
    return folder / "images", folder / "instances.json"


def quietly(make):
    with contextlib.redirect_stdout(io.StringIO()):  # pycocotools prints as it loads and scores
        return make()


@pytest.mark.filterwarnings(PYCOCOTOOLS_ON_NUMPY2)
def test_items_are_coco_detections_own_with_masks_and_crowds(coco):
    keys = {"image_id", "boxes", "labels", "masks", "area", "iscrowd"}
    reference = quietly(lambda: wrap_dataset_for_transforms_v2(CocoDetection(*map(str, coco)), target_keys=keys))
    dataset = CocoDataset(*coco, masks=True, include_crowd=True)
    assert len(dataset) == len(reference) == 10
    for index in range(len(dataset)):
        (image, target), (expected_image, expected) = dataset[index], reference[index]
        assert image.dtype == torch.uint8 and torch.equal(image, F.pil_to_tensor(expected_image))
        assert target["image_id"] == expected["image_id"]
        if "boxes" not in expected:  # torchvision keeps only image_id where an image has no boxes
            assert target["boxes"].shape == (0, 4) and target["labels"].shape == (0,)
            continue
        assert torch.equal(target["boxes"], expected["boxes"]) and target["boxes"].canvas_size == image.shape[-2:]
        assert torch.equal(target["labels"], expected["labels"]) and torch.equal(target["masks"], expected["masks"])
        assert torch.equal(target["iscrowd"], torch.tensor(expected["iscrowd"]))
    assert sum(int(dataset[i][1]["iscrowd"].sum()) for i in range(10)) == 2
    assert not any(CocoDataset(*coco)[i][1]["iscrowd"].any() for i in range(10))  # crowds left out by default


@pytest.mark.filterwarnings(PYCOCOTOOLS_ON_NUMPY2)
def test_a_flip_moves_boxes_and_masks_with_the_pixels(coco):
    plain = CocoDataset(*coco, masks=True)
    flipped = CocoDataset(*coco, transforms=v2.RandomHorizontalFlip(p=1.0), masks=True)
    for index in range(len(plain)):
        (image, target), (image_f, target_f) = plain[index], flipped[index]
        x1, y1, x2, y2 = target["boxes"].unbind(-1)
        width = image.shape[-1]
        assert torch.equal(image_f, image.flip(-1)) and torch.equal(target_f["masks"], target["masks"].flip(-1))
        torch.testing.assert_close(target_f["boxes"].as_subclass(torch.Tensor),
                                   torch.stack([width - x2, y1, width - x1, y2], -1), rtol=0, atol=1e-5)


def test_padded_batches_hold_each_image_top_left_and_mark_real_boxes(coco):
    dataset = CocoDataset(*coco)
    samples = [dataset[i] for i in (0, 4, 5)]  # one of them has no boxes
    batch = padded_detection_collate([samples[0], None, samples[1], samples[2]])  # None: a sample skipped
    assert batch["images"].dtype == torch.uint8 and batch["images"].shape[-1] % 32 == 0
    most = max(len(target["labels"]) for _, target in samples)
    assert batch["boxes"].shape == (3, most, 4) and batch["labels"].shape == batch["box_mask"].shape == (3, most)
    for row, (image, target) in enumerate(samples):
        h, w = image.shape[-2:]
        n = len(target["labels"])
        assert batch["image_sizes"][row].tolist() == [h, w] and batch["image_id"][row] == target["image_id"]
        assert torch.equal(batch["images"][row, :, :h, :w], image) and not batch["images"][row, :, h:].any()
        assert batch["box_mask"][row].tolist() == [True] * n + [False] * (most - n)
        assert torch.equal(batch["boxes"][row, :n], target["boxes"].as_subclass(torch.Tensor))
        assert (batch["labels"][row, n:] == -1).all()
    assert min(len(target["labels"]) for _, target in samples) == 0


def test_a_seed_gives_the_same_aspect_grouped_batches_with_or_without_workers(coco):
    dataset = CocoDataset(*coco)

    def batches(workers: int, seed: int = 0) -> list:
        loader = detection_loader(dataset, 2, device="cpu", seed=seed, num_workers=workers)
        return [[target["image_id"] for target in targets] for _, targets in loader]

    first = batches(0)
    assert batches(0) == batches(2) == first and batches(0, seed=1) != first
    ratios = dict(zip(dataset.index.image_ids.tolist(), dataset.aspect_ratios.tolist()))
    assert all(len({ratios[i] >= 1 for i in batch}) == 1 for batch in first)  # portrait and landscape apart
    assert len({i for batch in first for i in batch}) == 2 * len(first) >= 8


def test_a_stateful_loader_resumes_mid_epoch_with_exactly_the_batches_still_to_come(coco):
    def loader():
        return detection_loader(CocoDataset(*coco, transforms=v2.RandomHorizontalFlip()), 2, device="cpu", seed=3,
                                stateful=True, num_workers=0)

    def seen(batches: list) -> list:
        return [[(target["image_id"], target["boxes"].tolist()) for target in targets] for _, targets in batches]

    uninterrupted = loader()
    expected = seen(list(uninterrupted) + list(uninterrupted))
    interrupted = loader()
    batches = iter(interrupted)
    first = [next(batches) for _ in range(2)]
    resumed = loader()
    resumed.load_state_dict(interrupted.state_dict())
    assert seen(first + list(resumed) + list(resumed)) == expected  # the epoch's rest, then the next epoch


@pytest.mark.filterwarnings(PYCOCOTOOLS_ON_NUMPY2)
def test_evaluate_scores_noisy_detections_as_cocoeval_does_on_the_file(coco):
    dataset = CocoDataset(*coco)
    generator = torch.Generator().manual_seed(0)
    outputs, image_ids = [], []
    for index in range(len(dataset)):
        _, target = dataset[index]
        n = len(target["labels"])
        outputs.append({"boxes": target["boxes"].as_subclass(torch.Tensor) + torch.randn(n, 4, generator=generator),
                        "labels": target["labels"], "scores": torch.rand(n, generator=generator)})
        image_ids.append(target["image_id"])
    rows = to_coco_results(outputs, image_ids)
    ours = evaluate(dataset, rows)
    truth = quietly(lambda: COCO(str(coco[1])))
    reference = COCOeval(truth, quietly(lambda: truth.loadRes(rows)), "bbox")
    quietly(lambda: (reference.evaluate(), reference.accumulate(), reference.summarize()))
    assert 0 < ours["AP"] < 1
    np.testing.assert_allclose([ours[name] for name in STAT_NAMES], reference.stats, atol=1e-6)


def test_a_bad_image_is_named_or_skipped_with_a_warning(coco, tmp_path):
    images = tmp_path / "images"
    shutil.copytree(coco[0], images)
    first = min(json.loads(coco[1].read_text())["images"], key=lambda image: image["id"])["file_name"]
    (images / first).write_bytes((images / first).read_bytes()[:200])
    with pytest.raises(DataError, match=first):
        CocoDataset(images, coco[1])[0]
    dataset = CocoDataset(images, coco[1], on_error="skip")
    with pytest.warns(SkippedSampleWarning, match=first):
        batches = list(detection_loader(dataset, 4, train=False, device="cpu", num_workers=0))
    assert [len(targets) for _, targets in batches] == [3, 4, 2]  # ten images, the first one dropped
