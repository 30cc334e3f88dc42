"""ids_field: a Parquet column of token ids read without tokenising gives the batches of the text
column it was made from; bad ids and rows are named by file, row and row group."""

import json
from functools import partial

import datasets
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from tokenizers import Tokenizer

from recipes.core.contracts.errors import DataError
from recipes.text import StreamingTextDataset, TokenizedTextDataset, pack_collate, streaming_loader, text_loader
from recipes.core.contracts.read_options import ReadOptions
from recipes.core.sampling.stream_order import StreamOrder
from tests.harness import assert_same_batches, check_resume, with_skip_warnings
from tests.special_tokens import bert_style, t5_style, truncated

ID_TYPES = {"int32": pa.int32(), "int64": pa.int64()}


pytestmark = pytest.mark.usefixtures("quiet_datasets")  # rows: tests/text/conftest.py


def _write(path, tokenizer, rows, id_type=ID_TYPES["int32"], *, special_tokens=True, row_group_size=9, **extra):
    """``text``, ``label`` and ``input_ids`` (the tokenizer's ids of the text) in small row groups."""
    texts = [row["text"] for row in rows]
    ids = [tokenizer.encode(text, add_special_tokens=special_tokens).ids for text in texts]
    columns = {"text": texts, "label": [row["label"] for row in rows], "input_ids": pa.array(ids, pa.list_(id_type))}
    pq.write_table(pa.table(columns | extra), path, row_group_size=row_group_size)
    return path


def _ids(dataset):
    return [dataset[i]["input_ids"].tolist() for i in range(len(dataset))]


def _epochs(loader, count=2):
    return [batch for _ in range(count) for batch in loader]


@pytest.mark.parametrize("id_type", ID_TYPES, ids=str)
@pytest.mark.parametrize("train", [True, False], ids=["train", "eval"])
def test_loader_batches_over_the_ids_equal_those_over_the_tokenised_text(tmp_path, tokenizer, rows, id_type, train):
    path = _write(tmp_path / "ids.parquet", tokenizer, rows, ID_TYPES[id_type])
    ids = TokenizedTextDataset.from_ids(path, None, ids_field="input_ids", label_field="label", pad_id=0)
    text = TokenizedTextDataset(path, tokenizer, text_field="text", label_field="label", pad_id=0)
    assert ids.line_numbers.tolist() == text.line_numbers.tolist() == list(range(len(rows)))
    for options in ({"batch_size": 8}, {"max_tokens": 96}, {"batch_size": 8, "collate_fn": pack_collate}):
        make = partial(text_loader, train=train, device="cpu", seed=5, num_workers=0, **options)
        assert_same_batches(_epochs(make(ids)), _epochs(make(text)))


@pytest.mark.parametrize("id_type", ID_TYPES, ids=str)
@pytest.mark.parametrize("train", [True, False], ids=["train", "eval"])
def test_stream_batches_over_the_ids_equal_those_over_the_tokenised_text(tmp_path, tokenizer, rows, id_type, train):
    path = _write(tmp_path / "ids.parquet", tokenizer, rows, ID_TYPES[id_type], row_group_size=7)
    options = {"label_field": "label", "order": StreamOrder(shuffle_buffer=10, seed=2), "pad_id": 0}
    ids = StreamingTextDataset.from_ids(path, ids_field="input_ids", **options)
    text = StreamingTextDataset(path, tokenizer, **options)
    for collate in (None, pack_collate):
        make = partial(streaming_loader, batch_size=8, train=train, device="cpu", seed=2, num_workers=0, collate_fn=collate)
        assert_same_batches(_epochs(make(ids)), _epochs(make(text)))


