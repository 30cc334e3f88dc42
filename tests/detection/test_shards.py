"""CocoShards and write_shards: samples of an image and its COCO target in tar shards (written here
with tarfile from the fixture's instances file, and by write_shards) give CocoDataset's items;
categories, the loader's workers and resume, and every bad sample named by shard and key."""

import io
import json
import random
import tarfile
from pathlib import Path

import pytest
import torch
from PIL import Image
from torchvision.transforms import v2

from recipes.core import DataError, SkippedSampleWarning, StreamOrder
from recipes.detection import CocoDataset, CocoShards, DegenerateBoxWarning, detection_loader, write_shards
from tests.core.test_grouped_batches import detectron2_batches
from tests.harness import digest

PYCOCOTOOLS_ON_NUMPY2 = r"ignore:__array__ implementation doesn't accept a copy keyword:DeprecationWarning"


def write_tar(path: Path, members: list[tuple[str, bytes]]) -> Path:
    with tarfile.open(path, "w") as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def sample(image: dict, annotations: list[dict], data: bytes) -> list[tuple[str, bytes]]:
    key = f"{image['id']:012d}"
    target = {"image_id": image["id"], "width": image["width"], "height": image["height"], "annotations": annotations}
    return [(f"{key}.jpg", data), (f"{key}.json", json.dumps(target).encode())]


@pytest.fixture(scope="module")
def coco(fixtures) -> tuple[Path, Path]:
    return fixtures / "detection" / "images", fixtures / "detection" / "instances.json"


@pytest.fixture(scope="module")
def shards(coco, tmp_path_factory) -> list[Path]:
    """The ten fixture images and their annotations, in id order, in two shards."""
    doc = json.loads(coco[1].read_text())
    by_image: dict[int, list] = {}
    for annotation in doc["annotations"]:
        by_image.setdefault(annotation["image_id"], []).append(annotation)
    samples = [sample(image, by_image.get(image["id"], []), (coco[0] / image["file_name"]).read_bytes())
               for image in sorted(doc["images"], key=lambda image: image["id"])]
    out = tmp_path_factory.mktemp("shards")
    return [write_tar(out / f"coco-{n:06d}.tar", [m for s in samples[5 * n : 5 * n + 5] for m in s]) for n in (0, 1)]


def same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(torch.as_tensor(a[key]), torch.as_tensor(b[key])) for key in a)


@pytest.mark.filterwarnings(PYCOCOTOOLS_ON_NUMPY2)
@pytest.mark.parametrize("contiguous", [False, True], ids=["coco-ids", "contiguous"])
def test_items_equal_coco_datasets_for_the_same_images(coco, shards, contiguous):
    dataset = CocoDataset(*coco, masks=True, contiguous_labels=contiguous)
    streamed = list(CocoShards(shards, masks=True, contiguous_labels=contiguous, categories=coco[1]))
    assert len(streamed) == len(dataset) == 10
    for index, (image, target) in enumerate(streamed):
        expected_image, expected = dataset[index]
        assert type(image).__name__ == "Image" and torch.equal(image, expected_image)
        assert same(target, expected), target["image_id"]
        assert target["boxes"].canvas_size == expected["boxes"].canvas_size
    assert CocoShards(shards, contiguous_labels=True, categories=coco[1]).label_to_category == dataset.label_to_category


def test_categories_as_ids_dicts_or_a_file_and_contiguous_labels_need_them(coco, shards):
    doc = json.loads(coco[1].read_text())
    ids = [category["id"] for category in doc["categories"]]
    for categories in (ids, doc["categories"], coco[1]):
        stream = CocoShards(shards, contiguous_labels=True, categories=categories)
        assert stream.label_to_category == {k + 1: cid for k, cid in enumerate(sorted(ids))}
    with pytest.raises(ValueError, match="contiguous_labels=True numbers the categories 1..K: pass categories="):
        CocoShards(shards, contiguous_labels=True)


def test_two_workers_read_every_image_once_and_flips_are_seeded_by_the_sample(shards):
    def seen(workers: int, seed: int = 0) -> list[str]:
        stream = CocoShards(shards, transforms=v2.RandomHorizontalFlip(), order=StreamOrder(shuffle_buffer=3, seed=seed))
        loader = detection_loader(stream, 2, train=False, device="cpu", num_workers=workers)
        return sorted(digest([image, target["boxes"]]) for images, targets in loader
                      for image, target in zip(images, targets))

    once = seen(0)
    assert len(once) == 10 and seen(2) == once and seen(0, seed=1) != once


