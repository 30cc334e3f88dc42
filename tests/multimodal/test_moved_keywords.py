"""Every keyword that left the caption datasets' constructors still works: a DeprecationWarning
that names the new spelling and points at the caller's line, and the same items as the new spelling."""

import json
import shutil
import warnings
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from tokenizers import Tokenizer
from torchvision.transforms import v2

from recipes.core import ReadOptions, StreamOrder
from recipes.multimodal import ImageTextDataset, ImageTextShards, write_shards

HERE = str(Path(__file__).resolve())
CROP = v2.Compose([v2.Resize(24), v2.CenterCrop(24)])


@pytest.fixture(scope="module")
def tokenizer(fixtures):
    return Tokenizer.from_file(str(fixtures / "text" / "tokenizer.json"))


@pytest.fixture(scope="module")
def folder(fixtures, tmp_path_factory):
    """The fixture manifest and images, the same rows as Parquet with other column names, and 4 shards."""
    out = tmp_path_factory.mktemp("moved")
    shutil.copytree(fixtures / "multimodal" / "images", out / "images")
    shutil.copy(fixtures / "multimodal" / "manifest.jsonl", out / "manifest.jsonl")
    rows = [json.loads(line) for line in (out / "manifest.jsonl").read_text(encoding="utf-8").splitlines()]
    columns = {"jpg": [row["image"] for row in rows], "txt": [row.get("captions", [row.get("caption")]) for row in rows]}
    pq.write_table(pa.table(columns), out / "named.parquet", row_group_size=3)
    pq.write_table(pa.table({"image": columns["jpg"], "caption": columns["txt"]}), out / "plain.parquet", row_group_size=3)
    write_shards(fixtures / "multimodal" / "captions.json", out / "shards", samples_per_shard=2)
    return out