def test_a_datasets_object_and_other_list_types_give_the_same_items(tmp_path, tokenizer, rows):
    data = datasets.Dataset.from_list(rows).map(lambda row: {"input_ids": tokenizer.encode(row["text"]).ids})
    expected = [tokenizer.encode(row["text"]).ids for row in rows]
    assert _ids(TokenizedTextDataset.from_ids(data, ids_field="input_ids")) == expected
    assert [item["input_ids"].tolist() for item in StreamingTextDataset.from_ids(data, ids_field="input_ids")] == expected
    for kind in (pa.large_list(pa.uint16()), pa.list_(pa.uint64())):
        pq.write_table(pa.table({"input_ids": pa.array(expected, kind)}), tmp_path / "d.parquet", row_group_size=50)
        assert _ids(TokenizedTextDataset.from_ids(tmp_path / "d.parquet", ids_field="input_ids")) == expected
    square = [ids[:3] for ids in expected]
    pq.write_table(pa.table({"input_ids": pa.array(square, pa.list_(pa.int32(), 3))}), tmp_path / "f.parquet", row_group_size=7)
    assert _ids(TokenizedTextDataset.from_ids(tmp_path / "f.parquet", ids_field="input_ids")) == square


def test_string_labels_are_numbered_as_the_text_path_numbers_them(tmp_path, tokenizer, rows):
    named = [{"text": row["text"], "label": ["neg", "pos", "neutral"][row["label"] % 3]} for row in rows]
    path = _write(tmp_path / "named.parquet", tokenizer, named)
    ids = TokenizedTextDataset.from_ids(path, ids_field="input_ids", label_field="label")
    text = TokenizedTextDataset(path, tokenizer, label_field="label")
    assert ids.label_names == text.label_names == ["neg", "neutral", "pos"]
    assert ids.labels.tolist() == text.labels.tolist()
    with pytest.raises(DataError, match=r"named.parquet row 0 \(row group 0\): label 'neg' is not an integer"):
        list(StreamingTextDataset.from_ids(path, ids_field="input_ids", label_field="label"))


@pytest.mark.parametrize("max_length", [5, 12])
def test_max_length_with_the_tokenizer_keeps_its_closing_token_as_the_text_path_does(tmp_path, rows, max_length):
    texts = [row["text"] for row in rows]
    for styled in (bert_style(texts), t5_style(texts)):
        path = _write(tmp_path / "ids.parquet", styled, rows)
        expected = [truncated(styled, text, max_length) for text in texts]
        cut = TokenizedTextDataset.from_ids(path, styled, ids_field="input_ids", max_length=max_length)
        assert _ids(cut) == _ids(TokenizedTextDataset(path, styled, max_length=max_length)) == expected
        streamed = StreamingTextDataset.from_ids(path, styled, ids_field="input_ids", max_length=max_length)
        assert [item["input_ids"].tolist() for item in streamed] == expected
        closing = styled.encode("a").ids[-1]
        assert any(len(ids) == max_length for ids in expected) and all(ids[-1] == closing for ids in _ids(cut))
        stored = [styled.encode(text).ids for text in texts]  # without a tokenizer, and with "slice": a slice
        assert _ids(TokenizedTextDataset.from_ids(path, ids_field="input_ids", max_length=max_length)) == [s[:max_length] for s in stored]
        sliced = TokenizedTextDataset.from_ids(path, styled, ids_field="input_ids", max_length=max_length,
                                               read_options=ReadOptions(truncation="slice"))
        assert _ids(sliced) == _ids(TokenizedTextDataset(path, styled, max_length=max_length,
                                                         read_options=ReadOptions(truncation="slice")))


def test_a_left_truncating_tokenizer_keeps_the_end_of_the_stored_ids(tmp_path, rows):
    texts = [row["text"] for row in rows]
    styled = bert_style(texts)
    path = _write(tmp_path / "ids.parquet", styled, rows)
    styled.enable_truncation(64, direction="left")
    oracle = Tokenizer.from_str(styled.to_str())
    oracle.enable_truncation(7, direction="left")
    expected = [oracle.encode(text).ids for text in texts]
    assert any(ids[1:-1] != styled.encode(text).ids[1:6] for ids, text in zip(expected, texts))  # the end was kept
    assert _ids(TokenizedTextDataset.from_ids(path, styled, ids_field="input_ids", max_length=7)) == expected
    assert _ids(TokenizedTextDataset(path, styled, max_length=7)) == expected


