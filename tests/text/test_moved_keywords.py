"""Every keyword that left the two datasets' constructors still works: a DeprecationWarning that
names the new spelling and points at the caller's line, and the same items as the new spelling."""

import warnings
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from tokenizers import Tokenizer

from recipes.core import ReadOptions, StreamOrder
from recipes.text import StreamingTextDataset, TokenizedTextDataset

HERE = str(Path(__file__).resolve())


@pytest.fixture(scope="module")
def tokenizer(fixtures):
    return Tokenizer.from_file(str(fixtures / "text" / "tokenizer.json"))


@pytest.fixture(scope="module")
def parquet(fixtures, tokenizer, tmp_path_factory):
    """labeled.jsonl's rows with their token ids, in row groups of 16."""
    import json

    lines = (fixtures / "text" / "labeled.jsonl").read_text(encoding="utf-8").splitlines()
    rows = [json.loads(line) for line in lines if line.strip()]
    for row in rows:
        row["input_ids"] = tokenizer.encode(row["text"]).ids
    path = tmp_path_factory.mktemp("moved") / "ids.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path, row_group_size=16)
    return path


def _items(dataset):
    items = iter(dataset) if isinstance(dataset, StreamingTextDataset) else (dataset[i] for i in range(len(dataset)))
    return [{key: value.tolist() if hasattr(value, "tolist") else value for key, value in item.items()} for item in items]


