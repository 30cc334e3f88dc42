"""ImageTextDataset and write_shards over Parquet: paths, bytes, Hugging Face Image structs, caption lists."""

import io
import json
import shutil
import tarfile

import datasets
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from PIL import Image, ImageOps

from recipes.core.contracts.errors import DataError
from recipes.multimodal import ImageTextDataset, multimodal_loader, write_shards
from recipes.core.contracts.read_options import ReadOptions
from tests.harness import with_skip_warnings


@pytest.fixture(scope="module", autouse=True)
def _quiet_datasets():
    datasets.disable_progress_bars()


@pytest.fixture()
def folder(fixtures, tmp_path):
    """A copy of the fixture manifest and images, plus its rows as (image name, captions)."""
    shutil.copytree(fixtures / "multimodal" / "images", tmp_path / "images")
    shutil.copy(fixtures / "multimodal" / "manifest.jsonl", tmp_path / "manifest.jsonl")
    return tmp_path


def manifest_rows(folder):
    rows = [json.loads(line) for line in (folder / "manifest.jsonl").read_text(encoding="utf-8").splitlines()]
    return [(row["image"], row.get("captions", [row.get("caption")])) for row in rows]


def pil_decode(data: bytes) -> torch.Tensor:
    with Image.open(io.BytesIO(data)) as image:
        return torch.from_numpy(np.array(ImageOps.exif_transpose(image).convert("RGB"))).permute(2, 0, 1)


def assert_same_items(dataset, reference):
    assert len(dataset) == len(reference)
    for i in range(len(reference)):
        got, expected = dataset[i], reference[i]
        assert torch.equal(got["image"], expected["image"]) and got["index"] == expected["index"] == i
        assert got["input_ids"].tolist() == expected["input_ids"].tolist()


def test_path_and_caption_list_columns_of_small_row_groups_give_the_jsonl_items(folder, tokenizer):
    rows = manifest_rows(folder)
    pq.write_table(pa.table({"image": [r[0] for r in rows], "caption": [r[1] for r in rows]}), folder / "m.parquet", row_group_size=3)
    dataset = ImageTextDataset(folder / "m.parquet", tokenizer, captions="all")
    assert_same_items(dataset, ImageTextDataset(folder / "manifest.jsonl", tokenizer, captions="all"))
    assert dataset.blobs is None and dataset.index.where(4) == f"{folder / 'm.parquet'} row 4"


def test_embedded_bytes_and_a_renamed_captions_column_decode_as_pil_does(folder, tokenizer):
    rows = manifest_rows(folder)
    table = pa.table({"jpg": [(folder / r[0]).read_bytes() for r in rows], "texts": [r[1] for r in rows]})
    pq.write_table(table, folder / "bytes.parquet", row_group_size=2)
    with pytest.raises(DataError, match=r"no column \['caption', 'image'\] \(columns: \['jpg', 'texts'\]\)"):
        ImageTextDataset(folder / "bytes.parquet", tokenizer)
    dataset = ImageTextDataset.from_parquet(folder / "bytes.parquet", tokenizer, image_field="jpg",
                                            caption_field="texts", captions="first")
    for i, (name, captions) in enumerate(rows):
        assert torch.equal(dataset[i]["image"], pil_decode((folder / name).read_bytes()))
        assert dataset[i]["input_ids"].tolist() == tokenizer.encode(captions[0]).ids
    shutil.rmtree(folder / "images")  # the bytes were copied out of the file: no image file is read
    assert dataset[3]["image"].shape[0] == 3


def _image_feature_rows(folder, embed: bool):
    rows = manifest_rows(folder)
    cells = [{"bytes": (folder / r[0]).read_bytes(), "path": None} if embed else {"bytes": None, "path": r[0]} for r in rows]
    features = datasets.Features({"image": datasets.Image(), "captions": datasets.List(datasets.Value("string"))})
    return datasets.Dataset.from_dict({"image": cells, "captions": [r[1] for r in rows]}, features=features)