def test_ids_stored_without_the_special_tokens_are_not_cut_as_if_they_had_them(tmp_path, rows):
    styled = bert_style([row["text"] for row in rows])
    path = _write(tmp_path / "bare.parquet", styled, rows, special_tokens=False)
    with pytest.raises(DataError, match=r"bare.parquet row 0 \(row group 0\): \d+ ids, over the 6 .*do not begin with "
                                        r"\[2\] and end with \[3\].*truncation='slice'"):
        TokenizedTextDataset.from_ids(path, styled, ids_field="input_ids", max_length=6)
    plain = TokenizedTextDataset.from_ids(path, styled, ids_field="input_ids", max_length=6,
                                          read_options=ReadOptions(truncation="slice"))
    assert _ids(plain) == [styled.encode(row["text"], add_special_tokens=False).ids[:6] for row in rows]


def _bad_ids(tmp_path, column):
    path = tmp_path / "bad.parquet"
    pq.write_table(pa.table({"input_ids": column}), path, row_group_size=3)
    return path


@pytest.mark.parametrize(
    "ids, options, message",
    [
        ([[1, 2], [3], [4, 5], [6], [7, -1, 2]], {}, r"row 4 \(row group 1\): id -1 at position 1 .*out of range"),
        ([[1, 2], [3], [4, 5], [6, 800]], {}, r"row 3 \(row group 1\): id 800 at position 1 .*vocab_size 800"),
        ([[1, 2], [3, 60], [4]], {"read_options": ReadOptions(vocab_size=50)}, r"row 1 \(row group 0\): id 60 .*vocab_size 50"),
        ([[1, 2], [3], [4], [5], None], {}, r"row 4 \(row group 1\): column 'input_ids' is null"),
        ([[1, 2], [], [4]], {}, r"row 1 \(row group 0\): column 'input_ids' holds no ids"),
        ([[1, 2], [3, None], [4]], {}, r"row 1 \(row group 0\): the id at position 1 of column 'input_ids' is null"),
    ],
    ids=["negative", "over-the-tokenizer-vocab", "over-vocab-size", "null-row", "empty-row", "null-id"],
)
def test_a_bad_row_names_file_row_and_row_group_or_is_skipped(tmp_path, tokenizer, ids, options, message):
    path = _bad_ids(tmp_path, pa.array(ids, pa.list_(pa.int64())))
    with pytest.raises(DataError, match=r"bad.parquet " + message):
        TokenizedTextDataset.from_ids(path, tokenizer, ids_field="input_ids", **options)
    with pytest.raises(DataError, match=r"bad.parquet " + message):
        list(StreamingTextDataset.from_ids(path, tokenizer, ids_field="input_ids", **options))
    bad = int(message.split(" ", 2)[1])
    dataset, reasons = with_skip_warnings(
        lambda: TokenizedTextDataset.from_ids(path, tokenizer, ids_field="input_ids", on_error="skip", **options)
    )
    assert len(reasons) == 1 and f"bad.parquet row {bad} (row group {bad // 3})" in reasons[0]
    assert dataset.line_numbers.tolist() == [row for row in range(len(ids)) if row != bad]
    assert _ids(dataset) == [row for k, row in enumerate(ids) if k != bad]
    streamed, reasons = with_skip_warnings(
        lambda: list(StreamingTextDataset.from_ids(path, tokenizer, ids_field="input_ids", on_error="skip", **options))
    )
    assert len(reasons) == 1 and [item["index"] for item in streamed] == dataset.line_numbers.tolist()


