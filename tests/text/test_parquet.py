"""Parquet sources for TokenizedTextDataset and StreamingTextDataset: the same items as the JSONL route."""

import json

import datasets
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from recipes.core.contracts.errors import DataError
from recipes.text import StreamingTextDataset, TokenizedTextDataset
from recipes.core.contracts.read_options import ReadOptions
from recipes.core.sampling.stream_order import StreamOrder
from tests.harness import with_skip_warnings
from tests.special_tokens import truncated

pytestmark = pytest.mark.usefixtures("quiet_datasets")  # rows: tests/text/conftest.py


def _items(dataset):
    return [(item["input_ids"].tolist(), item["index"], item.get("label")) for item in dataset]


def _same_as_jsonl(dataset, reference):
    assert len(dataset) == len(reference)
    assert [_items([dataset[i]])[0] for i in range(len(dataset))] == [_items([reference[i]])[0] for i in range(len(reference))]


@pytest.mark.parametrize("max_length", [None, 6])
def test_pyarrow_file_of_small_row_groups_gives_the_jsonl_items(tmp_path, fixtures, tokenizer, rows, max_length):
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "labeled.parquet", row_group_size=9)
    assert pq.ParquetFile(tmp_path / "labeled.parquet").metadata.num_row_groups == 14
    dataset = TokenizedTextDataset(tmp_path / "labeled.parquet", tokenizer, label_field="label", max_length=max_length)
    reference = TokenizedTextDataset(fixtures / "text" / "labeled.jsonl", tokenizer, label_field="label", max_length=max_length)
    _same_as_jsonl(dataset, reference)
    assert dataset[5]["input_ids"].tolist() == truncated(tokenizer, rows[5]["text"], max_length)
    assert dataset.line_numbers.tolist() == list(range(len(rows)))


def test_datasets_written_shards_read_as_a_glob_equal_the_jsonl_rows(tmp_path, tokenizer, rows):
    named = [{"text": row["text"], "label": ["neg", "pos", "neutral"][row["label"] % 3]} for row in rows]
    (tmp_path / "named.jsonl").write_text("".join(json.dumps(row) + "\n" for row in named), encoding="utf-8")
    for shard, part in enumerate((named[:70], named[70:])):
        datasets.Dataset.from_list(part).to_parquet(tmp_path / f"train-0000{shard}-of-00002.parquet", batch_size=16)
    dataset = TokenizedTextDataset(str(tmp_path / "train-*.parquet"), tokenizer, label_field="label")
    reference = TokenizedTextDataset(tmp_path / "named.jsonl", tokenizer, label_field="label")
    _same_as_jsonl(dataset, reference)
    assert dataset.label_names == reference.label_names == ["neg", "neutral", "pos"]
    listed = TokenizedTextDataset(sorted(tmp_path.glob("train-*.parquet")), tokenizer, label_field="label")
    _same_as_jsonl(listed, reference)


def test_a_datasets_object_is_read_through_arrow_in_its_own_row_order(tokenizer, rows):
    data = datasets.Dataset.from_list(rows).shuffle(seed=3).select(range(40))
    dataset = TokenizedTextDataset(data, tokenizer, label_field="label")
    assert len(dataset) == 40
    for i, row in enumerate(data):
        assert dataset[i]["input_ids"].tolist() == tokenizer.encode(row["text"]).ids
        assert dataset[i]["label"] == row["label"]


def test_a_missing_column_lists_the_columns_the_file_has(tmp_path, tokenizer, rows):
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "d.parquet")
    with pytest.raises(DataError, match=r"d.parquet: no column \['body'\] \(columns: \['label', 'text'\]\)"):
        TokenizedTextDataset(tmp_path / "d.parquet", tokenizer, text_field="body")
    with pytest.raises(DataError, match=r"no column \['stars'\].*label_field="):
        StreamingTextDataset(tmp_path / "d.parquet", tokenizer, label_field="stars")


def test_null_and_empty_texts_name_the_row_or_are_skipped(tmp_path, tokenizer):
    table = pa.table({"text": ["good one", None, "fine", "   ", "last"]})
    pq.write_table(table, tmp_path / "d.parquet", row_group_size=2)
    with pytest.raises(DataError, match=r"d.parquet row 1: column 'text' is null"):
        TokenizedTextDataset(tmp_path / "d.parquet", tokenizer)
    dataset, reasons = with_skip_warnings(lambda: TokenizedTextDataset(tmp_path / "d.parquet", tokenizer, on_error="skip"))
    assert [reason.split("d.parquet ")[1].split(":")[0] for reason in reasons] == ["row 1", "row 3"]
    assert [dataset[i]["input_ids"].tolist() for i in range(3)] == [tokenizer.encode(t).ids for t in ("good one", "fine", "last")]
    assert dataset.line_numbers.tolist() == [0, 2, 4]


