"""coco_checks: one set of rules, each problem named once with its entry and what skipping drops;
the dataset raises the first (either parser), and a valid file reads the same through both."""

import json
import math
from unittest import mock

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from recipes.core.contracts.errors import DataError, SkippedSampleWarning
from recipes.detection import CocoDataset, DegenerateBoxWarning, coco_files
from recipes.detection.coco_checks import (
    SECTIONS,
    ColumnChecks,
    Problem,
    entry_fields,
    entry_problems,
    wrong_fields,
)
from recipes.detection.coco_files import columns_of, read_instances
from tests.core.mutations import fuzz_settings, mutated_json, serialized


@pytest.fixture()
def doc(fixtures):
    return json.loads((fixtures / "detection/instances.json").read_text())


def _all_problems(doc):
    """What ``recipes check`` lists from the rules, for a file whose entries are all usable."""
    problems = list(entry_problems(doc))
    columns = columns_of(doc, masks=False)
    return problems if columns is None else problems + list(ColumnChecks(columns).problems())


def test_a_problem_is_worded_the_same_as_an_error_with_or_without_its_entry():
    problem = Problem("annotation 7", "image_id 3 is not in 'images'", "annotations", 2, drops="annotation")
    assert str(problem.error("a.json")) == "a.json, annotation 7: image_id 3 is not in 'images'"
    assert str(Problem("", "not valid JSON").error("a.json")) == "a.json: not valid JSON"
    error = problem.error("a.json", hint="fix it")
    assert error.reason == "a.json, annotation 7: image_id 3 is not in 'images'" and str(error).endswith(", fix it")


def test_an_entry_is_named_by_its_id_or_else_by_its_place_with_each_wrong_field(doc):
    images, annotations, categories = doc["images"], doc["annotations"], doc["categories"]
    del images[0]["file_name"]
    images[0]["height"] = "64"
    images[1]["id"] = True
    annotations[0] = "box"
    annotations[1]["bbox"] = [1, 2, 3, None]
    annotations[2]["iscrowd"] = None
    annotations[3]["area"] = "big"
    del annotations[4]["id"]
    categories[0]["name"] = 5
    found = [(p.where, p.message, p.section, p.row) for p in entry_problems(doc)]
    assert found == [
        (f"image {images[0]['id']}", "no 'file_name'", "images", 0),
        (f"image {images[0]['id']}", "'height' must be a number, got '64'", "images", 0),
        ("images[1]", "'id' must be an integer, got True", "images", 1),
        ("annotations[0]", "an entry must be an object, got 'box'", "annotations", 0),
        (f"annotation {annotations[1]['id']}", "bbox [1, 2, 3, None] is not 4 numbers [x, y, width, height]",
         "annotations", 1),
        (f"annotation {annotations[2]['id']}", "'iscrowd' must be an integer, got None", "annotations", 2),
        (f"annotation {annotations[3]['id']}", "'area' must be a number or null, got 'big'", "annotations", 3),
        ("annotations[4]", found[7][1], "annotations", 4),
        (f"category {categories[0]['id']}", "'name' must be a string, got 5", "categories", 0),
    ]
    assert found[7][1].startswith("no 'id': {")
    assert wrong_fields("images", images[0]) == ["file_name", "height"] and wrong_fields("annotations", "box") == ["id"]


def test_the_column_rules_come_one_after_another_and_say_what_skipping_drops(doc):
    images, annotations = doc["images"], doc["annotations"]
    doc["categories"].append(dict(doc["categories"][0]))
    images[2]["width"] = 12.5
    images[3]["file_name"] = "../up.jpg"
    images[4]["file_name"] = ""
    annotations[1]["category_id"] = 999
    annotations[2]["image_id"] = 12345
    annotations[3]["bbox"][3] = 0
    annotations[4]["bbox"][0] = math.nan
    annotations[5]["id"] = annotations[6]["id"]
    found = [(p.where, p.drops) for p in _all_problems(doc)]
    assert found == [
        (f"category {doc['categories'][0]['id']}", ""),
        (f"image {images[2]['id']}", ""),
        (f"image {images[3]['id']}", "image"),
        (f"image {images[4]['id']}", "image"),
        (f"annotation {annotations[5]['id']}", ""),
        (f"annotation {annotations[2]['id']}", "annotation"),
        (f"annotation {annotations[1]['id']}", "image"),
        (f"annotation {annotations[3]['id']}", "box"),
        (f"annotation {annotations[4]['id']}", "box"),
    ]
    messages = [p.message for p in _all_problems(doc)]
    assert messages[1] == "width 12.5 and height 64 must be positive whole numbers"
    assert messages[3] == "'file_name' is empty" and "escapes the dataset root" in messages[2]
    assert messages[7].startswith(f"bbox {[float(v) for v in annotations[3]['bbox']]} has a non-positive width")
    assert "holds NaN or infinity" in messages[8]


