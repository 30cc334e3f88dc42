"""CocoDataset and detection_loader on a COCO file where every kind of thing is wrong at once.

Under ``on_error="skip"`` an epoch yields exactly the good images, with every box they should
have, and one warning names each bad image or annotation; under ``"raise"`` each problem is a
DataError naming the file and the image or annotation id, from a worker process too.
(test_coco.py checks each hostile fixture on its own.)
"""

import json
import os
import shutil

import numpy as np
import pytest
from PIL import Image

from recipes.core.contracts.errors import DataError, SkippedSampleWarning
from recipes.detection import CocoDataset, DegenerateBoxWarning, detection_loader
from recipes.core.contracts.read_options import ReadOptions
from tests.core.hostile import (
    BAD_IMAGES,
    assert_one_warning_each,
    peak_rss_growth_mb,
    recording,
    sixteen_bit_rgb,
    top_byte_chw,
    worker_error,
    write_png16,
)
from tests.photos import jpeg_bytes, overwrite_scan_data, photo

SIZE = (12, 10)  # width, height of every good image
GOOD_IDS = [1, 2, 3, 4]
# image id -> (file_name, the words its skip warning must contain)
BAD_FILES = {
    11: ("truncated.jpg", BAD_IMAGES["truncated.jpg"]),
    12: ("empty.jpg", BAD_IMAGES["empty.jpg"]),
    13: ("not_an_image.jpg", BAD_IMAGES["not_an_image.jpg"]),
    14: ("bomb.png", BAD_IMAGES["bomb.png"]),
    15: ("missing.jpg", "cannot read file"),
    16: ("link.jpg", "outside the root"),  # a symlink to a file outside the image root
}
BAD_NAMES = {21: ("../outside.jpg", "escapes the dataset root"), 22: ("/etc/hostname", "is absolute")}
UNKNOWN_CATEGORY_IMAGE, UNKNOWN_CATEGORY_ANN, ORPHAN_ANN, NEGATIVE_ANN, NAN_ANN = 5, 105, 199, 103, 104


def hostile_coco(folder):
    """Images 1-4 good (4 is a 16-bit PNG); everything else is broken in one way."""
    root = folder / "images"
    root.mkdir()
    rng = np.random.default_rng(0)
    for image_id in (1, 2, 3, UNKNOWN_CATEGORY_IMAGE):
        Image.fromarray(rng.integers(0, 256, (SIZE[1], SIZE[0], 3), dtype=np.uint8)).save(root / f"{image_id}.png")
    write_png16(root / "4.png", sixteen_bit_rgb(SIZE[1], SIZE[0]))
    for name in ("truncated.jpg", "empty.jpg", "not_an_image.jpg", "bomb.png"):
        shutil.copy(folder.parent / "hostile-source" / name, root / name)
    (folder / "outside.jpg").write_bytes((root / "1.png").read_bytes())
    os.symlink(folder / "outside.jpg", root / "link.jpg")
    images = [{"id": i, "file_name": f"{i}.png", "width": SIZE[0], "height": SIZE[1]} for i in (*GOOD_IDS, 5)]
    for image_id, (name, _) in {**BAD_FILES, **BAD_NAMES}.items():
        width, height = (16000, 16000) if name == "bomb.png" else SIZE
        images.append({"id": image_id, "file_name": name, "width": width, "height": height})

    def box(ann_id, image_id, bbox, category=1):
        return {"id": ann_id, "image_id": image_id, "category_id": category, "bbox": bbox, "area": 4.0, "iscrowd": 0}

    annotations = [
        box(101, 1, [1, 1, 4, 3]),
        box(102, 2, [2, 2, 5, 5], category=2),
        box(NEGATIVE_ANN, 2, [3, 3, -2, 4]),  # dropped with a DegenerateBoxWarning; image 2 stays
        box(NAN_ANN, 3, [1, 1, float("nan"), 2]),  # json.dumps writes NaN: the stdlib parser reads it
        box(106, 4, [0, 0, 12, 10]),
        box(UNKNOWN_CATEGORY_ANN, UNKNOWN_CATEGORY_IMAGE, [1, 1, 2, 2], category=99),
        box(ORPHAN_ANN, 999, [1, 1, 2, 2]),  # image 999 is not in 'images'
        *[box(200 + i, i, [1, 1, 2, 2]) for i in BAD_FILES],
    ]
    categories = [{"id": 1, "name": "one"}, {"id": 2, "name": "two"}]
    ann_file = folder / "instances.json"
    ann_file.write_text(json.dumps({"images": images, "annotations": annotations, "categories": categories}))
    return root, ann_file


