"""TokenizedTextDataset(..., extra_fields=(...)): a numeric field of each row carried into the items
and batches, from JSONL, CSV and Parquet, through the token cache and spawned workers; bad values
named by line and field. The oracle is the file itself, read with json / csv / pyarrow."""

import csv
import json
import warnings

import numpy as np
import pytest
import torch

from recipes.core import DataError, MixedDataset, SkippedSampleWarning
from recipes.text import TokenizedTextDataset, pack_collate, text_loader


@pytest.fixture(scope="module")
def weighted(rows, tmp_path_factory):
    """labeled.jsonl with a float ``weight``, an int ``n`` and a boolean ``flag`` on every row, and a blank line."""
    folder = tmp_path_factory.mktemp("extra-fields")
    extended = [row | {"weight": k / 8, "n": 3 * k, "flag": k % 3 == 0} for k, row in enumerate(rows)]
    lines = [json.dumps(row) for row in extended]
    lines.insert(2, "")
    (folder / "weighted.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder, extended


def _dataset(path, tokenizer, **options):
    return TokenizedTextDataset(path, tokenizer, label_field="label", max_length=32, **options)


def test_each_item_holds_its_rows_numbers_with_the_dtype_of_the_field(weighted, tokenizer):
    folder, extended = weighted
    dataset = _dataset(folder / "weighted.jsonl", tokenizer, extra_fields=("weight", "n", "flag"))
    assert len(dataset) == len(extended)
    for k in (0, 2, len(extended) - 1):
        item = dataset[k]
        assert item["weight"].dtype == torch.float32 and item["weight"].shape == ()
        assert item["weight"].item() == pytest.approx(extended[k]["weight"])
        assert item["n"].dtype == torch.int64 and item["n"].item() == extended[k]["n"]
        assert item["flag"].dtype == torch.int64 and item["flag"].item() == int(extended[k]["flag"])
        assert item["label"] == extended[k]["label"]


def test_the_loader_batches_the_fields_beside_the_ids_in_any_order(weighted, tokenizer):
    folder, extended = weighted
    dataset = _dataset(folder / "weighted.jsonl", tokenizer, extra_fields=("weight", "n"))
    seen = 0
    for batch in text_loader(dataset, 4, seed=0, num_workers=0):  # length-grouped: rows out of file order
        assert batch["weight"].dtype == torch.float32 and batch["weight"].shape == batch["index"].shape
        expected = [extended[index]["weight"] for index in batch["index"].tolist()]
        assert batch["weight"].tolist() == pytest.approx(expected)
        assert batch["n"].tolist() == [extended[index]["n"] for index in batch["index"].tolist()]
        seen += len(batch["index"])
    assert seen > 0
    packed = pack_collate([dataset[0], dataset[5]])
    assert packed["n"].tolist() == [extended[0]["n"], extended[5]["n"]]


def test_csv_cells_are_read_as_numbers(weighted, tokenizer, tmp_path):
    _, extended = weighted
    with open(tmp_path / "weighted.csv", "w", newline="", encoding="utf-8") as file:
        writer = csv.DictWriter(file, ["text", "label", "weight", "n"])
        writer.writeheader()
        writer.writerows({key: row[key] for key in ("text", "label", "weight", "n")} for row in extended)
    dataset = _dataset(tmp_path / "weighted.csv", tokenizer, extra_fields=("weight", "n"))
    assert dataset.extras["n"].dtype == np.int64 and dataset.extras["weight"].dtype == np.float32
    assert dataset.extras["n"].tolist() == [row["n"] for row in extended]
    assert dataset.extras["weight"].tolist() == pytest.approx([row["weight"] for row in extended])
    with pytest.raises(DataError, match=r"weighted.csv: the header has no column \['w'\].*extra_fields=\.\.\."):
        _dataset(tmp_path / "weighted.csv", tokenizer, extra_fields=("w",))


def test_parquet_columns_and_their_nulls(weighted, tokenizer, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    _, extended = weighted
    table = pa.table({key: [row[key] for row in extended] for key in ("text", "label", "weight", "n")})
    pq.write_table(table, tmp_path / "weighted.parquet", row_group_size=7)
    dataset = _dataset(tmp_path / "weighted.parquet", tokenizer, extra_fields=("n", "weight"))
    assert dataset.extras["n"].tolist() == table.column("n").to_pylist()
    assert dataset.extras["weight"].tolist() == pytest.approx(table.column("weight").to_pylist())
    nulls = table.set_column(3, "n", pa.array([None if k == 9 else k for k in range(len(extended))], pa.int64()))
    pq.write_table(nulls, tmp_path / "nulls.parquet")
    with pytest.raises(DataError, match=r"nulls.parquet row 9: column 'n' is null"):
        _dataset(tmp_path / "nulls.parquet", tokenizer, extra_fields=("n",))
    with pytest.raises(DataError, match=r"no column \['nope'\].*extra_fields=\.\.\."):
        _dataset(tmp_path / "weighted.parquet", tokenizer, extra_fields=("nope",))


def test_a_value_that_is_not_a_number_is_named_by_line_and_field_and_skip_drops_the_line(weighted, tokenizer, tmp_path):
    _, extended = weighted
    lines = [json.dumps(row | ({"weight": "heavy"} if k == 4 else {}) | ({"n": None} if k == 6 else {}))
             for k, row in enumerate(extended)]
    (tmp_path / "bad.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"bad.jsonl line 5: 'weight' \(extra_fields\): 'heavy', not a number"):
        _dataset(tmp_path / "bad.jsonl", tokenizer, extra_fields=("weight",))
    with pytest.raises(DataError, match=r"bad.jsonl line 7: no 'n' field .*pass extra_fields=\.\.\."):
        _dataset(tmp_path / "bad.jsonl", tokenizer, extra_fields=("n",))
    with pytest.warns(SkippedSampleWarning) as caught:
        dataset = _dataset(tmp_path / "bad.jsonl", tokenizer, extra_fields=("weight", "n"), on_error="skip")
    messages = [str(w.message) for w in caught]
    assert "bad.jsonl line 5: 'weight' (extra_fields)" in messages[0] and "bad.jsonl line 7: no 'n'" in messages[1]
    kept = [row for k, row in enumerate(extended) if k not in (4, 6)]
    assert dataset.line_numbers.tolist() == [k + 1 for k in range(len(extended)) if k not in (4, 6)]
    assert dataset.extras["n"].tolist() == [row["n"] for row in kept]


def test_no_field_in_any_line_is_one_error_not_a_skipped_file(weighted, tokenizer):
    folder, _ = weighted
    with pytest.raises(DataError, match=r"no 'wieght' field in any of the .* lines read.*extra_fields=\.\.\."):
        _dataset(folder / "weighted.jsonl", tokenizer, extra_fields=("wieght",), on_error="skip")


def test_the_cache_keeps_the_fields_and_spawned_workers_get_them(weighted, tokenizer, tmp_path):
    folder, extended = weighted
    first = _dataset(folder / "weighted.jsonl", tokenizer, extra_fields=("weight",), cache_dir=tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # read back whole: no DamagedCacheWarning
        again = _dataset(folder / "weighted.jsonl", tokenizer, extra_fields=("weight",), cache_dir=tmp_path)
    assert isinstance(again.extras["weight"], np.memmap)  # read from the cache, not the file
    assert again.extras["weight"].tolist() == first.extras["weight"].tolist()
    other = _dataset(folder / "weighted.jsonl", tokenizer, extra_fields=("n",), cache_dir=tmp_path)
    assert list(other.extras) == ["n"] and other.extras["n"].tolist() == [row["n"] for row in extended]
    loader = text_loader(again, 4, train=False, num_workers=1, multiprocessing_context="spawn")
    for batch in loader:
        assert batch["weight"].tolist() == pytest.approx([extended[k]["weight"] for k in batch["index"].tolist()])


def test_wrong_extra_fields_are_refused_before_reading(weighted, tokenizer, fixtures):
    folder, _ = weighted
    for given, message in (("weight", "a tuple of field names"), (("label",), "'label' is a key of the items"),
                           (("n", "n"), "a name is repeated")):
        with pytest.raises(ValueError, match=message):
            _dataset(folder / "weighted.jsonl", tokenizer, extra_fields=given)
    with pytest.raises(ValueError, match="a .txt file has no fields; extra_fields needs a .jsonl or .csv file"):
        TokenizedTextDataset(fixtures / "text" / "corpus.txt", tokenizer, extra_fields=("n",))


def test_a_mixture_refuses_sources_whose_fields_differ(weighted, tokenizer):
    folder, _ = weighted
    with_weight = _dataset(folder / "weighted.jsonl", tokenizer, extra_fields=("weight",))
    without = _dataset(folder / "weighted.jsonl", tokenizer)
    with pytest.raises(ValueError, match="extra_fields"):
        MixedDataset([with_weight, without], [1, 1], samples_per_epoch=8)
    mixed = MixedDataset([with_weight, with_weight], [1, 1], samples_per_epoch=8)
    assert mixed.extra_fields == ("weight",)


class WithSource(TokenizedTextDataset):
    """docs/copying.md's override: a key added to each item reaches the batch."""

    def __getitem__(self, index):
        item = super().__getitem__(index)
        return item | {"source": f"line-{self.line_numbers[item['index']]}"}


def test_a_key_an_override_adds_reaches_the_batch(weighted, tokenizer):
    folder, _ = weighted
    dataset = WithSource(folder / "weighted.jsonl", tokenizer, label_field="label", extra_fields=("n",))
    batch = next(iter(text_loader(dataset, 4, seed=0, num_workers=0)))
    assert batch["source"] == [f"line-{dataset.line_numbers[k]}" for k in batch["index"].tolist()]
    assert batch["n"].dtype == torch.int64


def test_stored_ids_carry_their_rows_numeric_columns_too(tokenizer, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    ids = [[2, 5 + k, 7, 3] for k in range(20)]
    weights, counts = [k / 4 for k in range(20)], list(range(100, 120))
    flags = [k % 2 == 1 for k in range(20)]
    table = pa.table({"input_ids": ids, "weight": weights, "n": counts, "flag": flags})
    pq.write_table(table, tmp_path / "ids.parquet", row_group_size=6)
    dataset = TokenizedTextDataset.from_ids(tmp_path / "ids.parquet", tokenizer, extra_fields=("weight", "n", "flag"))
    assert dataset.extras["weight"].dtype == np.float32 and dataset.extras["n"].dtype == np.int64
    assert dataset.extras["weight"].tolist() == weights and dataset.extras["n"].tolist() == counts
    assert dataset.extras["flag"].tolist() == [int(flag) for flag in flags]
    batch = next(iter(text_loader(dataset, 4, seed=0, num_workers=0)))
    assert batch["n"].tolist() == [counts[k] for k in batch["index"].tolist()]
    nulls = table.set_column(2, "n", pa.array([None if k == 13 else k for k in range(20)], pa.int64()))
    pq.write_table(nulls, tmp_path / "nulls.parquet", row_group_size=6)
    with pytest.raises(DataError, match=r"nulls.parquet row 13 \(row group 2\): column 'n' is null"):
        TokenizedTextDataset.from_ids(tmp_path / "nulls.parquet", tokenizer, extra_fields=("n",))
    with pytest.warns(SkippedSampleWarning, match="row 13"):
        kept = TokenizedTextDataset.from_ids(tmp_path / "nulls.parquet", tokenizer, extra_fields=("n",), on_error="skip")
    assert kept.line_numbers.tolist() == [k for k in range(20) if k != 13] and 13 not in kept.extras["n"].tolist()
    names = table.append_column("source", pa.array([f"s{k}" for k in range(20)]))
    pq.write_table(names, tmp_path / "names.parquet")
    message = r"names.parquet row 0 \(row group 0\): column 'source' \(extra_fields\) holds 's0', not a number"
    with pytest.raises(DataError, match=message):
        TokenizedTextDataset.from_ids(tmp_path / "names.parquet", tokenizer, extra_fields=("source",))
    with pytest.raises(DataError, match=r"no column \['nope'\].*extra_fields=\.\.\."):
        TokenizedTextDataset.from_ids(tmp_path / "ids.parquet", tokenizer, extra_fields=("nope",))