@pytest.mark.parametrize("parser", ["msgspec", "stdlib"])
def test_the_dataset_raises_the_first_problem_and_skipping_warns_the_droppable_ones(doc, tmp_path, fixtures, parser):
    annotations = doc["annotations"]
    doc["images"][3]["file_name"] = "/abs.jpg"
    annotations[1]["category_id"] = 999
    annotations[2]["image_id"] = 12345
    annotations[2]["category_id"] = 999  # an annotation of no image: named once, left out
    annotations[3]["bbox"][2] = -1
    path = tmp_path / "instances.json"
    path.write_text(json.dumps(doc))
    problems = _all_problems(doc)
    root = fixtures / "detection/images"
    with mock.patch.object(coco_files, "msgspec", coco_files.msgspec if parser == "msgspec" else None):
        with pytest.raises(DataError) as raised:
            CocoDataset(root, path)
        assert str(raised.value) == str(problems[0].error(path))
        with pytest.warns((SkippedSampleWarning, DegenerateBoxWarning)) as caught:
            dataset = CocoDataset(root, path, on_error="skip")
    skipped = [str(w.message) for w in caught if w.category is SkippedSampleWarning]
    orphan = f"annotation {annotations[2]['id']}"
    expected = [p for p in problems if p.drops == "annotation" or p.drops == "image" and p.where != orphan]
    assert skipped == [f"skipped: {p.error(path)}" for p in expected]
    (degenerate,) = [str(w.message) for w in caught if w.category is DegenerateBoxWarning]
    assert degenerate.endswith(f"(ids {annotations[3]['id']})")
    kept = set(dataset.image_ids.tolist())
    assert doc["images"][3]["id"] not in kept and annotations[1]["image_id"] not in kept


def _parsed(raw):
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        return None


@fuzz_settings(150)
@given(data=st.data())
def test_the_whole_list_screen_passes_exactly_the_sections_the_walk_finds_nothing_in(fixtures, data):
    doc = _parsed(serialized(data, mutated_json(data, json.loads((fixtures / "detection/instances.json").read_text()))))
    if not isinstance(doc, dict):
        return
    for section in SECTIONS:
        entries = doc.get(section, [])
        if isinstance(entries, list):
            wrong = [wrong_fields(section, entry) for entry in entries]  # the walk's verdict, entry by entry
            assert (entry_fields(section, entries) is None) == any(wrong), (section, wrong)


@fuzz_settings(100)
@given(data=st.data(), masks=st.booleans())
def test_both_parsers_read_a_file_the_same_or_refuse_it_in_the_same_words(fixtures, tmp_path_factory, data, masks):
    path = tmp_path_factory.mktemp("both") / "instances.json"
    path.write_bytes(serialized(data, mutated_json(data, json.loads((fixtures / "detection/instances.json").read_text()))))
    outcomes = []
    for parser in (coco_files.msgspec, None):
        with mock.patch.object(coco_files, "msgspec", parser):
            try:
                outcomes.append(read_instances(path, masks=masks))
            except DataError as error:
                outcomes.append(str(error))
    fast, slow = outcomes
    if isinstance(fast, str) or isinstance(slow, str):
        if "not valid JSON" in str(slow) and "not valid JSON" not in str(fast):
            # bytes the standard library cannot read (not UTF-8, an integer over Python's 4300 digits) in a
            # key the schema skips unread: only it sees them, and msgspec reads on (or refuses the file later)
            return
        assert fast == slow
        return
    for name, column in fast.items():
        if isinstance(column, np.ndarray):
            assert np.array_equal(column, slow[name], equal_nan=column.dtype.kind == "f"), name
        elif name == "segments" and column is not None:
            assert [json.loads(s) for s in column] == [json.loads(s) for s in slow[name]]
        else:
            assert column == slow[name], name