@pytest.mark.parametrize("embed", [True, False], ids=["struct-bytes", "struct-path"])
def test_datasets_image_feature_written_to_parquet_gives_the_jsonl_items(folder, tokenizer, embed, monkeypatch):
    monkeypatch.chdir(folder)  # datasets sizes relative image paths from the working directory
    data = _image_feature_rows(folder, embed)
    for shard in range(2):
        data.shard(2, shard, contiguous=True).to_parquet(folder / f"train-0000{shard}-of-00002.parquet")
    schema = pq.read_schema(folder / "train-00000-of-00002.parquet")
    assert str(schema.field("image").type) == "struct<bytes: binary, path: string>"
    dataset = ImageTextDataset(str(folder / "train-*.parquet"), tokenizer, captions="all")
    assert_same_items(dataset, ImageTextDataset(folder / "manifest.jsonl", tokenizer, captions="all"))
    assert (dataset.blobs is not None) == embed


def test_a_datasets_object_is_accepted_directly(folder, tokenizer):
    dataset = ImageTextDataset(_image_feature_rows(folder, embed=True), tokenizer, captions="all")
    assert_same_items(dataset, ImageTextDataset(folder / "manifest.jsonl", tokenizer, captions="all"))
    with pytest.raises(DataError, match="pass image_root"):
        ImageTextDataset(_image_feature_rows(folder, embed=False), tokenizer)[0]
    by_path = ImageTextDataset(_image_feature_rows(folder, embed=False), tokenizer, image_root=folder, captions="all")
    assert_same_items(by_path, ImageTextDataset(folder / "manifest.jsonl", tokenizer, captions="all"))


def test_unsafe_paths_and_empty_cells_name_the_row_or_are_skipped(folder, tokenizer):
    table = pa.table({"image": ["images/img_0.jpg", "../secret.jpg", None, "images/img_1.jpg"], "caption": ["a", "b", "c", ""]})
    pq.write_table(table, folder / "bad.parquet", row_group_size=2)
    with pytest.raises(DataError, match=r"bad.parquet row 1: path '../secret.jpg' escapes"):
        ImageTextDataset(folder / "bad.parquet", tokenizer)
    dataset, reasons = with_skip_warnings(lambda: ImageTextDataset(folder / "bad.parquet", tokenizer, on_error="skip"))
    assert len(reasons) == 3 and "row 2: column 'image' holds no image" in reasons[1] and "row 3: empty caption" in reasons[2]
    assert len(dataset) == 1 and dataset.index.where(0).endswith("bad.parquet row 0")


def test_a_spawned_two_worker_loader_reads_embedded_images(folder, tokenizer):
    data = _image_feature_rows(folder, embed=True)
    data.to_parquet(folder / "embedded.parquet", batch_size=3)
    from torchvision.transforms import v2

    resize = v2.Compose([v2.Resize(16), v2.CenterCrop(16)])
    dataset = ImageTextDataset(folder / "embedded.parquet", tokenizer, transform=resize, captions="first")
    loader = multimodal_loader(
        dataset, 4, train=False, device="cpu", num_workers=2, multiprocessing_context="spawn", persistent_workers=False
    )
    batches = list(loader)
    assert torch.cat([b["index"] for b in batches]).tolist() == list(range(len(dataset)))
    expected = torch.stack([dataset[i]["image"] for i in range(len(dataset))])
    assert torch.equal(torch.cat([b["pixel_values"] for b in batches]), expected)


def _members(paths):
    out = []
    for path in paths:
        with tarfile.open(path) as tar:
            out += [(member.name, tar.extractfile(member).read()) for member in tar.getmembers()]
    return out


def test_shards_written_from_parquet_equal_those_written_from_jsonl(folder, tokenizer):
    rows = manifest_rows(folder)
    expected = _members(write_shards(folder / "manifest.jsonl", folder / "from-jsonl", samples_per_shard=3))
    pq.write_table(pa.table({"image": [r[0] for r in rows], "caption": [r[1] for r in rows]}), folder / "p.parquet", row_group_size=2)
    assert _members(write_shards(folder / "p.parquet", folder / "from-paths", samples_per_shard=3)) == expected
    data = _image_feature_rows(folder, embed=True)
    assert _members(write_shards(data, folder / "from-datasets", samples_per_shard=3)) == expected
    source = ImageTextDataset(folder / "p.parquet", tokenizer)
    assert _members(write_shards(source, folder / "from-dataset", samples_per_shard=3)) == expected


