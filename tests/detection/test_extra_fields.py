"""A per-annotation field in the target, in one place: ``CocoDataset(..., extra_fields=("occluded",))``,
or, for anything else, an ``extend_target`` override that gets the raw annotation dicts (docs/copying.md,
"Change tasks"). The oracle is pycocotools' own ``COCO`` index of the same file."""

import json
import re
import shutil

import pytest
import torch
from pycocotools.coco import COCO
from torchvision.transforms import v2

from recipes.core import DataError, SkippedSampleWarning
from recipes.detection import CocoDataset, detection_loader
from recipes.detection import coco_files


def _with_fields(fixtures, tmp_path, values):
    """The fixture's instances with ``values(annotation)`` merged into each annotation."""
    doc = json.loads((fixtures / "detection/instances.json").read_text())
    for annotation in doc["annotations"]:
        annotation.update(values(annotation))
    path = tmp_path / "instances.json"
    path.write_text(json.dumps(doc))
    return path


def _occluded(annotation):
    return {"occluded": annotation["id"] % 3, "truncation": annotation["id"] / 8, "attributes": {"pose": "left"}}


def _visible_annotations(coco, image_id):
    return [a for a in coco.imgToAnns[image_id] if not a["iscrowd"]]


class WithPose(CocoDataset):
    """What extra_fields cannot carry (a string, nested): built from the raw annotation dicts."""

    def extend_target(self, index, target, annotations):
        target["poses"] = [annotation["attributes"]["pose"] for annotation in annotations]
        target["ann_ids"] = torch.tensor([annotation["id"] for annotation in annotations])
        return target


@pytest.fixture(params=["msgspec", "json"])
def parser(request, monkeypatch):
    if request.param == "json":  # the standard library's parse, as without msgspec
        monkeypatch.setattr(coco_files, "msgspec", None)
    return request.param


def test_extra_fields_are_each_boxes_own_values_as_pycocotools_reads_them(fixtures, tmp_path, parser):
    ann_file = _with_fields(fixtures, tmp_path, _occluded)
    dataset = CocoDataset(fixtures / "detection/images", ann_file, extra_fields=("occluded", "truncation"))
    coco = COCO(str(ann_file))
    assert len(dataset) == len(coco.imgs)
    for index in range(len(dataset)):
        _, target = dataset[index]
        expected = _visible_annotations(coco, target["image_id"])
        assert target["occluded"].dtype == torch.int64 and target["truncation"].dtype == torch.float32
        assert target["occluded"].tolist() == [a["id"] % 3 for a in expected]
        assert target["truncation"].tolist() == pytest.approx([a["id"] / 8 for a in expected])
        assert target["occluded"].shape == target["labels"].shape


def test_booleans_are_integers_and_an_image_without_boxes_has_empty_fields(fixtures, tmp_path):
    ann_file = _with_fields(fixtures, tmp_path, lambda a: {"occluded": a["id"] % 2 == 0})
    dataset = CocoDataset(fixtures / "detection/images", ann_file, extra_fields=["occluded"])
    targets = [dataset[index][1] for index in range(len(dataset))]
    assert all(t["occluded"].dtype == torch.int64 and set(t["occluded"].tolist()) <= {0, 1} for t in targets)
    empty = [t for t in targets if len(t["boxes"]) == 0]
    assert empty and all(t["occluded"].shape == (0,) for t in empty)


def test_extra_fields_follow_a_flip_unchanged_and_batch_through_two_spawned_workers(fixtures, tmp_path):
    ann_file = _with_fields(fixtures, tmp_path, _occluded)
    dataset = CocoDataset(fixtures / "detection/images", ann_file, transforms=v2.RandomHorizontalFlip(p=1.0),
                          extra_fields=("occluded",))
    plain = CocoDataset(fixtures / "detection/images", ann_file, extra_fields=("occluded",))
    loader = detection_loader(dataset, batch_size=3, train=False, num_workers=2, multiprocessing_context="spawn")
    batched = [target for _, targets in loader for target in targets]
    assert [t["occluded"].tolist() for t in batched] == [plain[i][1]["occluded"].tolist() for i in range(len(plain))]


@pytest.mark.parametrize("values, problem", [
    (lambda a: {} if a["id"] == 1018 else {"occluded": 1}, "'occluded' (extra_fields): no such field"),
    (lambda a: {"occluded": "yes" if a["id"] == 1018 else 0}, "'occluded' (extra_fields): 'yes', not a number"),
    (lambda a: {"occluded": None if a["id"] == 1018 else 0}, "'occluded' (extra_fields): None, not a number"),
])
def test_a_missing_or_non_numeric_value_names_the_field_and_the_annotation(fixtures, tmp_path, parser, values,
                                                                             problem):
    ann_file = _with_fields(fixtures, tmp_path, values)
    with pytest.raises(DataError, match=re.escape(f"instances.json, annotation 1018: {problem}")):
        CocoDataset(fixtures / "detection/images", ann_file, extra_fields=("occluded",))
    with pytest.warns(SkippedSampleWarning, match="annotation 1018: "):
        skipping = CocoDataset(fixtures / "detection/images", ann_file, extra_fields=("occluded",), on_error="skip")
    image_of_1018 = COCO(str(ann_file)).anns[1018]["image_id"]
    assert image_of_1018 not in skipping.image_ids.tolist() and len(skipping) == 9


@pytest.mark.parametrize("fields", ["occluded", ("boxes",), ("labels", "occluded"), (3,)])
def test_extra_fields_that_are_not_new_field_names_are_refused(fixtures, fields):
    with pytest.raises(ValueError, match="extra_fields"):
        CocoDataset(fixtures / "detection/images", fixtures / "detection/instances.json", extra_fields=fields)


def test_extend_target_gets_each_boxes_raw_annotation_in_box_order(fixtures, tmp_path, parser):
    ann_file = _with_fields(fixtures, tmp_path, _occluded)
    dataset = WithPose(fixtures / "detection/images", ann_file, include_crowd=True)
    coco = COCO(str(ann_file))
    for index in range(len(dataset)):
        _, target = dataset[index]
        expected = coco.imgToAnns[target["image_id"]]
        assert target["ann_ids"].tolist() == [a["id"] for a in expected]
        assert target["poses"] == ["left"] * len(expected) == ["left"] * len(target["boxes"])


def test_the_annotations_are_kept_only_for_an_extend_target_override(fixtures, tmp_path):
    ann_file = _with_fields(fixtures, tmp_path, _occluded)
    assert CocoDataset(fixtures / "detection/images", ann_file).index.annotations is None
    assert WithPose(fixtures / "detection/images", ann_file).index.annotations is not None


def test_an_overridden_extend_target_runs_in_spawned_workers(fixtures, tmp_path):
    images = tmp_path / "images"
    shutil.copytree(fixtures / "detection/images", images)
    dataset = WithPose(images, _with_fields(fixtures, tmp_path, _occluded))
    loader = detection_loader(dataset, batch_size=4, train=False, num_workers=2, multiprocessing_context="spawn")
    targets = [target for _, batch in loader for target in batch]
    assert [t["ann_ids"].tolist() for t in targets] == [dataset[i][1]["ann_ids"].tolist() for i in range(len(dataset))]