def test_the_token_cache_keys_parquet_by_content(tmp_path, tokenizer, rows):
    path = tmp_path / "d.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path, row_group_size=50)
    first = TokenizedTextDataset(path, tokenizer, label_field="label", cache_dir=tmp_path / "cache")
    again = TokenizedTextDataset(path, tokenizer, label_field="label", cache_dir=tmp_path / "cache")
    assert len(list((tmp_path / "cache").glob("*.json"))) == 1
    _same_as_jsonl(again, first)
    pq.write_table(pa.Table.from_pylist(rows[:10]), path)
    assert len(TokenizedTextDataset(path, tokenizer, label_field="label", cache_dir=tmp_path / "cache")) == 10


def test_a_parquet_stream_yields_the_jsonl_stream_ids_with_rows_as_index(tmp_path, fixtures, tokenizer, rows):
    table = pa.Table.from_pylist(rows)
    pq.write_table(table.slice(0, 50), tmp_path / "s-0.parquet", row_group_size=8)
    pq.write_table(table.slice(50), tmp_path / "s-1.parquet", row_group_size=11)
    stream = StreamingTextDataset(str(tmp_path / "s-*.parquet"), tokenizer, label_field="label", max_length=12)
    reference = StreamingTextDataset(fixtures / "text" / "labeled.jsonl", tokenizer, label_field="label", max_length=12)
    got, expected = list(stream), list(reference)
    assert [item["input_ids"].tolist() for item in got] == [item["input_ids"].tolist() for item in expected]
    assert [item["label"] for item in got] == [row["label"] for row in rows]
    assert [item["index"] for item in got] == list(range(len(rows)))


@pytest.mark.parametrize("world_size", [2, 3])
def test_parquet_stream_slots_read_every_row_once(tmp_path, tokenizer, rows, world_size):
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "s.parquet", row_group_size=7)
    data = datasets.Dataset.from_list(rows)
    for source in (tmp_path / "s.parquet", data):
        seen = []
        for rank in range(world_size):
            stream = StreamingTextDataset(source, tokenizer,
                                          order=StreamOrder(rank=rank, world_size=world_size, shuffle_buffer=5, seed=1))
            seen += [item["index"] for item in stream]
        assert sorted(seen) == list(range(len(rows)))


@pytest.mark.parametrize("workers", [0, 2], ids=["workers0", "workers2"])
def test_a_parquet_stream_resumes_mid_epoch_exactly(tmp_path, tokenizer, rows, workers):
    from recipes.text import streaming_loader
    from tests.harness import check_resume_mid_epoch

    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "labeled.parquet", row_group_size=9)

    def make():
        stream = StreamingTextDataset(tmp_path / "labeled.parquet", tokenizer, label_field="label",
                                      order=StreamOrder(shuffle_buffer=10, seed=1))
        return streaming_loader(stream, 8, device="cpu", seed=1, stateful=True, num_workers=workers)

    check_resume_mid_epoch(make)


@pytest.mark.usefixtures("quick_retries")
@pytest.mark.parametrize("workers", [0, 2], ids=["workers0", "workers2"])
def test_parquet_over_http_with_503s_and_cut_bodies_gives_the_local_items(tmp_path, tokenizer, rows, workers):
    from recipes.text import streaming_loader
    from tests.servers import FaultyHTTPServer

    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "labeled.parquet", row_group_size=9)
    local = TokenizedTextDataset(tmp_path / "labeled.parquet", tokenizer, label_field="label")
    with FaultyHTTPServer(tmp_path, fail_every=4, cut_every=3) as server:
        url = server.url("labeled.parquet")
        remote = TokenizedTextDataset(url, tokenizer, label_field="label")
        stream = StreamingTextDataset(url, tokenizer, label_field="label")
        streamed = [batch for batch in streaming_loader(stream, 8, train=False, device="cpu", num_workers=workers)]
    _same_as_jsonl(remote, local)
    by_index = sorted((int(i), row[:n].tolist()) for b in streamed for i, row, n in zip(b["index"], b["input_ids"], b["lengths"]))
    assert by_index == [(i, local[i]["input_ids"].tolist()) for i in range(len(local))]
    assert server.faults["503"] > 0 and server.faults["cut"] > 0


def test_a_row_group_over_max_row_group_bytes_is_refused_by_both_datasets(tmp_path, tokenizer, rows):
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "labeled.parquet", row_group_size=9)
    meta = pq.ParquetFile(tmp_path / "labeled.parquet").metadata
    declared = meta.row_group(0).column(meta.schema.names.index("text")).total_uncompressed_size
    with pytest.raises(DataError, match=f"labeled.parquet: row group 0 declares {declared:,} bytes uncompressed and 9 rows"):
        TokenizedTextDataset(tmp_path / "labeled.parquet", tokenizer,
                             read_options=ReadOptions(max_row_group_bytes=declared))
    with pytest.raises(DataError, match=f"labeled.parquet: row group 0 declares {declared:,} bytes uncompressed and 9 rows"):
        list(StreamingTextDataset(tmp_path / "labeled.parquet", tokenizer,
                                  read_options=ReadOptions(max_row_group_bytes=declared)))
    assert len(TokenizedTextDataset(tmp_path / "labeled.parquet", tokenizer,
                                    read_options=ReadOptions(max_row_group_bytes=2**20))) == len(rows)
