"""CocoDataset: parity with the reference CocoDetection wrapper and pycocotools, item schema,
crowd and empty images, transforms, label mapping, and every load-time check."""

import contextlib
import io
import json
import os
import pickle
import shutil
import warnings

import numpy as np
import pytest
import torch
from PIL import Image
from pycocotools.coco import COCO
from torchvision import tv_tensors
from torchvision.datasets import CocoDetection, wrap_dataset_for_transforms_v2
from torchvision.transforms import v2
from torchvision.transforms.v2 import functional as F

import recipes.detection.coco_files as instances_module
from recipes.core.contracts.arrays import StringArray
from recipes.core.contracts.errors import DataError, SkippedSampleWarning
from recipes.detection import CocoDataset, DegenerateBoxWarning
from recipes.core.contracts.read_options import ReadOptions

EMPTY_IMAGE_ID, CROWD_ANNOTATIONS = 42, {1038, 1073}
# The references decode masks with pycocotools, which warns on numpy 2 about its own __array__
# (CocoDataset silences exactly this at its call site: recipes.detection.coco_files.decode_masks).
PYCOCOTOOLS_ON_NUMPY2 = r"ignore:__array__ implementation doesn't accept a copy keyword:DeprecationWarning:pycocotools\.mask"


@pytest.fixture(scope="module")
def coco(fixtures):
    return fixtures / "detection/images", fixtures / "detection/instances.json"


@pytest.fixture(scope="module")
def reference(coco):
    keys = {"image_id", "boxes", "labels", "masks", "area", "iscrowd"}
    with contextlib.redirect_stdout(io.StringIO()):
        return wrap_dataset_for_transforms_v2(CocoDetection(*map(str, coco)), target_keys=keys)


@pytest.fixture(scope="module")
def pycoco(coco):
    with contextlib.redirect_stdout(io.StringIO()):
        return COCO(str(coco[1]))


def _instances(coco):
    return json.loads(coco[1].read_text())


def _write(tmp_path, doc, name="instances.json"):
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return path


# -- parity with the reference wrapper and pycocotools ------------------------------------------


@pytest.mark.filterwarnings(PYCOCOTOOLS_ON_NUMPY2)
@pytest.mark.parametrize("include_crowd", [False, True], ids=["no-crowd", "with-crowd"])
def test_items_match_the_reference_wrapper_on_every_fixture_image(coco, reference, include_crowd):
    dataset = CocoDataset(*coco, masks=True, include_crowd=include_crowd)
    assert len(dataset) == len(reference) == 10
    for index in range(len(dataset)):
        image, target = dataset[index]
        expected_image, expected = reference[index]
        assert torch.equal(image, F.pil_to_tensor(expected_image))
        assert target["image_id"] == expected["image_id"]
        if "boxes" not in expected:  # the reference drops every key but image_id here
            assert target["image_id"] == EMPTY_IMAGE_ID and target["boxes"].shape == (0, 4)
            continue
        keep = torch.tensor(expected["iscrowd"]) == 0 if not include_crowd else slice(None)
        assert torch.equal(target["boxes"], expected["boxes"][keep])  # bit-identical float32
        assert target["boxes"].canvas_size == expected["boxes"].canvas_size
        assert torch.equal(target["labels"], expected["labels"][keep])
        assert torch.equal(target["masks"], expected["masks"][keep])
        assert torch.equal(target["area"], torch.tensor(expected["area"], dtype=torch.float32)[keep])
        assert torch.equal(target["iscrowd"], torch.tensor(expected["iscrowd"])[keep])


@pytest.mark.filterwarnings(PYCOCOTOOLS_ON_NUMPY2)
def test_masks_equal_pycocotools_ann_to_mask_for_polygons_and_both_rle_kinds(coco, pycoco):
    dataset = CocoDataset(*coco, masks=True, include_crowd=True)
    kinds = set()
    for index in range(len(dataset)):
        _, target = dataset[index]
        annotations = pycoco.loadAnns(pycoco.getAnnIds(imgIds=target["image_id"]))
        kinds |= {
            type(a["segmentation"]).__name__ + type(a["segmentation"].get("counts", "")).__name__
            if isinstance(a["segmentation"], dict)
            else "polygon"
            for a in annotations
        }
        expected = [pycoco.annToMask(a) for a in annotations]
        assert len(expected) == len(target["masks"])
        for mask, reference_mask in zip(target["masks"], expected):
            assert torch.equal(mask, torch.from_numpy(reference_mask))
    assert kinds == {"polygon", "dictlist", "dictstr"}  # uncompressed and compressed RLE both covered