def _old(build, pattern):
    """``build()`` under the old spelling: DeprecationWarnings only (one a moved group), blamed on this
    file, one of them holding ``pattern``."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dataset = build()
    messages = [str(w.message) for w in caught]
    assert caught and all(issubclass(w.category, DeprecationWarning) for w in caught), messages
    assert {w.filename for w in caught} == {HERE}  # stacklevel: the caller's line, not the library's
    assert any(pattern in message for message in messages), messages
    return dataset


def _same(items, expected):
    assert len(items) == len(expected) > 0
    for got, want in zip(items, expected):
        assert got.keys() == want.keys()
        for key in got:
            assert torch.equal(got[key], want[key]) if torch.is_tensor(got[key]) else got[key] == want[key], key


PAIRS = {
    "strict_decode": ({"strict_decode": True}, {"read_options": ReadOptions(strict_decode=True)},
                      "read_options=ReadOptions(strict_decode=...)"),
    "truncation": ({"truncation": "slice", "max_length": 5}, {"read_options": ReadOptions(truncation="slice"), "max_length": 5},
                   "read_options=ReadOptions(truncation=...)"),
    "max_row_group_bytes": ({"max_row_group_bytes": 2**20}, {"read_options": ReadOptions(max_row_group_bytes=2**20)},
                            "read_options=ReadOptions(max_row_group_bytes=...)"),
}


@pytest.mark.parametrize("source", ["manifest.jsonl", "plain.parquet"])
@pytest.mark.parametrize("moved", PAIRS)
def test_a_moved_keyword_of_the_pairs_warns_and_gives_the_same_items(folder, tokenizer, moved, source):
    old, new, pattern = PAIRS[moved]
    options = {"transform": CROP, "captions": "all"}
    expected = ImageTextDataset(folder / source, tokenizer, **options, **new)
    dataset = _old(lambda: ImageTextDataset(folder / source, tokenizer, **options, **old), pattern)
    _same([dataset[i] for i in range(len(dataset))], [expected[i] for i in range(len(expected))])


@pytest.mark.parametrize("old", [{"image_field": "jpg", "caption_field": "txt"}], ids=["columns"])
def test_named_columns_moved_to_from_parquet_and_give_the_same_items(folder, tokenizer, old):
    options = {"transform": CROP, "captions": "all"}
    expected = ImageTextDataset.from_parquet(folder / "named.parquet", tokenizer, **old, **options)
    dataset = _old(lambda: ImageTextDataset(folder / "named.parquet", tokenizer, **old, **options),
                   "use ImageTextDataset.from_parquet(..., image_field=..., caption_field=...)")
    manifest = ImageTextDataset(folder / "manifest.jsonl", tokenizer, **options)
    assert type(dataset) is ImageTextDataset
    _same([dataset[i] for i in range(len(dataset))], [expected[i] for i in range(len(expected))])
    _same([dataset[i] for i in range(len(dataset))], [manifest[i] for i in range(len(manifest))])
    with pytest.raises(ValueError, match=r"from_parquet reads Parquet .* use ImageTextDataset\(manifest, tokenizer\)"):
        ImageTextDataset.from_parquet(folder / "manifest.jsonl", tokenizer, image_field="jpg")


SHARDS = {
    "shuffle_buffer": ({"shuffle_buffer": 3, "seed": 5}, {"order": StreamOrder(shuffle_buffer=3, seed=5)},
                       "order=StreamOrder(shuffle_buffer=..., seed=...)"),
    "rank": ({"rank": 1, "world_size": 2, "seed": 1}, {"order": StreamOrder(rank=1, world_size=2, seed=1)},
             "order=StreamOrder(rank=..., world_size=..., seed=...)"),
    "strict_decode": ({"strict_decode": True, "seed": 0}, {"read_options": ReadOptions(strict_decode=True),
                                                          "order": StreamOrder(seed=0)}, "strict_decode=..."),
    "truncation": ({"truncation": "slice", "max_length": 5, "seed": 0},
                   {"read_options": ReadOptions(truncation="slice"), "max_length": 5, "order": StreamOrder(seed=0)},
                   "truncation=..."),
    "cache": ({"cache_verify": True, "cache_limit_bytes": 2**30, "seed": 0, "cache_dir": "CACHE"},
              {"read_options": ReadOptions(verify_cache=True, cache_limit_bytes=2**30), "order": StreamOrder(seed=0),
               "cache_dir": "CACHE"}, "pass read_options=ReadOptions(verify_cache=..., cache_limit_bytes=...)"),
}


@pytest.mark.parametrize("moved", SHARDS)
def test_a_moved_keyword_of_the_shards_warns_and_gives_the_same_items(folder, tokenizer, tmp_path, moved):
    old, new, pattern = SHARDS[moved]
    shards = str(folder / "shards" / "shard-{000000..000003}.tar")

    def options(spelling):
        return {key: tmp_path / "cache" if value == "CACHE" else value for key, value in spelling.items()}

    expected = ImageTextShards(shards, tokenizer, transform=CROP, **options(new))
    stream = _old(lambda: ImageTextShards(shards, tokenizer, transform=CROP, **options(old)), pattern)
    assert (stream.shuffle_buffer, stream.rank, stream.world_size, stream.seed) == (
        expected.shuffle_buffer, expected.rank, expected.world_size, expected.seed)
    assert (stream.cache is None) == (expected.cache is None)
    _same(list(stream), list(expected))


def test_an_unread_option_is_named_and_an_old_keyword_beside_its_new_home_refused(folder, tokenizer):
    with pytest.raises(ValueError, match=r"ImageTextShards does not read read_options.max_line_chars"):
        ImageTextShards(str(folder / "shards" / "shard-000000.tar"), tokenizer, read_options=ReadOptions(max_line_chars=9))
    with pytest.raises(ValueError, match=r"ImageTextDataset does not read read_options.verify_cache"):
        ImageTextDataset(folder / "manifest.jsonl", tokenizer, read_options=ReadOptions(verify_cache=True))
    with pytest.raises(TypeError, match=r"strict_decode=\.\.\. and read_options=\.\.\. both given"):
        ImageTextDataset(folder / "manifest.jsonl", tokenizer, strict_decode=True, read_options=ReadOptions())
