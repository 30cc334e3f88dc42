"""to_coco_results and evaluate: result rows, perfect detections, agreement with pycocotools run
on the annotation file itself, crowd regions as ignore areas, and clear errors."""

import contextlib
import io

import numpy as np
import pytest
import torch
from pycocotools.coco import COCO
from pycocotools.cocoeval import COCOeval

from recipes.detection import STAT_NAMES, CocoDataset, evaluate, to_coco_results


@pytest.fixture(scope="module")
def paths(fixtures):
    return fixtures / "detection/images", fixtures / "detection/instances.json"


@pytest.fixture(scope="module")
def dataset(paths):
    return CocoDataset(*paths)


def _perfect(dataset):
    outputs, image_ids = [], []
    for index in range(len(dataset)):
        _, target = dataset[index]
        outputs.append(
            {"boxes": target["boxes"], "labels": target["labels"], "scores": torch.ones(len(target["labels"]))}
        )
        image_ids.append(target["image_id"])
    return outputs, image_ids


def test_result_rows_are_xywh_with_category_ids():
    output = {
        "boxes": torch.tensor([[10.0, 20.0, 40.0, 25.0]]),
        "labels": torch.tensor([2]),
        "scores": torch.tensor([0.75]),
    }
    assert to_coco_results([output], [9]) == [
        {"image_id": 9, "category_id": 2, "bbox": [10.0, 20.0, 30.0, 5.0], "score": 0.75}
    ]
    mapped = to_coco_results([output], torch.tensor([9]), label_to_category={2: 18})
    assert mapped[0]["category_id"] == 18 and mapped[0]["image_id"] == 9
    with pytest.raises(ValueError, match=r"labels \[2\] are not in label_to_category"):
        to_coco_results([output], [9], label_to_category={1: 1})
    with pytest.raises(ValueError, match="2 image ids"):
        to_coco_results([output], [9, 10])


def test_ground_truth_fed_back_scores_perfectly(dataset):
    metrics = evaluate(dataset, to_coco_results(*_perfect(dataset)))
    assert list(metrics) == list(STAT_NAMES)
    for name in ("AP", "AP50", "AP75", "APs", "AR10", "AR100", "ARs"):
        assert metrics[name] == pytest.approx(1.0), name
    assert metrics["APm"] == metrics["APl"] == -1.0  # the fixture's objects are all small
    assert metrics["AR1"] < 1.0  # images hold several objects


def test_a_model_on_contiguous_labels_maps_back_and_still_scores_perfectly(paths):
    dataset = CocoDataset(*paths, contiguous_labels=True)
    rows = to_coco_results(*_perfect(dataset), label_to_category=dataset.label_to_category)
    assert evaluate(dataset, rows)["AP"] == pytest.approx(1.0)


def test_detections_on_crowd_regions_are_ignored_not_counted_as_false(paths, dataset):
    crowded = CocoDataset(*paths, include_crowd=True)
    outputs, image_ids = _perfect(crowded)  # also "detects" the two crowd regions
    assert int(crowded.index.iscrowd.sum()) == 2
    assert evaluate(dataset, to_coco_results(outputs, image_ids))["AP"] == pytest.approx(1.0)


def _reference_stats(ann_file, rows):
    with contextlib.redirect_stdout(io.StringIO()):
        truth = COCO(str(ann_file))
        scorer = COCOeval(truth, truth.loadRes(rows), "bbox")
        scorer.evaluate()
        scorer.accumulate()
        scorer.summarize()
    return scorer.stats


@pytest.mark.parametrize("seed", [0, 1])
def test_noisy_detections_score_as_pycocotools_scores_them_on_the_file(paths, dataset, seed):
    generator = torch.Generator().manual_seed(seed)
    outputs, image_ids = _perfect(dataset)
    for output in outputs:
        n = len(output["boxes"])
        jitter = torch.randn(n, 4, generator=generator) * 2.5
        output["boxes"] = output["boxes"].as_subclass(torch.Tensor) + jitter
        output["scores"] = torch.rand(n, generator=generator)
        wrong = torch.rand(n, generator=generator) < 0.2
        output["labels"] = torch.where(wrong, torch.tensor(1), output["labels"])
    outputs[2]["boxes"] = torch.cat([outputs[2]["boxes"], torch.tensor([[1.0, 1.0, 30.0, 30.0]])])
    outputs[2]["labels"] = torch.cat([outputs[2]["labels"], torch.tensor([7])])
    outputs[2]["scores"] = torch.cat([outputs[2]["scores"], torch.tensor([0.9])])
    rows = to_coco_results(outputs, image_ids)
    ours = evaluate(dataset, rows)
    assert 0 < ours["AP"] < 1
    np.testing.assert_allclose([ours[name] for name in STAT_NAMES], _reference_stats(paths[1], rows), atol=1e-6)


def test_no_detections_scores_zero_instead_of_crashing(dataset):
    metrics = evaluate(dataset, [])
    assert metrics["AP"] == 0.0 and metrics["AR100"] == 0.0


def test_rows_for_unknown_images_or_categories_are_refused(dataset):
    row = {"image_id": 3, "category_id": 1, "bbox": [1, 1, 5, 5], "score": 0.5}
    with pytest.raises(ValueError, match=r"images that are not in the dataset: \[4\]"):
        evaluate(dataset, [dict(row, image_id=4)])
    with pytest.raises(ValueError, match="label_to_category=dataset.label_to_category"):
        evaluate(dataset, [dict(row, category_id=2)])


def test_evaluate_scores_only_the_images_the_dataset_serves(paths):
    dataset = CocoDataset(*paths, remove_empty=True)
    assert {image["id"] for image in dataset.ground_truth()["images"]} == set(dataset.image_ids.tolist())
    assert evaluate(dataset, to_coco_results(*_perfect(dataset)))["AP"] == pytest.approx(1.0)