def test_images_are_in_id_order_with_sizes_from_the_file(coco):
    dataset = CocoDataset(*coco)
    doc = _instances(coco)
    by_id = {image["id"]: image for image in doc["images"]}
    assert dataset.image_ids.tolist() == sorted(by_id)
    assert dataset.index.widths.tolist() == [by_id[i]["width"] for i in sorted(by_id)]
    assert list(dataset.index.file_names) == [by_id[i]["file_name"] for i in sorted(by_id)]
    assert np.allclose(dataset.aspect_ratios, dataset.index.widths / dataset.index.heights)
    assert dataset[-1][1]["image_id"] == dataset.image_ids[-1]
    with pytest.raises(IndexError):
        dataset[len(dataset)]


# -- item schema, crowd, empty images, transforms, labels --------------------------------------


def test_item_schema_types_and_dtypes(coco):
    image, target = CocoDataset(*coco, masks=True)[0]
    assert type(image) is tv_tensors.Image and image.dtype == torch.uint8 and image.shape == (3, 64, 96)
    assert list(target) == ["image_id", "boxes", "labels", "area", "iscrowd", "masks"]
    assert type(target["image_id"]) is int
    boxes = target["boxes"]
    assert isinstance(boxes, tv_tensors.BoundingBoxes) and boxes.dtype == torch.float32
    assert boxes.format == tv_tensors.BoundingBoxFormat.XYXY and boxes.canvas_size == (64, 96)
    assert target["labels"].dtype == torch.int64 and target["area"].dtype == torch.float32
    assert target["iscrowd"].dtype == torch.int64
    assert isinstance(target["masks"], tv_tensors.Mask) and target["masks"].shape == (3, 64, 96)


def test_an_image_without_boxes_keeps_the_full_schema(coco):
    dataset = CocoDataset(*coco, masks=True)
    index = dataset.image_ids.tolist().index(EMPTY_IMAGE_ID)
    _, target = dataset[index]
    full = dataset[0][1]
    assert list(target) == list(full)
    assert target["boxes"].shape == (0, 4) and target["boxes"].canvas_size == (96, 64)
    assert target["labels"].shape == (0,) and target["labels"].dtype == torch.int64
    assert target["area"].shape == (0,) and target["iscrowd"].shape == (0,)
    assert target["masks"].shape == (0, 96, 64) and target["masks"].dtype == torch.uint8


def test_crowd_regions_are_left_out_unless_asked_for(coco, pycoco):
    plain, crowded = CocoDataset(*coco), CocoDataset(*coco, include_crowd=True)
    for index, image_id in enumerate(plain.image_ids.tolist()):
        annotations = pycoco.loadAnns(pycoco.getAnnIds(imgIds=image_id))
        assert len(plain[index][1]["boxes"]) == sum(a["iscrowd"] == 0 for a in annotations)
        assert crowded[index][1]["iscrowd"].tolist() == [a["iscrowd"] for a in annotations]
    assert set(crowded.index.ann_ids.tolist()) >= CROWD_ANNOTATIONS  # kept in the index for evaluation
    assert set(plain.index.ann_ids.tolist()) >= CROWD_ANNOTATIONS


def test_remove_empty_drops_only_the_image_without_boxes(coco):
    dataset = CocoDataset(*coco, remove_empty=True)
    assert len(dataset) == 9 and EMPTY_IMAGE_ID not in dataset.image_ids.tolist()


def test_a_horizontal_flip_moves_boxes_and_masks_as_computed_by_hand(coco):
    plain = CocoDataset(*coco, masks=True)
    flipped = CocoDataset(*coco, transforms=v2.RandomHorizontalFlip(p=1.0), masks=True)
    for index in range(len(plain)):
        (image, target), (image_f, target_f) = plain[index], flipped[index]
        width = image.shape[-1]
        x1, y1, x2, y2 = target["boxes"].unbind(-1)
        expected = torch.stack([width - x2, y1, width - x1, y2], dim=-1)
        assert torch.equal(image_f, image.flip(-1))
        torch.testing.assert_close(target_f["boxes"].as_subclass(torch.Tensor), expected, rtol=0, atol=1e-5)
        assert torch.equal(target_f["masks"], target["masks"].flip(-1))
        assert torch.equal(target_f["labels"], target["labels"]) and target_f["image_id"] == target["image_id"]