@pytest.mark.parametrize(
    "column, kind",
    [(pa.array([[1.0, 2.0], [3.0]]), "lists of double"), (pa.array(["1 2", "3"]), "string"), (pa.array([1, 2]), "int64")],
    ids=["floats", "strings", "scalars"],
)
def test_a_column_that_is_not_integer_lists_is_named_and_never_skipped(tmp_path, tokenizer, column, kind):
    path = _bad_ids(tmp_path, column)
    for on_error in ("raise", "skip"):
        for reader in (TokenizedTextDataset, StreamingTextDataset):
            with pytest.raises(DataError, match=rf"bad.parquet row group 0 \(rows 0-1\): column 'input_ids' holds {kind}"):
                reader.from_ids(path, ids_field="input_ids", on_error=on_error)


def test_a_missing_column_lists_the_columns_the_file_has(tmp_path, tokenizer, rows):
    path = _write(tmp_path / "d.parquet", tokenizer, rows)
    pattern = r"d.parquet: no column \['token_ids'\] \(columns: \['text', 'label', 'input_ids'\]\); pass ids_field="
    with pytest.raises(DataError, match=pattern):
        TokenizedTextDataset.from_ids(path, ids_field="token_ids")
    with pytest.raises(DataError, match=pattern):
        StreamingTextDataset.from_ids(path, ids_field="token_ids")


def test_a_bad_label_is_named_by_row_and_skipped_with_its_row(tmp_path, tokenizer, rows):
    labels = pa.array([row["label"] if k != 10 else None for k, row in enumerate(rows)])
    path = _write(tmp_path / "d.parquet", tokenizer, rows, label=labels)
    with pytest.raises(DataError, match=r"d.parquet row 10 \(row group 1\): column 'label' is null"):
        TokenizedTextDataset.from_ids(path, ids_field="input_ids", label_field="label")
    dataset, reasons = with_skip_warnings(
        lambda: TokenizedTextDataset.from_ids(path, ids_field="input_ids", label_field="label", on_error="skip")
    )
    text, text_reasons = with_skip_warnings(lambda: TokenizedTextDataset(path, tokenizer, label_field="label", on_error="skip"))
    assert len(reasons) == len(text_reasons) == 1 and 10 not in dataset.line_numbers
    assert _ids(dataset) == _ids(text) and dataset.labels.tolist() == text.labels.tolist()


def test_without_a_pad_id_padding_asks_for_one_and_packing_works(tmp_path, tokenizer, rows):
    path = _write(tmp_path / "d.parquet", tokenizer, rows)
    dataset = TokenizedTextDataset.from_ids(path, ids_field="input_ids")
    with pytest.raises(ValueError, match=r"TokenizedTextDataset\(.*d.parquet, no tokenizer\): .*pass pad_id="):
        text_loader(dataset, 8, device="cpu", num_workers=0)
    packed = next(iter(text_loader(dataset, 8, train=False, device="cpu", num_workers=0, collate_fn=pack_collate)))
    assert packed["input_ids"].shape[1] == sum(len(ids) for ids in _ids(dataset)[:8])
    stream = StreamingTextDataset.from_ids(path, ids_field="input_ids")
    with pytest.raises(ValueError, match="pass pad_id="):
        streaming_loader(stream, 8, device="cpu", num_workers=0)
    assert TokenizedTextDataset.from_ids(path, tokenizer, ids_field="input_ids").pad_id == tokenizer.token_to_id("[PAD]")


def test_what_ids_field_cannot_do_is_refused_by_name(tmp_path, fixtures, tokenizer, rows):
    path = _write(tmp_path / "d.parquet", tokenizer, rows)
    for reader in (TokenizedTextDataset, StreamingTextDataset):
        with pytest.raises(ValueError, match=r"labeled.jsonl: ids_field reads|labeled.jsonl: ids_field streams"):
            reader.from_ids(fixtures / "text" / "labeled.jsonl", tokenizer, ids_field="input_ids")
        with pytest.raises(ValueError, match=r"needs a tokenizer .*from_ids\(\.\.\.\)"):
            reader(path)
        with pytest.raises(ValueError, match="ReadOptions.vocab_size must be a positive int or None, got 0"):
            reader.from_ids(path, ids_field="input_ids", read_options=ReadOptions(vocab_size=0))
        with pytest.raises(TypeError, match="unexpected keyword argument 'vocab_size'"):
            reader.from_ids(path, tokenizer, ids_field="input_ids", vocab_size=900)  # read_options= holds it
        with pytest.raises(ValueError, match="does not read read_options.vocab_size"):
            reader(path, tokenizer, read_options=ReadOptions(vocab_size=800))  # the bound of stored ids: text has none
        with pytest.raises(TypeError, match="unexpected keyword argument 'text_field'"):
            reader.from_ids(path, ids_field="input_ids", text_field="text")  # from_ids lists what it takes
    with pytest.raises(TypeError, match="unexpected keyword argument 'ids_field'"):  # from_ids reads stored ids
        TokenizedTextDataset(path, tokenizer, ids_field="input_ids", cache_dir=tmp_path / "cache")
    assert not (tmp_path / "cache").exists()