def test_a_cache_dir_keeps_one_copy_of_the_embedded_bytes_for_every_run(folder, tokenizer, tmp_path):
    rows = manifest_rows(folder)
    table = pa.table({"jpg": [(folder / name).read_bytes() for name, _ in rows], "caption": [c for _, c in rows]})
    pq.write_table(table, folder / "embedded.parquet", row_group_size=3)
    cache = tmp_path / "cache"
    options = {"image_field": "jpg", "captions": "all", "cache_dir": cache}
    first = ImageTextDataset.from_parquet(folder / "embedded.parquet", tokenizer, **options)
    blob = first.blobs.path
    assert blob.parent == cache and sorted(p.name for p in cache.iterdir()) == [blob.name, blob.name.replace(".blobs", ".offsets.npy")]
    written = blob.stat().st_mtime_ns
    second = ImageTextDataset.from_parquet(folder / "embedded.parquet", tokenizer, **options)  # another run, another rank
    assert second.blobs.path == blob and blob.stat().st_mtime_ns == written  # found, not written again
    assert_same_items(second, ImageTextDataset.from_parquet(folder / "embedded.parquet", tokenizer, image_field="jpg",
                                                            captions="all"))
    del first, second
    assert blob.exists()  # a cache outlives its datasets
    pq.write_table(table.slice(0, 5), folder / "embedded.parquet")  # the content changed: another key
    third = ImageTextDataset.from_parquet(folder / "embedded.parquet", tokenizer, **options)
    assert third.blobs.path != blob and len(third.blobs) == 5
    blob.write_bytes(b"cut")  # a damaged entry is not used: its size disagrees with its offsets
    pq.write_table(table, folder / "embedded.parquet", row_group_size=3)
    again = ImageTextDataset.from_parquet(folder / "embedded.parquet", tokenizer, **options)
    assert again.blobs.path == blob and blob.stat().st_size > 3
    assert_same_items(again, ImageTextDataset.from_parquet(folder / "embedded.parquet", tokenizer, image_field="jpg",
                                                           captions="all"))


def test_a_glob_of_parquet_files_is_listed_once_per_dataset(folder, tokenizer, monkeypatch):
    from recipes.core.sources import parquet_files

    rows = manifest_rows(folder)
    for part in range(2):
        half = rows[part::2]
        pq.write_table(pa.table({"image": [r[0] for r in half], "caption": [r[1] for r in half]}), folder / f"p-{part}.parquet")
    listings = []
    glob_sizes = parquet_files.glob_sizes
    monkeypatch.setattr(parquet_files, "glob_sizes", lambda *args: listings.append(args) or glob_sizes(*args))
    dataset = ImageTextDataset(str(folder / "p-*.parquet"), tokenizer, cache_dir=folder / "cache")
    assert len(listings) == 1  # each listing of a URL glob is a request
    assert len(dataset) == len(rows) and dataset.image_root == folder


def test_a_row_group_over_max_row_group_bytes_is_refused_by_the_dataset_and_the_shard_writer(folder, tokenizer):
    rows = manifest_rows(folder)
    pq.write_table(pa.table({"image": [r[0] for r in rows], "caption": [r[1] for r in rows]}), folder / "m.parquet")
    with pytest.raises(DataError, match="m.parquet: row group 0 declares .* over the limit of 100 "):
        ImageTextDataset(folder / "m.parquet", tokenizer, read_options=ReadOptions(max_row_group_bytes=100))
    with pytest.raises(DataError, match="m.parquet: row group 0 declares .* over the limit of 100 "):
        write_shards(folder / "m.parquet", folder / "out", max_row_group_bytes=100)
    assert len(ImageTextDataset(folder / "m.parquet", tokenizer)) == len(rows)
