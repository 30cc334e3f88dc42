"""read_instances: the same columns from msgspec and the standard library, and clear errors."""

import json
import warnings

import numpy as np
import pytest

from recipes.core.contracts.errors import DataError
from recipes.detection import coco_files
from recipes.detection.coco_files import read_instances

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
    with pytest.raises(DataError, match=rf"instances.json, annotation {doc['annotations'][3]['id']}: no 'image_id'$"):
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


def _with_parser(monkeypatch, parser):
    if parser == "stdlib":
        monkeypatch.setattr(coco_files, "msgspec", None)
    elif coco_files.msgspec is None:
        pytest.skip("msgspec is not installed")


@pytest.mark.parametrize("parser", ["msgspec", "stdlib"])
@pytest.mark.parametrize("key, typo", [("annotations", "annotation"), ("categories", "category"), ("images", "Images")])
def test_a_misspelled_top_level_key_names_the_file_and_the_near_miss(tmp_path, doc, monkeypatch, parser, key, typo):
    _with_parser(monkeypatch, parser)
    doc[typo] = doc.pop(key)
    with pytest.raises(DataError, match=rf"instances.json: no '{key}' key at the top level; did you mean '{typo}'\?"):
        _read(tmp_path, doc)


@pytest.mark.parametrize("parser", ["msgspec", "stdlib"])
def test_an_image_info_file_without_annotations_reads_with_no_boxes(tmp_path, doc, monkeypatch, parser):
    _with_parser(monkeypatch, parser)
    # the shape of COCO's image_info_test-dev2017.json: no annotations key, nothing close to it
    info = {key: doc[key] for key in ("info", "licenses", "images", "categories")}
    columns = _read(tmp_path, info, masks=True)
    assert columns["image_ids"].tolist() == [image["id"] for image in doc["images"]]
    assert columns["bbox"].shape == (0, 4) and columns["segments"] == []


@pytest.mark.parametrize("parser", ["msgspec", "stdlib"])
def test_a_missing_key_beside_a_key_that_is_not_utf8_names_the_file(tmp_path, monkeypatch, parser):
    # found by tests/detection/test_fuzz.py: the schema skips unknown keys unread, so only the
    # second look, for the missing key's name, met the bad bytes
    _with_parser(monkeypatch, parser)
    path = tmp_path / "instances.json"
    path.write_bytes(b'{"\xff\xfeannotations": [], "images": [], "categories": []}')
    with pytest.raises(DataError, match="instances.json: "):
        coco_files.read_instances(path, masks=False)


@pytest.mark.parametrize("parser", ["msgspec", "stdlib"])
def test_a_category_without_a_name_names_its_id(tmp_path, doc, monkeypatch, parser):
    _with_parser(monkeypatch, parser)
    del doc["categories"][2]["name"]
    with pytest.raises(DataError, match=rf"instances.json, category {doc['categories'][2]['id']}: no 'name'$"):
        _read(tmp_path, doc)


def test_masks_decode_without_a_warning_and_a_bad_segment_names_its_annotation():
    polygon, rle = json.dumps([[1, 1, 6, 1, 6, 4, 1, 4]]).encode(), json.dumps({"size": [5, 8], "counts": [6, 3, 31]}).encode()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # pycocotools' own numpy-2 warning included
        masks = coco_files.decode_masks([polygon, rle], 5, 8, source="x.json", ann_ids=[1, 2])
    assert masks.shape == (2, 5, 8) and masks.dtype == np.uint8 and masks.flags.c_contiguous
    assert masks[0, 2, 3] == 1 and masks[0, 0, 0] == 0 and masks[1].sum() == 3
    assert coco_files.decode_masks([], 5, 8, source="x.json", ann_ids=[]).shape == (0, 5, 8)
    with pytest.raises(DataError, match=r"x.json, annotation 9: segmentation must be polygons or an RLE of size \[5, 8\]"):
        coco_files.decode_masks([b'{"size": [4, 4], "counts": [16]}'], 5, 8, source="x.json", ann_ids=[9])
    with pytest.raises(DataError, match=r"x.json, annotation 3: RLE counts sum to 9, not 5x8 = 40"):
        coco_files.decode_masks([b'{"size": [5, 8], "counts": [6, 3]}'], 5, 8, source="x.json", ann_ids=[3])


@pytest.mark.parametrize(
    "segment, reason",
    [
        ([[None, 1, 6, 1, 6, 4]], "a polygon must be a list of numbers"),  # pycocotools: gigabytes
        ([[1, 1, 6, 1, True, 4]], "a polygon must be a list of numbers"),
        ([[1, 1, 6e30, 1, 6, 4]], r"polygon point \(6e\+30, 1\) lies far outside the 8x5 image"),
        ([[1, 1, float("nan"), 1, 6, 4]], r"polygon point \(nan, 1\) lies far outside"),
        ({"size": [5, 8], "counts": "x"}, "RLE counts are not a list of runs or a COCO run string"),  # garbage pixels
        ({"size": [5, 8], "counts": ""}, "RLE counts sum to 0, not 5x8 = 40"),
        ({"size": [5, 8], "counts": [50, -10]}, "RLE counts are not a list of runs"),  # a write past the mask
    ],
    ids=range(7),
)
def test_a_segment_pycocotools_would_mis_draw_is_refused_by_name(segment, reason):
    raw = json.dumps(segment).encode()
    with pytest.raises(DataError, match=rf"x.json, annotation 4: {reason}"):
        coco_files.decode_masks([raw], 5, 8, source="x.json", ann_ids=[4])


def test_compressed_runs_read_back_what_pycocotools_wrote():
    from pycocotools import mask as coco_mask

    from recipes.detection.fixtures import rle_counts

    rng = np.random.default_rng(0)
    for _ in range(100):
        height, width = rng.integers(1, 60, 2)
        mask = np.asfortranarray((rng.random((height, width)) < rng.random()).astype(np.uint8))
        encoded = coco_mask.encode(mask)["counts"].decode()
        assert coco_files._compressed_runs(encoded) == rle_counts(mask)
        decoded = coco_files.decode_masks([json.dumps({"size": [int(height), int(width)], "counts": encoded}).encode()],
                                          int(height), int(width), source="x.json", ann_ids=[1])
        assert np.array_equal(decoded[0], mask)