def test_contiguous_labels_map_both_ways(coco):
    dataset = CocoDataset(*coco, contiguous_labels=True)
    assert dataset.categories == {1: "person", 3: "car", 7: "dog", 12: "cup", 18: "kite"}
    assert dataset.category_to_label == {1: 1, 3: 2, 7: 3, 12: 4, 18: 5}
    assert dataset.label_to_category == {1: 1, 2: 3, 3: 7, 4: 12, 5: 18}
    coco_ids = CocoDataset(*coco)
    for index in range(len(dataset)):
        labels, categories = dataset[index][1]["labels"].tolist(), coco_ids[index][1]["labels"].tolist()
        assert [dataset.label_to_category[label] for label in labels] == categories
        assert all(1 <= label <= 5 for label in labels)


def test_missing_area_falls_back_to_the_box_area(coco, tmp_path):
    doc = _instances(coco)
    first = doc["annotations"][0]
    del first["area"]
    dataset = CocoDataset(coco[0], _write(tmp_path, doc))
    row = dataset.index.ann_ids.tolist().index(first["id"])
    assert dataset.index.areas[row] == np.float32(first["bbox"][2] * first["bbox"][3])


# -- the index holds no per-annotation Python objects -------------------------------------------


def test_the_index_is_flat_arrays_not_python_objects_per_annotation(coco):
    dataset = CocoDataset(*coco, masks=True)
    for name, value in [*vars(dataset).items(), *vars(dataset.index).items()]:
        if name == "index":
            continue
        if isinstance(value, (list, tuple, set, dict)):
            assert len(value) <= len(dataset.categories), name  # only the category tables
        else:
            assert isinstance(value, (np.ndarray, StringArray, os.PathLike, str, bool, type(None))), name
    clone = pickle.loads(pickle.dumps(dataset))
    assert torch.equal(clone[3][1]["masks"], dataset[3][1]["masks"])


def test_the_standard_library_fallback_builds_the_same_index(coco, monkeypatch):
    fast = CocoDataset(*coco, masks=True, include_crowd=True)
    monkeypatch.setattr(instances_module, "msgspec", None)
    slow = CocoDataset(*coco, masks=True, include_crowd=True)
    for name in (
        "image_ids",
        "widths",
        "heights",
        "ann_ids",
        "ann_offsets",
        "boxes",
        "category_ids",
        "areas",
        "iscrowd",
    ):
        assert np.array_equal(getattr(fast.index, name), getattr(slow.index, name)), name
    for index in range(len(fast)):
        assert torch.equal(fast[index][1]["masks"], slow[index][1]["masks"])


# -- the hostile fixtures ------------------------------------------------------------------------


def test_hostile_escape_is_refused_at_load_naming_the_image(fixtures):
    root = fixtures / "hostile/coco"
    with pytest.raises(DataError, match=r"escape.json, image 2: path '\.\./escape\.jpg' escapes"):
        CocoDataset(root / "images", root / "escape.json")


def test_hostile_escape_under_skip_drops_that_image_with_a_warning(fixtures):
    root = fixtures / "hostile/coco"
    with pytest.warns(SkippedSampleWarning, match="image 2"):
        dataset = CocoDataset(root / "images", root / "escape.json", on_error="skip")
    assert dataset.image_ids.tolist() == [1] and dataset.index.ann_ids.tolist() == [1, 2]


def test_hostile_unknown_category_names_the_annotation(fixtures):
    root = fixtures / "hostile/coco"
    with pytest.raises(DataError, match=r"unknown_category.json, annotation 2: category_id 99 is not in 'categories'"):
        CocoDataset(root / "images", root / "unknown_category.json")


def test_hostile_negative_box_is_dropped_with_one_counting_warning(fixtures):
    root = fixtures / "hostile/coco"
    with pytest.warns(DegenerateBoxWarning) as caught:
        dataset = CocoDataset(root / "images", root / "negative_box.json")
    assert len(caught) == 1
    assert "negative_box.json: dropped 1 annotation(s)" in str(caught[0].message)
    assert "(ids 3)" in str(caught[0].message)
    assert dataset.index.ann_ids.tolist() == [1, 2] and dataset[1][1]["boxes"].shape == (0, 4)


def test_hostile_negative_box_raises_under_strict(fixtures):
    root = fixtures / "hostile/coco"
    with pytest.raises(DataError, match=r"negative_box.json, annotation 3: bbox \[35.0, 20.0, -30.0, 25.0\] has a non-positive width"):
        CocoDataset(root / "images", root / "negative_box.json", read_options=ReadOptions(strict_annotations=True))


