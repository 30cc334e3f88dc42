"""The webdataset package and these shards read each other: webdataset reads what write_shards wrote
(each image's bytes and its annotations), and CocoShards reads what webdataset's ShardWriter wrote
into CocoDataset's items for the same images."""

import gc
import json

import pytest
import torch
import webdataset as wds

from recipes.detection import CocoDataset, CocoShards, write_shards

# webdataset's tar reader leaves each shard's file to the garbage collector (a ResourceWarning, raised
# inside it as an unraisable exception): collected after each test, under these filters
pytestmark = [
    pytest.mark.filterwarnings("ignore::ResourceWarning", "ignore::pytest.PytestUnraisableExceptionWarning"),
    pytest.mark.filterwarnings(r"ignore:__array__ implementation doesn't accept a copy keyword:DeprecationWarning"),
]


@pytest.fixture(autouse=True)
def _collected():
    yield
    gc.collect()


@pytest.fixture
def coco(fixtures):
    root, ann_file = fixtures / "detection" / "images", fixtures / "detection" / "instances.json"
    doc = json.loads(ann_file.read_text())
    annotations = {image["id"]: [] for image in doc["images"]}
    for annotation in doc["annotations"]:
        annotations[annotation["image_id"]].append(annotation)
    return root, ann_file, sorted(doc["images"], key=lambda image: image["id"]), annotations


def test_webdataset_reads_the_images_and_annotations_write_shards_wrote(coco, tmp_path):
    root, ann_file, images, annotations = coco
    paths = write_shards(root, ann_file, tmp_path, samples_per_shard=4)
    samples = list(wds.WebDataset([str(path) for path in paths], shardshuffle=False).decode())
    assert len(samples) == len(images) == 10
    for sample, image in zip(samples, images):
        assert sample["jpg" if "jpg" in sample else "png"] == (root / image["file_name"]).read_bytes()
        target = sample["json"]
        assert (target["image_id"], target["width"], target["height"]) == (image["id"], image["width"], image["height"])
        assert target["annotations"] == annotations[image["id"]]


def test_shards_webdatasets_shard_writer_wrote_give_coco_datasets_items(coco, tmp_path):
    root, ann_file, images, annotations = coco
    with wds.ShardWriter(str(tmp_path / "wds-%06d.tar"), maxcount=4, verbose=0) as sink:
        for image in images:
            target = {"image_id": image["id"], "width": image["width"], "height": image["height"],
                      "annotations": annotations[image["id"]]}
            sink.write({"__key__": f"{image['id']:012d}", "jpg": (root / image["file_name"]).read_bytes(),
                        "json": target})
    paths = sorted(tmp_path.glob("wds-*.tar"))
    dataset = CocoDataset(root, ann_file, masks=True)
    streamed = list(CocoShards(paths, masks=True))
    assert len(paths) == 3 and len(streamed) == len(dataset) == 10
    for index, (image, target) in enumerate(streamed):
        expected_image, expected = dataset[index]
        assert torch.equal(image, expected_image) and target.keys() == expected.keys()
        assert all(torch.equal(torch.as_tensor(target[key]), torch.as_tensor(expected[key])) for key in target)
