"""The webdataset package and these shards read each other: webdataset reads what write_shards wrote
(the files' own bytes, their labels), and ImageShards reads what webdataset's ShardWriter wrote as
ImageFolderDataset reads the same files."""

import gc
from pathlib import Path

import pytest
import torch
import webdataset as wds

from recipes.vision import ImageFolderDataset, ImageShards, write_shards
from recipes.vision.shards import IMAGE_MEMBERS

# webdataset's tar reader leaves each shard's file to the garbage collector (a ResourceWarning, raised
# inside it as an unraisable exception): collected after each test, under these filters
pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning", "ignore::pytest.PytestUnraisableExceptionWarning")


@pytest.fixture(autouse=True)
def _collected():
    yield
    gc.collect()


def test_webdataset_reads_the_bytes_and_labels_write_shards_wrote(fixtures, tmp_path):
    folder = ImageFolderDataset(fixtures / "vision")
    paths = write_shards(fixtures / "vision", tmp_path, samples_per_shard=5)
    samples = list(wds.WebDataset([str(path) for path in paths], shardshuffle=False))
    assert len(samples) == len(folder) == 14
    for sample, (path, target) in zip(samples, folder.samples):
        (image,) = [sample[extension] for extension in IMAGE_MEMBERS if extension in sample]
        assert image == Path(path).read_bytes() and int(sample["cls"]) == target
    # as webdataset's README reads a sample's parts
    pairs = wds.WebDataset([str(path) for path in paths], shardshuffle=False).to_tuple(";".join(IMAGE_MEMBERS), "cls")
    assert [int(label) for _, label in pairs] == folder.targets


def test_shards_webdatasets_shard_writer_wrote_give_the_folders_items(fixtures, tmp_path):
    folder = ImageFolderDataset(fixtures / "vision")
    pattern = str(tmp_path / "wds-%06d.tar")
    with wds.ShardWriter(pattern, maxcount=5, verbose=0) as sink:
        for row, (path, target) in enumerate(folder.samples):
            image = {Path(path).suffix[1:].lower(): Path(path).read_bytes()}
            sink.write({"__key__": f"{row:06d}", **image, "cls": target, "json": {"label": folder.classes[target]}})
    paths = sorted(tmp_path.glob("wds-*.tar"))
    assert len(paths) == 3
    by_number = list(ImageShards(paths))
    by_name = list(ImageShards(paths, label="json", classes=folder.classes))
    assert len(by_number) == len(by_name) == len(folder)
    for index, ((image, label), (_, named)) in enumerate(zip(by_number, by_name)):
        expected, target = folder[index]
        assert torch.equal(image, expected) and label == named == target