# -- the other load-time checks ------------------------------------------------------------------


def _edit(doc, case):
    images, annotations = doc["images"], doc["annotations"]
    if case == "duplicate-image":
        images.append(dict(images[1]))
        return r"image 7: the id appears more than once in 'images'"
    if case == "duplicate-annotation":
        annotations.append(dict(annotations[4], image_id=3))
        return rf"annotation {annotations[4]['id']}: the id appears more than once in 'annotations'"
    if case == "missing-image":
        annotations[2]["image_id"] = 12345
        return rf"annotation {annotations[2]['id']}: image_id 12345 is not in 'images'"
    if case == "zero-width-image":
        images[0]["width"] = 0
        return r"image 3: width 0 and height 64 must be positive whole numbers"
    if case == "three-number-bbox":
        annotations[0]["bbox"] = [1, 2, 3]
        return rf"annotation {annotations[0]['id']}: bbox \[1, 2, 3\] is not 4 numbers \[x, y, width, height\]"
    if case == "string-id":
        annotations[0]["id"] = "one"
        return r"annotations\[0\]: 'id' must be an integer, got 'one'"
    if case == "no-file-name":
        del images[1]["file_name"]
        return r"image 7: no 'file_name'"
    if case == "id-past-int64":
        images[1]["id"] = 2**63
        return rf"images\[1\]: 'id' {2**63} does not fit in 64 bits"
    if case == "duplicate-category":
        doc["categories"].append(dict(doc["categories"][0]))
        return r"category 1: the id appears more than once in 'categories'"
    raise AssertionError(case)


CASES = [
    "duplicate-image",
    "duplicate-annotation",
    "missing-image",
    "zero-width-image",
    "three-number-bbox",
    "string-id",
    "no-file-name",
    "id-past-int64",
    "duplicate-category",
]


@pytest.mark.parametrize("parser", ["msgspec", "stdlib"])
@pytest.mark.parametrize("case", CASES)
def test_a_broken_annotation_file_raises_naming_the_entry(coco, tmp_path, monkeypatch, case, parser):
    if parser == "msgspec" and instances_module.msgspec is None:
        pytest.skip("msgspec is not installed")
    doc = _instances(coco)
    pattern = _edit(doc, case)
    if parser == "stdlib":
        monkeypatch.setattr(instances_module, "msgspec", None)
    with pytest.raises(DataError, match=rf"instances\.json, {pattern}"):  # the same words from either parser
        CocoDataset(coco[0], _write(tmp_path, doc))


def test_not_json_is_a_data_error_naming_the_file(coco, tmp_path):
    path = tmp_path / "broken.json"
    path.write_text('{"images": [')
    with pytest.raises(DataError, match="broken.json: not valid JSON"):
        CocoDataset(coco[0], path)


def test_nan_and_zero_size_boxes_are_dropped_even_in_python_style_json(coco, tmp_path):
    doc = _instances(coco)
    doc["annotations"][0]["bbox"][2] = float("nan")  # json.dumps writes NaN, which strict JSON forbids
    doc["annotations"][1]["bbox"][3] = 0.0
    bad = [doc["annotations"][0]["id"], doc["annotations"][1]["id"]]
    with pytest.warns(DegenerateBoxWarning, match=rf"dropped 2 annotation\(s\).*ids {bad[0]}, {bad[1]}"):
        dataset = CocoDataset(coco[0], _write(tmp_path, doc))
    assert not set(bad) & set(dataset.index.ann_ids.tolist())


def test_a_misspelled_annotations_key_raises_naming_the_file_and_the_near_miss(coco, tmp_path):
    doc = _instances(coco)
    doc["annotation"] = doc.pop("annotations")  # loading it would give a dataset without a box
    with pytest.raises(DataError, match=r"instances.json: no 'annotations' key .*did you mean 'annotation'\?"):
        CocoDataset(coco[0], _write(tmp_path, doc))


def test_a_test_dev_image_info_file_loads_with_empty_targets(coco, tmp_path):
    doc = _instances(coco)
    del doc["annotations"]  # COCO's image_info_test-dev2017.json: info, licenses, images, categories
    dataset = CocoDataset(coco[0], _write(tmp_path, doc, "image_info_test-dev.json"), masks=True)
    assert len(dataset) == 10 and dataset.categories == CocoDataset(*coco).categories
    for index in range(len(dataset)):
        image, target = dataset[index]
        assert target["boxes"].shape == (0, 4) and target["boxes"].canvas_size == tuple(image.shape[-2:])
        assert target["labels"].shape == (0,) and target["masks"].shape == (0, *image.shape[-2:])


