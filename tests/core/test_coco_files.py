"""read_instances: the same columns from msgspec and the standard library, and clear errors."""

import json

import numpy as np
import pytest

from recipes.core import coco_files
from recipes.core.coco_files import read_instances
from recipes.core.errors import DataError

ARRAYS = ("image_ids", "widths", "heights", "ann_ids", "ann_image_ids", "ann_category_ids", "iscrowd", "bbox",
          "area", "category_ids")


@pytest.fixture()
def doc(fixtures):
    return json.loads((fixtures / "detection/instances.json").read_text())


def _read(tmp_path, doc, masks=False):
    path = tmp_path / "instances.json"
    path.write_text(json.dumps(doc))
    return read_instances(path, masks=masks)


def test_columns_follow_the_file_in_order(tmp_path, doc):
    columns = _read(tmp_path, doc)
    assert columns["image_ids"].tolist() == [image["id"] for image in doc["images"]]
    assert columns["file_names"] == [image["file_name"] for image in doc["images"]]
    assert columns["bbox"].tolist() == [a["bbox"] for a in doc["annotations"]]
    assert columns["iscrowd"].tolist() == [bool(a["iscrowd"]) for a in doc["annotations"]]
    assert columns["category_names"] == [c["name"] for c in doc["categories"]]
    assert columns["segments"] is None


def test_both_parsers_give_the_same_columns_and_segments(tmp_path, doc, monkeypatch):
    fast = _read(tmp_path, doc, masks=True)
    monkeypatch.setattr(coco_files, "msgspec", None)
    slow = _read(tmp_path, doc, masks=True)
    for name in ARRAYS:
        assert np.array_equal(fast[name], slow[name]), name
    assert [json.loads(s) for s in fast["segments"]] == [json.loads(s) for s in slow["segments"]]
    assert [json.loads(s) for s in fast["segments"]] == [a["segmentation"] for a in doc["annotations"]]


def test_python_style_nan_is_read_and_missing_optional_fields_get_defaults(tmp_path, doc):
    doc["annotations"][0]["bbox"][0] = float("nan")  # json.dumps writes NaN: not strict JSON
    del doc["annotations"][1]["area"], doc["annotations"][1]["iscrowd"]
    columns = _read(tmp_path, doc)
    assert np.isnan(columns["bbox"][0, 0]) and np.isnan(columns["area"][1]) and not columns["iscrowd"][1]


def test_a_file_without_annotations_gives_empty_columns(tmp_path, doc):
    del doc["annotations"]
    columns = _read(tmp_path, doc)
    assert columns["bbox"].shape == (0, 4) and columns["ann_ids"].shape == (0,)


@pytest.mark.parametrize("parser", ["msgspec", "stdlib"])
def test_a_wrong_type_or_missing_field_names_the_file(tmp_path, doc, monkeypatch, parser):
    if parser == "stdlib":
        monkeypatch.setattr(coco_files, "msgspec", None)
    elif coco_files.msgspec is None:
        pytest.skip("msgspec is not installed")
    del doc["annotations"][3]["image_id"]
    match = r"annotations\[3\]" if parser == "msgspec" else "lacks a field"
    with pytest.raises(DataError, match=rf"instances.json: .*{match}"):
        _read(tmp_path, doc)
    with pytest.raises(DataError, match="instances.json"):
        _read(tmp_path, {"annotations": []})


@pytest.mark.parametrize("collecting", [True, False])
def test_the_garbage_collector_is_left_as_it_was(tmp_path, doc, collecting):
    import gc

    (gc.enable if collecting else gc.disable)()
    try:
        _read(tmp_path, doc)
        with pytest.raises(DataError):
            _read(tmp_path, {"annotations": []})
        assert gc.isenabled() is collecting
    finally:
        gc.enable()