def _old(build, pattern):
    """``build()`` under the old spelling: exactly one DeprecationWarning, matching ``pattern``, blamed on this file."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dataset = build()
    moved = [w for w in caught if issubclass(w.category, DeprecationWarning)]
    assert len(moved) == 1 and len(caught) == 1, [str(w.message) for w in caught]
    assert moved[0].filename == HERE, moved[0].filename  # stacklevel: the caller's line, not the library's
    assert pattern in str(moved[0].message), str(moved[0].message)
    return dataset


# old keywords -> (the new keywords, the text the warning must hold)
TOKENIZED = {
    "truncation": ({"truncation": "slice", "max_length": 6},
                   {"read_options": ReadOptions(truncation="slice"), "max_length": 6}, "read_options=ReadOptions(truncation=...)"),
    "max_line_chars": ({"max_line_chars": 10_000}, {"read_options": ReadOptions(max_line_chars=10_000)},
                       "read_options=ReadOptions(max_line_chars=...)"),
    "max_row_group_bytes": ({"max_row_group_bytes": 2**20}, {"read_options": ReadOptions(max_row_group_bytes=2**20)},
                            "read_options=ReadOptions(max_row_group_bytes=...)"),
    "verify": ({"verify": True, "cache_dir": "CACHE"}, {"read_options": ReadOptions(verify_cache=True), "cache_dir": "CACHE"},
               "read_options=ReadOptions(verify_cache=...)"),
}


def _cache(options, tmp_path):
    return {key: tmp_path / "cache" if value == "CACHE" else value for key, value in options.items()}


@pytest.mark.parametrize("source", ["jsonl", "parquet"])
@pytest.mark.parametrize("moved", TOKENIZED)
def test_a_moved_keyword_of_the_tokenized_dataset_warns_and_gives_the_same_items(fixtures, parquet, tokenizer, tmp_path,
                                                                                 moved, source):
    path = fixtures / "text" / "labeled.jsonl" if source == "jsonl" else parquet
    old, new, pattern = TOKENIZED[moved]
    expected = TokenizedTextDataset(path, tokenizer, label_field="label", **_cache(new, tmp_path))
    dataset = _old(lambda: TokenizedTextDataset(path, tokenizer, label_field="label", **_cache(old, tmp_path)), pattern)
    assert _items(dataset) == _items(expected) and len(dataset) > 0


def test_the_slice_cut_moved_with_its_keyword_and_still_cuts_differently(fixtures, tokenizer):
    path = fixtures / "text" / "labeled.jsonl"
    sliced = _old(lambda: TokenizedTextDataset(path, tokenizer, max_length=6, truncation="slice"), "truncation=...")
    kept = TokenizedTextDataset(path, tokenizer, max_length=6)
    closing = tokenizer.encode("a").ids[-1]
    assert all(item["input_ids"][-1] == closing for item in _items(kept))
    assert any(item["input_ids"][-1] != closing for item in _items(sliced))  # the option was not lost on the way


@pytest.mark.parametrize("reader", [TokenizedTextDataset, StreamingTextDataset], ids=["map", "stream"])
def test_ids_field_moved_to_from_ids_and_gives_the_same_items(parquet, tokenizer, reader):
    expected = reader.from_ids(parquet, tokenizer, label_field="label", ids_field="input_ids")
    dataset = _old(lambda: reader(parquet, tokenizer, label_field="label", ids_field="input_ids"),
                   f"use {reader.__name__}.from_ids(")
    assert type(dataset) is reader and _items(dataset) == _items(expected)
    no_tokenizer = _old(lambda: reader(parquet, ids_field="input_ids", pad_id=0), "ids_field=...")
    assert _items(no_tokenizer) == _items(reader.from_ids(parquet, pad_id=0))


@pytest.mark.parametrize("reader", [TokenizedTextDataset, StreamingTextDataset], ids=["map", "stream"])
def test_vocab_size_moved_into_read_options_and_gives_the_same_items(parquet, tokenizer, reader):
    expected = reader.from_ids(parquet, tokenizer, label_field="label", read_options=ReadOptions(vocab_size=5000))
    dataset = _old(lambda: reader.from_ids(parquet, tokenizer, label_field="label", vocab_size=5000),
                   "from_ids(vocab_size=...) is deprecated: pass read_options=ReadOptions(vocab_size=...)")
    assert _items(dataset) == _items(expected)
    with pytest.warns(DeprecationWarning) as both:  # the constructor's old spelling: two moves
        reader(parquet, tokenizer, label_field="label", ids_field="input_ids", vocab_size=5000)
    assert [str(w.message).split(" is deprecated")[0] for w in both] == [
        f"{reader.__name__}(vocab_size=...)", f"{reader.__name__}(..., ids_field=...)"]


STREAMING = {
    "shuffle_buffer": ({"shuffle_buffer": 7, "seed": 3}, {"order": StreamOrder(shuffle_buffer=7, seed=3)},
                       "order=StreamOrder(shuffle_buffer=..., seed=...)"),
    "rank": ({"rank": 1, "world_size": 2}, {"order": StreamOrder(rank=1, world_size=2)},
             "order=StreamOrder(rank=..., world_size=...)"),
    "truncation": ({"truncation": "slice", "max_length": 6},
                   {"read_options": ReadOptions(truncation="slice"), "max_length": 6}, "read_options=ReadOptions(truncation=...)"),
    "max_line_chars": ({"max_line_chars": 10_000}, {"read_options": ReadOptions(max_line_chars=10_000)}, "max_line_chars=..."),
    "max_row_group_bytes": ({"max_row_group_bytes": 2**20}, {"read_options": ReadOptions(max_row_group_bytes=2**20)},
                            "max_row_group_bytes=..."),
}


@pytest.mark.parametrize("source", ["jsonl", "parquet"])
@pytest.mark.parametrize("moved", STREAMING)
def test_a_moved_keyword_of_the_stream_warns_and_gives_the_same_items(fixtures, parquet, tokenizer, moved, source):
    path = fixtures / "text" / "labeled.jsonl" if source == "jsonl" else parquet
    old, new, pattern = STREAMING[moved]
    expected = StreamingTextDataset(path, tokenizer, label_field="label", **new)
    stream = _old(lambda: StreamingTextDataset(path, tokenizer, label_field="label", **old), pattern)
    assert stream.shuffle_buffer == expected.shuffle_buffer and (stream.rank, stream.world_size) == (
        expected.rank, expected.world_size)
    assert _items(stream) == _items(expected) and len(_items(stream)) > 0


def test_an_old_keyword_beside_its_new_home_is_refused_and_an_unread_option_is_named(fixtures, tokenizer):
    path = fixtures / "text" / "labeled.jsonl"
    with pytest.raises(TypeError, match=r"verify=\.\.\. and read_options=\.\.\. both given"):
        TokenizedTextDataset(path, tokenizer, verify=True, read_options=ReadOptions())
    with pytest.raises(TypeError, match=r"seed=\.\.\. and order=\.\.\. both given"):
        StreamingTextDataset(path, tokenizer, seed=1, order=StreamOrder(shuffle_buffer=2))
    with pytest.raises(ValueError, match=r"TokenizedTextDataset does not read read_options.strict_decode; it reads only "):
        TokenizedTextDataset(path, tokenizer, read_options=ReadOptions(strict_decode=True))
    with pytest.raises(ValueError, match=r"from_ids does not read read_options.max_line_chars"):
        TokenizedTextDataset.from_ids(path, read_options=ReadOptions(max_line_chars=5))
    with pytest.raises(TypeError, match="unexpected keyword argument 'cache_dir'"):
        TokenizedTextDataset.from_ids(path, cache_dir="somewhere")
    with pytest.raises(TypeError, match="order must be a recipes.core.StreamOrder"):
        StreamingTextDataset(path, tokenizer, order={"seed": 1})


def test_the_old_and_the_new_spelling_find_the_same_token_cache(fixtures, tokenizer, tmp_path, monkeypatch):
    path = fixtures / "text" / "labeled.jsonl"
    built = _old(lambda: TokenizedTextDataset(path, tokenizer, max_length=6, truncation="slice", cache_dir=tmp_path),
                 "truncation=...")

    def refuse(*args, **kwargs):
        raise AssertionError("the cache built under the old spelling should have been found")

    monkeypatch.setattr("recipes.text.tokenized.encode_texts", refuse)
    found = TokenizedTextDataset(path, tokenizer, max_length=6, cache_dir=tmp_path, read_options=ReadOptions(truncation="slice"))
    assert _items(found) == _items(built) and len(list(tmp_path.glob("*.json"))) == 1