def test_a_stateful_loader_resumes_mid_epoch_with_exactly_the_batches_still_to_come(shards):
    def loader():
        stream = CocoShards(shards, transforms=v2.RandomHorizontalFlip(), order=StreamOrder(shuffle_buffer=3, seed=1))
        return detection_loader(stream, 2, device="cpu", seed=1, stateful=True, num_workers=0)

    uninterrupted = loader()
    expected = [digest(batch) for batch in list(uninterrupted) + list(uninterrupted)]
    interrupted = loader()
    batches = iter(interrupted)
    first = [digest(next(batches)) for _ in range(2)]
    resumed = loader()
    resumed.load_state_dict(interrupted.state_dict())
    assert first + [digest(batch) for batch in list(resumed) + list(resumed)] == expected


@pytest.fixture(scope="module")
def oriented(tmp_path_factory) -> list[Path]:
    """48 small images, landscape (60%) or portrait at random, a box each, in four shards."""
    rng, samples = random.Random(0), []
    for n in range(48):
        width, height = (24, 16) if rng.random() < 0.6 else (16, 24)
        data = io.BytesIO()
        Image.new("RGB", (width, height), (n * 5, 90, 200)).save(data, "JPEG")
        box = {"id": n + 1, "category_id": 1, "bbox": [1.0, 1.0, 8.0, 8.0], "area": 64.0, "iscrowd": 0}
        samples.append(sample({"id": n + 1, "width": width, "height": height}, [box], data.getvalue()))
    out = tmp_path_factory.mktemp("oriented")
    return [write_tar(out / f"o-{k:06d}.tar", [m for s in samples[12 * k : 12 * k + 12] for m in s]) for k in range(4)]


def test_a_streams_training_batches_are_each_of_one_orientation_as_detectron2_fills_them(oriented):
    def stream() -> CocoShards:
        return CocoShards(oriented, transforms=v2.RandomHorizontalFlip(), order=StreamOrder(shuffle_buffer=8, seed=2))

    def ids(batches) -> list[list[int]]:
        return [[target["image_id"] for target in targets] for _, targets in batches]

    def landscape(item) -> int:  # detectron2's bucket: width > height
        return int(item[0].shape[-1] > item[0].shape[-2])

    batches = detectron2_batches(list(stream()), 4, landscape)
    expected = [[target["image_id"] for _, target in batch] for batch in batches]
    assert ids(detection_loader(stream(), 4, device="cpu", num_workers=0)) == expected
    with pytest.raises(ValueError, match="groups= gives each sample of a map-style dataset its group"):
        detection_loader(stream(), 4, groups=[0] * 48)

    def loader():
        return detection_loader(stream(), 4, device="cpu", seed=0, stateful=True, num_workers=2)

    whole = [(ids([batch]), [tuple(image.shape) for image in batch[0]]) for batch in loader()]
    assert all(len(set(shapes)) == 1 and len(shapes) == 4 for _, shapes in whole)  # one orientation a batch
    assert len({i for batch, _ in whole for i in batch[0]}) == 4 * len(whole) >= 48 - 2 * 2 * 3
    interrupted = loader()
    going = iter(interrupted)
    taken = [ids([next(going)]) for _ in range(3)]
    resumed = loader()
    resumed.load_state_dict(interrupted.state_dict())
    assert taken + [ids([batch]) for batch in resumed] == [batch for batch, _ in whole]


IMAGE = {"id": 7, "width": 64, "height": 96}
BOX = {"id": 1, "category_id": 3, "bbox": [2.0, 3.0, 10.0, 12.0], "area": 120.0, "iscrowd": 0}


@pytest.mark.parametrize("members, message", [
    (lambda jpg: [("a.jpg", jpg)], r"a: no target \(json\)"),
    (lambda jpg: [("a.json", b"{}")], r"a: no image \(jpg/"),
    (lambda jpg: [("a.jpg", jpg), ("a.json", b"{not json")], r"a: its \.json is not JSON"),
    (lambda jpg: [("a.jpg", jpg), ("a.json", b'{"image_id": 7}')], r"a: its \.json has no 'width', 'height'"),
    (lambda jpg: [("a.jpg", jpg), ("a.json", json.dumps({**{"image_id": 7, "width": 64, "height": 96},
                                                         "annotations": [{**BOX, "category_id": 99}]}).encode())],
     r"a.*category_id 99"),
    (lambda jpg: [("a.jpg", jpg), ("a.json", json.dumps({"image_id": 7, "width": 65, "height": 96,
                                                         "annotations": [BOX]}).encode())],
     r"a\.jpg: decoded image is 64x96 \(WxH\) but .*a\.json gives image 7 as 65x96"),
], ids=["no-target", "no-image", "not-json", "no-size", "unknown-category", "size-mismatch"])
def test_a_bad_sample_is_named_by_shard_and_key_or_skipped_with_a_warning(coco, tmp_path, members, message):
    image = next(i for i in json.loads(coco[1].read_text())["images"] if i["id"] == 7)
    jpg = (coco[0] / image["file_name"]).read_bytes()
    good = sample(image, [BOX], jpg)
    shard = write_tar(tmp_path / "bad.tar", members(jpg) + good)
    with pytest.raises(DataError, match=r"bad\.tar:" + message):
        list(CocoShards(shard, categories=coco[1]))
    with pytest.warns(SkippedSampleWarning, match=r"bad\.tar:" + message):
        items = list(CocoShards(shard, categories=coco[1], on_error="skip"))
    assert [target["image_id"] for _, target in items] == [7]  # the good sample only