@pytest.fixture()
def hostile(fixtures, tmp_path):
    shutil.copytree(fixtures / "hostile" / "images", tmp_path / "hostile-source")
    (tmp_path / "coco").mkdir()
    return hostile_coco(tmp_path / "coco")


def test_skip_yields_exactly_the_good_images_and_a_warning_names_each_bad_one(hostile):
    root, ann_file = hostile
    with recording() as caught:
        dataset = CocoDataset(root, ann_file, on_error="skip")
        loader = detection_loader(dataset, 4, train=False, device="cpu", num_workers=0)
        batches = list(loader)
    images = [image for batch_images, _ in batches for image in batch_images]
    targets = [target for _, batch_targets in batches for target in batch_targets]
    assert [t["image_id"] for t in targets] == GOOD_IDS
    assert [t["boxes"].tolist() for t in targets] == [[[1, 1, 5, 4]], [[2, 2, 7, 7]], [], [[0, 0, 12, 10]]]
    assert [t["labels"].tolist() for t in targets] == [[1], [2], [], [1]]
    assert np.array_equal(images[3].numpy(), top_byte_chw(sixteen_bit_rgb(SIZE[1], SIZE[0])))  # 16-bit: decoded

    expected = {f"image {image_id}: ": reason for image_id, (_, reason) in {**BAD_FILES, **BAD_NAMES}.items()}
    expected[f"annotation {UNKNOWN_CATEGORY_ANN}: category_id 99"] = f"image {UNKNOWN_CATEGORY_IMAGE} cannot be used"
    expected[f"annotation {ORPHAN_ANN}: image_id 999"] = "not in 'images'"
    assert_one_warning_each(caught, expected)
    skipped = [str(w.message) for w in caught if issubclass(w.category, SkippedSampleWarning)]
    for image_id, (name, _) in {**BAD_FILES, **BAD_NAMES}.items():
        assert any(f"image {image_id}: " in m and name in m for m in skipped), name
    (degenerate,) = [str(w.message) for w in caught if issubclass(w.category, DegenerateBoxWarning)]
    assert f"(ids {NEGATIVE_ANN}, {NAN_ANN})" in degenerate


def _one_problem(root, ann_file, keep):
    """Rewrite ``ann_file`` keeping the good images and one kind of problem."""
    doc = json.loads(ann_file.read_text())
    images = set(GOOD_IDS) | set(keep)
    doc["images"] = [image for image in doc["images"] if image["id"] in images]
    doc["annotations"] = [
        a for a in doc["annotations"]
        if a["image_id"] in images and a["id"] not in (NEGATIVE_ANN, NAN_ANN)
        or a["id"] == ORPHAN_ANN and ORPHAN_ANN in keep
    ]
    path = ann_file.with_name(f"one-{'-'.join(map(str, keep))}.json")
    path.write_text(json.dumps(doc))
    return root, path


LOAD_TIME = {
    "dotdot": ([21], r"image 21: path '\.\./outside\.jpg' escapes the dataset root"),
    "absolute": ([22], r"image 22: path '/etc/hostname' is absolute"),
    "unknown-category": ([UNKNOWN_CATEGORY_IMAGE], rf"annotation {UNKNOWN_CATEGORY_ANN}: category_id 99 is not in"),
    "orphan-annotation": ([ORPHAN_ANN], rf"annotation {ORPHAN_ANN}: image_id 999 is not in 'images'"),
}


@pytest.mark.parametrize("case", list(LOAD_TIME), ids=list(LOAD_TIME))
def test_raise_names_the_file_and_id_of_each_index_problem(hostile, case):
    keep, pattern = LOAD_TIME[case]
    root, ann_file = _one_problem(*hostile, keep)
    with pytest.raises(DataError, match=rf"{ann_file.name}, {pattern}"):
        CocoDataset(root, ann_file)