def test_a_category_without_a_name_raises_naming_its_id(coco, tmp_path):
    doc = _instances(coco)
    del doc["categories"][1]["name"]
    with pytest.raises(DataError, match=rf"instances.json, category {doc['categories'][1]['id']}: no 'name'$"):
        CocoDataset(coco[0], _write(tmp_path, doc))


def test_missing_image_root_is_reported(coco, tmp_path):
    with pytest.raises(FileNotFoundError, match="nowhere"):
        CocoDataset(tmp_path / "nowhere", coco[1])


# -- problems found when an image is opened ------------------------------------------------------


def _one_image_file(tmp_path, name, width, height, file_name=None):
    doc = {
        "images": [{"id": 1, "file_name": file_name or name, "width": width, "height": height}],
        "annotations": [{"id": 1, "image_id": 1, "category_id": 1, "bbox": [1, 1, 5, 5], "area": 25, "iscrowd": 0}],
        "categories": [{"id": 1, "name": "thing"}],
    }
    return _write(tmp_path, doc)


def test_a_symlink_out_of_the_root_is_refused_when_opened(coco, tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    (root / "link.jpg").symlink_to(coco[0] / "000000000003.jpg")
    dataset = CocoDataset(root, _one_image_file(tmp_path, "link.jpg", 96, 64))
    with pytest.raises(DataError, match="outside the root"):
        dataset[0]
    (root / "sub").symlink_to(coco[0], target_is_directory=True)
    with pytest.raises(DataError, match="outside the root"):
        CocoDataset(root, _one_image_file(tmp_path, "x", 96, 64, file_name="sub/000000000003.jpg"))[0]


def test_a_symlink_inside_the_root_is_followed(coco, tmp_path):
    root = tmp_path / "root"
    shutil.copytree(coco[0], root / "real")
    (root / "alias").symlink_to(root / "real", target_is_directory=True)
    image, _ = CocoDataset(root, _one_image_file(tmp_path, "x", 96, 64, file_name="alias/000000000003.jpg"))[0]
    assert image.shape == (3, 64, 96)


def test_a_size_that_disagrees_with_the_file_raises_naming_both(coco, tmp_path):
    doc = _instances(coco)
    doc["images"][0]["width"] = 97
    dataset = CocoDataset(coco[0], _write(tmp_path, doc))
    with pytest.raises(DataError, match=r"000000000003.jpg: decoded image is 96x64 .* image 3 as 97x64"):
        dataset[0]
    skipping = CocoDataset(coco[0], _write(tmp_path, doc), on_error="skip")
    with pytest.warns(SkippedSampleWarning, match="000000000003.jpg"):
        assert skipping[0] is None


def test_annotations_drawn_on_the_stored_pixels_of_an_exif_rotated_photo_are_reported(tmp_path):
    root = tmp_path / "images"
    root.mkdir()
    exif = Image.Exif()
    exif[0x0112] = 6  # stored 40x30, shown upright as 30x40
    Image.new("RGB", (40, 30), (200, 10, 10)).save(root / "phone.jpg", exif=exif.tobytes())
    with pytest.raises(DataError, match="EXIF orientation"):
        CocoDataset(root, _one_image_file(tmp_path, "phone.jpg", 40, 30))[0]
    image, target = CocoDataset(root, _one_image_file(tmp_path, "phone.jpg", 30, 40))[0]
    assert image.shape == (3, 40, 30) and target["boxes"].canvas_size == (40, 30)


@pytest.mark.parametrize("bad", ["truncated.jpg", "empty.jpg", "not_an_image.jpg", "bomb.png", "missing.jpg"])
def test_an_unusable_image_raises_or_is_skipped_naming_the_file(fixtures, tmp_path, bad):
    root = tmp_path / "images"
    root.mkdir()
    if bad != "missing.jpg":
        shutil.copy(fixtures / "hostile/images" / bad, root / bad)
    ann_file = _one_image_file(tmp_path, bad, 96, 64)
    with pytest.raises(DataError, match=bad):
        CocoDataset(root, ann_file)[0]
    with pytest.warns(SkippedSampleWarning, match=bad):
        assert CocoDataset(root, ann_file, on_error="skip")[0] is None


def test_unknown_on_error_lists_the_choices(coco):
    with pytest.raises(ValueError, match="raise"):
        CocoDataset(*coco, on_error="ignore")


def test_no_warning_for_a_clean_file(coco):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        CocoDataset(*coco)