@pytest.mark.parametrize("workers", [0, 2], ids=["workers0", "workers2"])
def test_an_ids_stream_resumes_mid_epoch_with_the_batches_of_the_tokenised_one(tmp_path, tokenizer, rows, workers):
    path = _write(tmp_path / "ids.parquet", tokenizer, rows, row_group_size=9)

    def make(ids_field="input_ids"):  # the tokenizer cuts the ids as it cuts the text
        stream = StreamingTextDataset.from_ids(path, tokenizer, ids_field=ids_field, label_field="label", pad_id=0,
                                               max_length=16, order=StreamOrder(shuffle_buffer=10, seed=1))
        return streaming_loader(stream, 8, device="cpu", seed=1, stateful=True, num_workers=workers)

    loader = make(ids_field=None)
    reference = [list(loader) for _ in range(3)]  # one loader: its epochs advance
    for stop in ("1", "mid"):
        check_resume(make, stop, len(reference[0]), reference)
    state = make().state_dict()
    assert json.dumps(state) and "input_ids" not in json.dumps(state)


def test_ids_are_stored_flat_in_the_smallest_dtype(tmp_path, tokenizer, rows):
    path = _write(tmp_path / "d.parquet", tokenizer, rows, pa.int64())
    dataset = TokenizedTextDataset.from_ids(path, ids_field="input_ids")
    assert dataset.tokens.ids.dtype == np.uint16
    assert dataset[3]["input_ids"].dtype == torch.int64
    pq.write_table(pa.table({"input_ids": pa.array([[1, 70_000]], pa.list_(pa.int64()))}), tmp_path / "big.parquet")
    assert TokenizedTextDataset.from_ids(tmp_path / "big.parquet", ids_field="input_ids").tokens.ids.dtype == np.uint32


def test_the_row_group_limit_holds_for_the_id_column(tmp_path, tokenizer, rows):
    path = _write(tmp_path / "d.parquet", tokenizer, rows, row_group_size=60)
    pattern = r"d.parquet: row group 0 declares [\d,]+ bytes uncompressed .* columns \['input_ids'\].*max_row_group_bytes="
    with pytest.raises(DataError, match=pattern):
        TokenizedTextDataset.from_ids(path, ids_field="input_ids", read_options=ReadOptions(max_row_group_bytes=1000))
    with pytest.raises(DataError, match=pattern):
        list(StreamingTextDataset.from_ids(path, ids_field="input_ids",
                                           read_options=ReadOptions(max_row_group_bytes=1000)))
    assert len(TokenizedTextDataset.from_ids(path, ids_field="input_ids",
                                             read_options=ReadOptions(max_row_group_bytes=100_000))) == len(rows)


def test_a_bad_id_in_a_datasets_object_is_named_by_its_row(tokenizer, rows):
    data = datasets.Dataset.from_dict({"input_ids": [[5, 6], [7], [8, 900], [9]]})
    with pytest.raises(DataError, match=r"datasets.Dataset \(4 rows\) row 2: id 900 at position 1 .*vocab_size 800"):
        TokenizedTextDataset.from_ids(data, tokenizer, ids_field="input_ids")