@pytest.mark.parametrize("image_id", list(BAD_FILES), ids=[name.split(".")[0] for name, _ in BAD_FILES.values()])
def test_raise_names_the_file_and_image_id_of_each_bad_image(hostile, image_id):
    root, ann_file = _one_problem(*hostile, [image_id])
    dataset = CocoDataset(root, ann_file)
    name, reason = BAD_FILES[image_id]
    with pytest.raises(DataError, match=rf"{ann_file.name}, image {image_id}: .*{name}.*{reason}"):
        dataset[dataset.image_ids.tolist().index(image_id)]


def test_an_error_in_a_worker_names_the_file_and_image_in_the_main_process(hostile):
    root, ann_file = _one_problem(*hostile, [11])  # the truncated JPEG, last in id order
    loader = detection_loader(CocoDataset(root, ann_file), 2, train=False, device="cpu", num_workers=2)
    message = worker_error(loader, r"one-11\.json, image 11: .*truncated\.jpg: cannot decode")
    assert "DataLoader worker process" in message


def test_a_bomb_is_refused_by_the_dataset_before_its_pixels_are_allocated(hostile):
    root, ann_file = _one_problem(*hostile, [14])
    setup = (
        "from recipes.core.contracts.errors import DataError\n"
        "from recipes.detection import CocoDataset\n"
        f"dataset = CocoDataset({str(root)!r}, {str(ann_file)!r})\n"
        "index = dataset.image_ids.tolist().index(14)"
    )
    action = "try:\n    dataset[index]\nexcept DataError as error:\n    print('refused:', error)"
    growth, out = peak_rss_growth_mb(setup, action)
    assert "image 14: " in out and "bomb.png: refused as a decompression bomb" in out
    assert growth < 32  # decoding the 16000x16000 header's image would take 256-768 MB


def test_a_missing_annotation_file_or_image_root_is_named_by_its_role(fixtures, tmp_path):
    with pytest.raises(FileNotFoundError, match=r"^ann_file .*nope\.json does not exist"):
        CocoDataset(fixtures / "detection/images", tmp_path / "nope.json")
    with pytest.raises(FileNotFoundError, match=r"^image_root .*nope is not a directory"):
        CocoDataset(tmp_path / "nope", fixtures / "detection/instances.json")


def test_strict_decode_raises_or_skips_an_image_with_overwritten_scan_data(tmp_path):
    (tmp_path / "images").mkdir()
    data = jpeg_bytes(photo(320, 240, 0), quality=90)
    (tmp_path / "images" / "clean.jpg").write_bytes(data)
    (tmp_path / "images" / "damaged.jpg").write_bytes(overwrite_scan_data(data, 0.5, seed=1))
    names = {1: "clean.jpg", 2: "damaged.jpg"}
    images = [{"id": k, "file_name": name, "width": 320, "height": 240} for k, name in names.items()]
    boxes = [{"id": k, "image_id": k, "category_id": 1, "bbox": [5, 5, 50, 40], "area": 2000, "iscrowd": 0} for k in names]
    ann_file = tmp_path / "instances.json"
    ann_file.write_text(json.dumps({"images": images, "annotations": boxes, "categories": [{"id": 1, "name": "ball"}]}))
    lenient = CocoDataset(tmp_path / "images", ann_file)
    assert lenient[1][0].shape == (3, 240, 320)  # the default decodes it, damaged blocks and all
    reason = r"instances\.json, image 2: .*damaged\.jpg: cannot decode image \(Corrupt JPEG data"
    with pytest.raises(DataError, match=reason):
        CocoDataset(tmp_path / "images", ann_file, read_options=ReadOptions(strict_decode=True))[1]
    strict = CocoDataset(tmp_path / "images", ann_file, on_error="skip", read_options=ReadOptions(strict_decode=True))
    with pytest.warns(SkippedSampleWarning, match=reason):
        assert strict[1] is None
    assert np.array_equal(strict[0][0].numpy(), lenient[0][0].numpy())