def test_a_degenerate_box_is_dropped_with_a_warning_naming_it(coco, tmp_path):
    image = next(i for i in json.loads(coco[1].read_text())["images"] if i["id"] == 7)
    flat = {**BOX, "id": 2, "bbox": [5.0, 5.0, 0.0, 4.0]}
    shard = write_tar(tmp_path / "flat.tar", sample(image, [BOX, flat], (coco[0] / image["file_name"]).read_bytes()))
    with pytest.warns(DegenerateBoxWarning, match=r"flat\.tar:000000000007: dropped 1 annotation.*\(ids 2\)"):
        ((_, target),) = list(CocoShards(shard))
    assert target["boxes"].tolist() == [[2.0, 3.0, 12.0, 15.0]] and target["labels"].tolist() == [3]


@pytest.mark.filterwarnings(PYCOCOTOOLS_ON_NUMPY2)
def test_written_shards_are_equal_reproducible_and_read_back_as_the_dataset(coco, tmp_path):
    paths = write_shards(*coco, tmp_path / "a", samples_per_shard=4)
    again = write_shards(*coco, tmp_path / "b", samples_per_shard=4)
    assert [path.name for path in paths] == ["shard-000000.tar", "shard-000001.tar", "shard-000002.tar"]
    assert [path.read_bytes() for path in paths] == [path.read_bytes() for path in again]  # byte-identical
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == ["categories.json", *[p.name for p in paths]]
    dataset = CocoDataset(*coco, masks=True, contiguous_labels=True)
    streamed = list(CocoShards(paths, masks=True, contiguous_labels=True, categories=tmp_path / "a" / "categories.json"))
    assert len(streamed) == len(dataset) == 10
    for index, (image, target) in enumerate(streamed):
        assert torch.equal(image, dataset[index][0]) and same(target, dataset[index][1])


def test_the_writer_names_an_image_that_does_not_read_or_skips_it(coco, tmp_path):
    images = tmp_path / "images"
    images.mkdir()
    doc = json.loads(coco[1].read_text())
    for image in doc["images"]:
        (images / image["file_name"]).write_bytes((coco[0] / image["file_name"]).read_bytes())
    broken = min(doc["images"], key=lambda image: image["id"])
    (images / broken["file_name"]).write_bytes(b"not an image")
    with pytest.raises(DataError, match=rf"image id {broken['id']} \({broken['file_name']}\)"):
        write_shards(images, coco[1], tmp_path / "out")
    with pytest.warns(SkippedSampleWarning, match=broken["file_name"]):
        paths = write_shards(images, coco[1], tmp_path / "skipped", on_error="skip")
    assert len(list(CocoShards(paths))) == 9


def test_recipes_check_names_each_bad_sample_of_the_shards_and_show_draws_a_batch(coco, tmp_path, capsys):
    from recipes.__main__ import main

    write_shards(*coco, tmp_path, samples_per_shard=4)
    assert main(["check", "detection", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "no problems found" in out and "10 images, 22 boxes" in out and "person 5" in out  # categories.json's names
    assert main(["show", "detection", str(tmp_path), "--output", str(tmp_path / "batch.png"), "--batch-size", "4"]) == 0
    assert "evaluation batch (stream order) of CocoShards, 10 samples; batch size 4" in capsys.readouterr().out
    image = next(i for i in json.loads(coco[1].read_text())["images"] if i["id"] == 7)
    jpg = (coco[0] / image["file_name"]).read_bytes()
    flat = {**BOX, "id": 2, "bbox": [5.0, 5.0, 0.0, 4.0]}
    write_tar(tmp_path / "shard-000002.tar", [("x.jpg", jpg), ("x.json", b'{"image_id": 7}'),
                                               *sample(image, [BOX, flat], jpg)])
    assert main(["check", "detection", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "shard-000002.tar:x" in out and "has no 'width', 'height'" in out
    assert "shard-000002.tar:000000000007" in out  # a degenerate box is a problem here, not a warning
