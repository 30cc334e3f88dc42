"""Property tests: multimodal_collate unpads to exactly the items; ImageTextDataset on mutated
manifests and ImageTextShards on mutated caption members load or raise a DataError naming them."""

import io
import tarfile

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from tokenizers import Tokenizer

from recipes.multimodal import ImageTextDataset, ImageTextShards, multimodal_collate
from tests.core.mutations import (
    fuzz_settings,
    load_or_data_error,
    mutated_file,
    mutated_json,
    quiet,
    serialized,
    spliced,
)


@st.composite
def batches(draw):
    """1..5 items of one image size (contiguous or channels-last views), ids of any length, some None."""
    height, width = draw(st.integers(1, 8)), draw(st.integers(1, 8))
    channels_last = draw(st.booleans())  # a batch comes from one pipeline: one layout
    keyed = draw(st.booleans())  # tar shards give "key", the map-style dataset "index"
    generator = torch.Generator().manual_seed(draw(st.integers(0, 2**31)))
    batch = []
    for index in range(draw(st.integers(1, 5))):
        if draw(st.integers(0, 4)) == 0:
            batch.append(None)
            continue
        if channels_last:
            image = torch.randint(0, 256, (height, width, 3), dtype=torch.uint8, generator=generator).permute(2, 0, 1)
        else:
            image = torch.randint(0, 256, (3, height, width), dtype=torch.uint8, generator=generator)
        length = draw(st.integers(0, 10))
        item = {"image": image, "input_ids": torch.randint(1, 500, (length,), generator=generator)}
        item.update({"key": f"shard-0/{index:03d}"} if keyed else {"index": index})
        batch.append(item)
    return batch


@fuzz_settings(150)
@given(batch=batches(), pad_id=st.integers(0, 600))
def test_multimodal_collate_unpads_to_exactly_the_items(batch, pad_id):
    out = multimodal_collate(batch, pad_id=pad_id)
    items = [item for item in batch if item is not None]
    assert out["pixel_values"].dtype == torch.uint8 and len(out["pixel_values"]) == len(items)
    assert out["input_ids"].shape == out["attention_mask"].shape
    assert out["lengths"].tolist() == [len(item["input_ids"]) for item in items]
    for k, item in enumerate(items):
        assert torch.equal(out["pixel_values"][k], item["image"])
        mask = out["attention_mask"][k].bool()
        assert torch.equal(out["input_ids"][k][mask], item["input_ids"])  # unpad(pad(x)) == x
        assert (out["input_ids"][k][~mask] == pad_id).all() and mask.tolist() == sorted(mask.tolist(), reverse=True)
    if items and items[0]["image"].stride(0) == 1:
        assert out["pixel_values"].is_contiguous(memory_format=torch.channels_last)  # the layout is kept
    if items and "key" in items[0]:
        assert out["key"] == [item["key"] for item in items]
    else:
        assert out["index"].tolist() == [item["index"] for item in items]


# -- the datasets on mutated files ----------------------------------------------------------------


@pytest.fixture(scope="module")
def tokenizer(fixtures):
    return Tokenizer.from_file(str(fixtures / "text" / "tokenizer.json"))


@pytest.fixture(scope="module")
def scratch(tmp_path_factory, fixtures):
    """A copy of the caption fixtures' folder: mutated manifests are written next to the images."""
    import shutil

    folder = tmp_path_factory.mktemp("fuzz") / "multimodal"
    shutil.copytree(fixtures / "multimodal", folder)
    return folder


def _read_all(dataset, path):
    for index in range(len(dataset)):
        item = load_or_data_error(lambda index=index: dataset[index], path)
        if item is not None:
            assert item["image"].dtype == torch.uint8 and len(item["input_ids"]) <= 77


@fuzz_settings(40)
@given(data=st.data(), name=st.sampled_from(["manifest.jsonl", "captions.json", "manifest.csv"]),
       on_error=st.sampled_from(["raise", "skip"]))
def test_image_caption_dataset_on_a_mutated_manifest(scratch, tokenizer, data, name, on_error):
    source = scratch / name
    path = scratch / f"mutated{source.suffix}"
    path.write_bytes(mutated_file(data, source))
    with quiet():
        dataset = load_or_data_error(lambda: ImageTextDataset(path, tokenizer, captions="all", on_error=on_error), path)
        if dataset is not None:
            _read_all(dataset, path)


@fuzz_settings(60)
@given(data=st.data(), on_error=st.sampled_from(["raise", "skip"]))
def test_shards_on_a_mutated_caption_member(scratch, tokenizer, data, on_error):
    doc = mutated_json(data, {"captions": ["a red kite", "two dogs"], "url": "x", "size": [48, 64]})
    image = (scratch / "images" / "img_0.jpg").read_bytes()
    path = scratch / "mutated.tar"
    with tarfile.open(path, "w") as tar:
        for name, content in [("000.jpg", image), ("000.json", serialized(data, doc)), ("001.jpg", image),
                              ("001.txt", spliced(data, b"a plain caption"))]:
            info = tarfile.TarInfo(name)
            info.size = len(content)
            tar.addfile(info, io.BytesIO(content))
    with quiet():
        items = load_or_data_error(lambda: list(ImageTextShards(path, tokenizer, on_error=on_error)), path)
    if items is not None:
        assert {item["key"] for item in items} <= {"mutated.tar/000", "mutated.tar/001"}
